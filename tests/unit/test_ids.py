import pytest
from hypothesis import given
from hypothesis import strategies as st

from quire_api.errors import InvalidArgument
from quire_api.ids import (
    U64_MAX,
    LedgerId,
    new_scoped_ledger_id,
    new_uuid7_ledger_id,
    parse_host_port,
    validate_bookie_id,
)


def test_qualified_names_from_the_design():
    assert LedgerId(5, 2**63 - 1).qualified_name == "00000000-0000-0005-7fff-ffffffffffff"
    assert LedgerId(0, 1).qualified_name == "00000000-0000-0000-0000-000000000001"


@pytest.mark.parametrize(
    "text",
    ["00000000-0000-0005-7fff-ffffffffffff", "00000000000000057FFFFFFFFFFFFFFF", "5:9223372036854775807"],
)
def test_every_accepted_form_parses_to_the_same_id(text):
    assert LedgerId.parse(text) == LedgerId(5, 2**63 - 1)


@given(st.integers(0, U64_MAX), st.integers(0, U64_MAX))
def test_qualified_name_round_trips(scope, ledger):
    ledger_id = LedgerId(scope, ledger)
    assert LedgerId.parse(ledger_id.qualified_name) == ledger_id
    assert LedgerId.from_key(ledger_id.key) == ledger_id
    assert len(ledger_id.key) == 16


@pytest.mark.parametrize("text", ["", "nonsense", "1:", ":1", "-1:5", "1:2:3", "0000", "g" * 32, "1:" + str(2**64)])
def test_malformed_ids_are_invalid_argument(text):
    with pytest.raises(InvalidArgument) as caught:
        LedgerId.parse(text)
    assert caught.value.code == "INVALID_ARGUMENT"


def test_ids_sort_by_scope_then_ledger_in_key_and_name_order():
    ids = [LedgerId(1, 5), LedgerId(0, U64_MAX), LedgerId(1, 0), LedgerId(2, 1)]
    assert sorted(ids, key=lambda i: i.key) == sorted(ids, key=lambda i: i.qualified_name) == sorted(ids)


def test_uuid7_ids_have_version_and_variant_and_grow_with_time():
    first = new_uuid7_ledger_id()
    name = first.qualified_name
    assert name[14] == "7" and name[19] in "89ab"
    later = new_uuid7_ledger_id()
    assert later.value >> 80 >= first.value >> 80


def test_scoped_ids_stay_in_their_scope():
    ledger_id = new_scoped_ledger_id(42)
    assert ledger_id.scope_id == 42 and 0 <= ledger_id.ledger_id < 2**63


@pytest.mark.parametrize("bookie_id", ["127.0.0.1:3181", "bookie-0", "a", "host_name.example:99", "x" * 255])
def test_valid_bookie_ids(bookie_id):
    assert validate_bookie_id(bookie_id) == bookie_id


@pytest.mark.parametrize("bookie_id", ["", "readonly", "ReadOnly", "x" * 256, "has space", "a/b", "é"])
def test_invalid_bookie_ids(bookie_id):
    with pytest.raises(InvalidArgument) as caught:
        validate_bookie_id(bookie_id)
    assert caught.value.reason == "ERROR_REASON_INVALID_BOOKIE_ID"


def test_host_port_parsing():
    assert parse_host_port("127.0.0.1:3181") == ("127.0.0.1", 3181)
    assert parse_host_port("bookie-0") is None
    assert parse_host_port("host:0") is None
    assert parse_host_port("host:99999") is None


def test_a_request_may_name_a_ledger_by_its_qualified_name():
    import pytest as _pytest

    from quire_api.errors import InvalidArgument
    from quire_api.ids import LedgerId, ledger_id_from_proto
    from quire_proto.common.v1 import common_pb2

    ledger = LedgerId(2**60 + 3, 2**63 + 5)  # both halves beyond 2^53
    by_name = common_pb2.LedgerId(qualified_name=ledger.qualified_name)
    assert ledger_id_from_proto(by_name) == ledger
    assert ledger_id_from_proto(common_pb2.LedgerId(qualified_name=f"{ledger.scope_id}:{ledger.ledger_id}")) == ledger
    both = common_pb2.LedgerId(scope_id=ledger.scope_id, ledger_id=ledger.ledger_id, qualified_name=str(ledger))
    assert ledger_id_from_proto(both) == ledger
    rounded = common_pb2.LedgerId(scope_id=2**60, ledger_id=2**63, qualified_name=str(ledger))  # as a double rounds
    with _pytest.raises(InvalidArgument) as refused:
        ledger_id_from_proto(rounded)
    assert refused.value.reason == "ERROR_REASON_INVALID_LEDGER_ID" and "rounded" in refused.value.message
    with _pytest.raises(InvalidArgument):
        ledger_id_from_proto(common_pb2.LedgerId(qualified_name="not-an-id"))
