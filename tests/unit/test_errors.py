import grpc
from grpc_status import rpc_status

from quire_api.errors import ERROR_CLASSES_BY_CODE, Reason
from quire_api.rpc_status import status_for
from quire_proto.common.v1 import common_pb2


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


def test_retryability_is_a_property_of_the_reason_not_of_the_code():
    from quire_api.errors import Reason, ResourceExhausted, Unavailable

    assert not ResourceExhausted("too big", Reason.ENTRY_TOO_LARGE).retryable
    assert ResourceExhausted("busy", Reason.OVERLOADED).retryable
    assert Unavailable("down").retryable
    assert Unavailable("few", Reason.NOT_ENOUGH_BOOKIES).retry_delay == 5.0


def test_retry_info_is_sent_only_for_retryable_reasons():
    from google.rpc import error_details_pb2

    from quire_api.errors import Reason, ResourceExhausted

    def retry_infos(error):
        found = []
        for detail in status_for(error).details:
            info = error_details_pb2.RetryInfo()
            if detail.Unpack(info):
                found.append(info.retry_delay.ToMilliseconds())
        return found

    assert retry_infos(ResourceExhausted("too big", Reason.ENTRY_TOO_LARGE)) == []
    assert retry_infos(ResourceExhausted("busy", Reason.OVERLOADED)) == [500]


class _FailedCall(grpc.RpcError):
    """A failed call as grpc hands it to a client, from a status the server sent."""

    def __init__(self, status):
        self._status = rpc_status.to_status(status)

    def code(self):
        return self._status.code

    def details(self):
        return self._status.details

    def trailing_metadata(self):
        return self._status.trailing_metadata


def test_client_and_services_decode_the_same_status():
    from quire_api.errors import Reason, ResourceExhausted, Unavailable
    from quire_client.errors import ResourceExhaustedError, UnavailableError, translate
    from quire_common.channels import error_from_rpc

    sent = Unavailable("not enough bookies", Reason.NOT_ENOUGH_BOOKIES, needed="3", available="1")
    call = _FailedCall(status_for(sent))
    client_error = translate(call)
    assert isinstance(client_error, UnavailableError) and isinstance(client_error, Unavailable)
    assert client_error.code == grpc.StatusCode.UNAVAILABLE
    assert client_error.reason == Reason.NOT_ENOUGH_BOOKIES
    assert client_error.details == {"needed": "3", "available": "1"}
    assert client_error.retry_delay == 5.0
    relayed = error_from_rpc(call, "placing the ensemble")  # the next hop keeps reason and details
    assert relayed.reason == Reason.NOT_ENOUGH_BOOKIES and relayed.metadata == {"needed": "3", "available": "1"}
    relayed_again = translate(_FailedCall(status_for(relayed)))
    assert relayed_again.details == {"needed": "3", "available": "1"} and relayed_again.retryable

    too_large = translate(_FailedCall(status_for(ResourceExhausted("entry too large", Reason.ENTRY_TOO_LARGE))))
    assert isinstance(too_large, ResourceExhaustedError) and not too_large.retryable


def test_a_broken_connection_without_details_is_retryable_unavailable():
    from quire_client.errors import UnavailableError, translate

    class Reset(grpc.RpcError):
        def code(self):
            return grpc.StatusCode.UNAVAILABLE

        def details(self):
            return "Socket closed"

        def trailing_metadata(self):
            return ()

    error = translate(Reset())
    assert isinstance(error, UnavailableError) and error.retryable and error.reason == ""
