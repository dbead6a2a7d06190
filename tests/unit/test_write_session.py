"""An AppendEntries write session (quire_gateway.write.session) against a
stand-in for the ledger operations: acks in entry order, confirmed entries
folded into one ack, the owner named once, a refused request ending the
session after the entries before it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import cast

import pytest

from quire_api.errors import InvalidArgument
from quire_api.ids import LedgerId, ledger_id_to_proto
from quire_gateway.client_streams import chained, first_and_rest
from quire_gateway.ledgers import LedgerOperations
from quire_gateway.write.session import Acknowledgement, WriteSession
from quire_proto.common.v1 import common_pb2
from quire_proto.gateway.v1 import ledger_pb2

LEDGER = LedgerId(1, 2)
OTHER = LedgerId(1, 3)


class Handle:
    def __init__(self) -> None:
        self.last_add_confirmed = -1


class FakeLedgerOperations:
    """Confirms every entry as soon as it is appended."""

    def __init__(self) -> None:
        self.handles = {LEDGER: Handle()}
        self.next_entry_id = 0

    def owner_here(self, ledger: LedgerId) -> str:
        return "gateway-1"

    def append_now(self, ledger: LedgerId, payloads: list[bytes], expected: int | None) -> None:
        return None  # every append takes the waiting path here

    async def append(self, ledger: LedgerId, payloads: list[bytes], expected: int | None) -> list[asyncio.Future[int]]:
        futures = []
        for _ in payloads:
            future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
            future.set_result(self.next_entry_id)
            self.handles[ledger].last_add_confirmed = self.next_entry_id
            self.next_entry_id += 1
            futures.append(future)
        return futures


async def requests(*messages: ledger_pb2.AppendEntriesRequest) -> AsyncIterator[ledger_pb2.AppendEntriesRequest]:
    for message in messages:
        yield message


async def acks(session: WriteSession) -> list[Acknowledgement]:
    return [ack async for ack in session.acknowledgements()]


async def test_confirmed_entries_are_acknowledged_together_and_the_owner_named_once():
    stream = requests(
        ledger_pb2.AppendEntriesRequest(ledger_id=ledger_id_to_proto(LEDGER), payloads=[b"a", b"b", b"c"]),
        ledger_pb2.AppendEntriesRequest(payloads=[b"d"]),
    )
    session = WriteSession(cast(LedgerOperations, FakeLedgerOperations()), LEDGER, stream, traced=False)
    answered = await acks(session)
    # However the two messages interleave with the acks, the acks cover 0..3 in order, without gaps.
    covered = [e for ack in answered for e in range(ack.first_entry_id, ack.last_entry_id + 1)]
    assert covered == [0, 1, 2, 3]
    assert answered[0].first_entry_id == 0 and answered[0].last_entry_id >= 2  # a, b, c confirmed together
    assert [ack.owner for ack in answered] == ["gateway-1"] + [None] * (len(answered) - 1)
    assert answered[-1].last_add_confirmed == 3


async def test_a_request_for_another_ledger_ends_the_session_after_the_entries_before_it():
    stream = requests(
        ledger_pb2.AppendEntriesRequest(ledger_id=ledger_id_to_proto(LEDGER), payloads=[b"a"]),
        ledger_pb2.AppendEntriesRequest(ledger_id=ledger_id_to_proto(OTHER), payloads=[b"b"]),
    )
    session = WriteSession(cast(LedgerOperations, FakeLedgerOperations()), LEDGER, stream, traced=False)
    answered: list[Acknowledgement] = []
    with pytest.raises(InvalidArgument, match="one ledger"):
        async for ack in session.acknowledgements():
            answered.append(ack)
    assert [(a.first_entry_id, a.last_entry_id) for a in answered] == [(0, 0)]


async def test_every_form_of_the_same_ledger_id_is_accepted_and_a_changed_one_refused_after_them():
    """The session compares a message's ledger_id to the last form it parsed:
    a client that switches between numbers, the qualified name or both is
    still writing the same ledger; a different ledger after them is refused."""
    numbers = ledger_id_to_proto(LEDGER)
    named = common_pb2.LedgerId(qualified_name=LEDGER.qualified_name)
    both = common_pb2.LedgerId(scope_id=LEDGER.scope_id, ledger_id=LEDGER.ledger_id, qualified_name=str(LEDGER))
    forms = [numbers, named, named, both, numbers]
    stream = requests(
        *(ledger_pb2.AppendEntriesRequest(ledger_id=form, payloads=[b"x"]) for form in forms),
        ledger_pb2.AppendEntriesRequest(ledger_id=common_pb2.LedgerId(qualified_name=str(OTHER)), payloads=[b"y"]),
    )
    session = WriteSession(cast(LedgerOperations, FakeLedgerOperations()), LEDGER, stream, traced=False)
    answered: list[Acknowledgement] = []
    with pytest.raises(InvalidArgument, match="one ledger"):
        async for ack in session.acknowledgements():
            answered.append(ack)
    assert [e for a in answered for e in range(a.first_entry_id, a.last_entry_id + 1)] == list(range(len(forms)))


@pytest.mark.parametrize("window_entries", [10, None])
async def test_a_client_that_reads_no_answers_is_read_no_further_than_the_window(window_entries):
    """A client that keeps sending and reads no answer (gRPC then holds the
    session's answer at its `yield`): the session takes no more than its
    window of entries beyond what it has answered. Without a window (None,
    the positive control) it takes every message the client sends."""
    taken = 0

    async def endless() -> AsyncIterator[ledger_pb2.AppendEntriesRequest]:
        nonlocal taken
        for index in range(1000):
            taken += 1
            yield ledger_pb2.AppendEntriesRequest(ledger_id=ledger_id_to_proto(LEDGER), payloads=[bytes([index % 256])])

    window = window_entries or 1_000_000
    session = WriteSession(cast(LedgerOperations, FakeLedgerOperations()), LEDGER, endless(), False, window)
    answers = session.acknowledgements()
    first = await answers.__anext__()  # answered, then held at its yield like an answer the client never reads
    for _ in range(200):
        await asyncio.sleep(0)
    if window_entries is None:
        assert taken == 1000
    else:
        assert taken <= (first.last_entry_id + 1) + window_entries, (taken, first)
        # Once the client reads again, every entry is answered, in order.
        later = [ack async for ack in answers]
        covered = [e for ack in [first, *later] for e in range(ack.first_entry_id, ack.last_entry_id + 1)]
        assert covered == list(range(1000))
    await answers.aclose()


async def test_a_stream_is_split_into_its_first_message_and_the_rest_and_chained_again():
    first, rest = await first_and_rest(
        requests(*(ledger_pb2.AppendEntriesRequest(payloads=[bytes([i])]) for i in range(3)))
    )
    assert first is not None and list(first.payloads) == [b"\x00"]
    assert [list(m.payloads) async for m in chained(first, rest)] == [[b"\x00"], [b"\x01"], [b"\x02"]]
    nothing, _ = await first_and_rest(requests())
    assert nothing is None
