import grpc

from quire.common.v1 import common_pb2
from quire_common.errors import ERROR_CLASSES_BY_CODE, Reason
from quire_common.server import status_for


def test_reason_catalogue_is_the_proto_enum():
    names = {name for name in common_pb2.ErrorReason.keys() if name != "ERROR_REASON_UNSPECIFIED"}
    assert {reason.value for reason in Reason} == names


def test_every_error_class_maps_to_a_real_status_code():
    for code, error_class in ERROR_CLASSES_BY_CODE.items():
        error = error_class("boom")
        status = status_for(error)
        assert status.code == grpc.StatusCode[code].value[0]
        assert status.message == "boom"
        assert status.details[0].type_url.endswith("google.rpc.ErrorInfo")
