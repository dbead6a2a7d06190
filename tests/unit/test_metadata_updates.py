"""The one read-modify-CAS loop on ledger metadata, against a fake store."""

from __future__ import annotations

import pytest

from quire_api.errors import Aborted, FailedPrecondition
from quire_api.ids import LedgerId
from quire_gateway.metadata_updates import CAS_ATTEMPTS, update_metadata
from quire_proto.common.v1 import common_pb2

LEDGER = LedgerId(1, 2)


class Store:
    """One record; `interfere` writers change it before each of the next CASes."""

    def __init__(self, interfere: int = 0) -> None:
        self.metadata = common_pb2.LedgerMetadata(state=common_pb2.LEDGER_STATE_OPEN, ensemble_size=3)
        self.version = 1
        self.interfere = interfere
        self.reads = 0
        self.swaps = 0

    def other_writer(self) -> None:
        self.metadata.custom_metadata[f"other-{self.version}"] = "x"
        self.version += 1

    async def get_ledger_metadata(self, ledger_id: LedgerId) -> tuple[common_pb2.LedgerMetadata, int]:
        self.reads += 1
        copy = common_pb2.LedgerMetadata()
        copy.CopyFrom(self.metadata)
        return copy, self.version

    async def update_ledger_metadata(
        self, ledger_id: LedgerId, metadata: common_pb2.LedgerMetadata, expected_version: int
    ) -> int:
        self.swaps += 1
        if self.interfere:
            self.interfere -= 1
            self.other_writer()
        if expected_version != self.version:
            raise Aborted("version conflict")
        self.metadata.CopyFrom(metadata)
        self.version += 1
        return self.version


def close(metadata: common_pb2.LedgerMetadata) -> common_pb2.LedgerMetadata | None:
    if metadata.state == common_pb2.LEDGER_STATE_CLOSED:
        return None
    metadata.state = common_pb2.LEDGER_STATE_CLOSED
    return metadata


async def test_an_update_is_stored_and_its_new_version_returned() -> None:
    store = Store()
    result = await update_metadata(store, LEDGER, close)
    assert result.changed and result.version == store.version == 2
    assert store.metadata.state == result.metadata.state == common_pb2.LEDGER_STATE_CLOSED


async def test_no_change_writes_nothing() -> None:
    store = Store()
    store.metadata.state = common_pb2.LEDGER_STATE_CLOSED
    result = await update_metadata(store, LEDGER, close)
    assert not result.changed and store.swaps == 0
    assert result.version == 1 and result.metadata.state == common_pb2.LEDGER_STATE_CLOSED


async def test_a_conflict_rereads_and_applies_the_update_to_the_newer_record() -> None:
    store = Store(interfere=2)
    known = await store.get_ledger_metadata(LEDGER)
    result = await update_metadata(store, LEDGER, close, known)
    assert result.changed and store.swaps == 3
    # The other writers' changes survive: the update was applied to what they wrote.
    assert set(store.metadata.custom_metadata) == {"other-1", "other-2"}
    assert store.metadata.state == common_pb2.LEDGER_STATE_CLOSED


async def test_the_update_function_gets_a_copy_and_the_known_record_stays_as_it_was() -> None:
    store = Store(interfere=1)
    known = await store.get_ledger_metadata(LEDGER)
    await update_metadata(store, LEDGER, close, known)
    assert known[0].state == common_pb2.LEDGER_STATE_OPEN


async def test_a_domain_error_of_the_update_ends_it() -> None:
    store = Store()

    def refuse(metadata: common_pb2.LedgerMetadata) -> common_pb2.LedgerMetadata | None:
        raise FailedPrecondition("closed")

    with pytest.raises(FailedPrecondition):
        await update_metadata(store, LEDGER, refuse)
    assert store.swaps == 0


async def test_a_record_that_keeps_changing_ends_in_aborted_after_the_bound() -> None:
    store = Store(interfere=1_000)
    with pytest.raises(Aborted, match="kept changing"):
        await update_metadata(store, LEDGER, close)
    assert store.swaps == CAS_ATTEMPTS


async def test_it_succeeds_on_the_last_attempt() -> None:
    store = Store(interfere=CAS_ATTEMPTS - 1)
    assert (await update_metadata(store, LEDGER, close)).changed
