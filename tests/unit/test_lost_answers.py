"""The pure rules behind retry-safe metadata writes: when a failed compare is
a write's own earlier commit, what a CreateLedger request_id stands for, and
which request_ids are valid."""

from __future__ import annotations

import pytest

from quire_api.errors import DataLoss, InvalidArgument
from quire_api.ids import LedgerId, validate_request_id
from quire_proto.common.v1 import common_pb2
from quire_registry.ledger_records import (
    _EARLIER_PICKED_AFRESH,
    CreateOrder,
    IdMode,
    _parse_request_record,
    _request_record,
    asks_the_same,
    create_fingerprint,
)
from quire_registry.store import Delete, KeyValue, Put, committed_already

K1, K2 = b"/quire/t/ledgers/a", b"/quire/t/create-requests/r"


def kv(key: bytes, value: bytes, lease: int = 0) -> KeyValue:
    return KeyValue(key, value, 10, lease)


def test_puts_found_as_written_are_a_commit():
    ops = [Put(K1, b"record"), Put(K2, b"mapping")]
    assert committed_already(ops, {K1: kv(K1, b"record"), K2: kv(K2, b"mapping")})


def test_a_put_found_with_another_value_or_lease_or_missing_is_not():
    assert not committed_already([Put(K1, b"record")], {K1: kv(K1, b"other")})
    assert not committed_already([Put(K1, b"record", lease_id=7)], {K1: kv(K1, b"record", lease=8)})
    assert not committed_already([Put(K1, b"record")], {K1: None})
    assert not committed_already([Put(K1, b"record"), Put(K2, b"m")], {K1: kv(K1, b"record"), K2: None})


def test_deletes_count_when_the_key_is_gone():
    assert committed_already([Delete(K1)], {K1: None})
    assert not committed_already([Delete(K1)], {K1: kv(K1, b"x")})
    # A move: the old key gone, the new one as written.
    assert committed_already([Delete(K1), Put(K2, b"info", 5)], {K1: None, K2: kv(K2, b"info", 5)})


def test_a_shared_counter_is_not_looked_at_but_something_else_must_be():
    counter = Put(b"/quire/t/idgen/legacy", b"", shared=True)
    assert committed_already([counter, Put(K1, b"record")], {K1: kv(K1, b"record")})
    assert not committed_already([counter], {})
    assert not committed_already([], {})


def metadata(**changes: object) -> common_pb2.LedgerMetadata:
    record = common_pb2.LedgerMetadata(
        format_version=1, ensemble_size=3, write_quorum_size=2, ack_quorum_size=2, password=b"pw"
    )
    for name, value in changes.items():
        setattr(record, name, value)
    return record


def test_the_fingerprint_ignores_what_each_attempt_picks_afresh():
    first = metadata()
    first.ensembles.add(first_entry_id=0, bookie_ids=["a:1", "b:1", "c:1"])
    first.create_time.seconds = 100
    retry = metadata()
    retry.ensembles.add(first_entry_id=0, bookie_ids=["d:1", "e:1", "f:1"])
    retry.create_time.seconds = 200
    retry.create_request_id = "r"
    assert create_fingerprint(IdMode.FRESH, first, None, 0) == create_fingerprint(IdMode.FRESH, retry, None, 0)


def owned_by(gateway: str, session_id: int) -> common_pb2.LedgerMetadata:
    record = metadata()
    record.owner.gateway, record.owner.address, record.owner.session_id = gateway, f"{gateway}:9000", session_id
    return record


def test_the_fingerprint_ignores_the_gateway_that_sends_the_attempt():
    # A retry through another gateway, or after the gateway's session lapsed in a partition and
    # was opened again (PART-3), asks for the same create.
    first = create_fingerprint(IdMode.FRESH, owned_by("gateway", 7), None, 0)
    assert create_fingerprint(IdMode.FRESH, owned_by("gateway", 8), None, 0) == first
    assert create_fingerprint(IdMode.FRESH, owned_by("gateway-2", 3), None, 0) == first


def test_a_record_written_before_the_owner_was_left_out_still_answers_its_owners_retry():
    def retry(record: common_pb2.LedgerMetadata) -> tuple[CreateOrder, str]:
        return CreateOrder(IdMode.FRESH, record, request_id="r"), create_fingerprint(IdMode.FRESH, record, None, 0)

    stored_then = create_fingerprint(
        IdMode.FRESH, owned_by("gateway", 7), None, 0, picked_afresh=_EARLIER_PICKED_AFRESH
    )
    assert asks_the_same(*retry(owned_by("gateway", 7)), stored_then)
    assert asks_the_same(*retry(owned_by("gateway", 7)), create_fingerprint(IdMode.FRESH, owned_by("x", 1), None, 0))
    assert not asks_the_same(*retry(owned_by("gateway", 8)), stored_then)  # as before: the owner was in it
    other = owned_by("gateway", 7)
    other.ensemble_size = 5
    assert not asks_the_same(*retry(other), create_fingerprint(IdMode.FRESH, owned_by("gateway", 7), None, 0))


def test_the_fingerprint_covers_the_parameters_and_the_id_choice():
    base = create_fingerprint(IdMode.FRESH, metadata(), None, 0)
    assert create_fingerprint(IdMode.FRESH, metadata(ensemble_size=5), None, 0) != base
    assert create_fingerprint(IdMode.FRESH, metadata(password=b"other"), None, 0) != base
    with_property = metadata()
    with_property.custom_metadata["k"] = "v"
    assert create_fingerprint(IdMode.FRESH, with_property, None, 0) != base
    assert create_fingerprint(IdMode.LEGACY, metadata(), None, 0) != base
    assert create_fingerprint(IdMode.SCOPED, metadata(), None, 1) != create_fingerprint(
        IdMode.SCOPED, metadata(), None, 2
    )
    assert create_fingerprint(IdMode.EXACT, metadata(), LedgerId(0, 1), 0) != create_fingerprint(
        IdMode.EXACT, metadata(), LedgerId(0, 2), 0
    )


def test_request_records_round_trip_and_a_corrupt_one_is_data_loss():
    record = _request_record(LedgerId(1, 2), "f" * 64)
    assert _parse_request_record(record) == (LedgerId(1, 2).qualified_name, "f" * 64)
    with pytest.raises(DataLoss):
        _parse_request_record(b"{not json")


@pytest.mark.parametrize("good", ["a", "0f8c2a8e-9d1b-4c55-8a47-2a1f3b6f9d10", "job:42.retry_1-x", "x" * 128])
def test_valid_request_ids(good):
    assert validate_request_id(good) == good


@pytest.mark.parametrize("bad", ["", "x" * 129, "a/b", "has space", "é", "a\nb", "ab\n"])
def test_invalid_request_ids_are_refused_with_a_message(bad):
    with pytest.raises(InvalidArgument, match="request_id"):
        validate_request_id(bad)
