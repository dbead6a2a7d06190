"""AddStream: the bookie's multiplexed add path and the gateway's per-bookie
stream over it, against a real bookie (RocksDB in tmp_path) on a real gRPC
server."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import grpc
import pytest

from quire_api.errors import FailedPrecondition, InvalidArgument, PermissionDenied, Reason, Unavailable
from quire_api.ids import LedgerId, ledger_id_to_proto
from quire_bookie.bookie import Bookie, BookieSettings
from quire_bookie.servicer import BookieServicer, add_servicer_to_server
from quire_common import channels
from quire_common.entry import Digester, DigestType, master_key, pack_entry
from quire_common.server import create_server
from quire_gateway.write.bookie_streams import AddRequest, AddStreamCallable, BookieAddStream, add_stream_callable
from quire_proto.bookie.v1 import bookie_pb2, bookie_pb2_grpc

pytestmark = pytest.mark.integration

KEY = master_key(b"secret")
DIGEST = Digester(DigestType.CRC32C)


def packed(ledger: LedgerId, entry_id: int, payload: bytes = b"payload") -> bytes:
    return pack_entry(ledger, entry_id, entry_id - 1, entry_id + 1, payload, DIGEST)


def streamed_add(add_id: int, ledger: LedgerId, entry_ids: list[int], key: bytes = KEY) -> bookie_pb2.StreamedAdd:
    return bookie_pb2.StreamedAdd(
        add_id=add_id,
        ledger_id=ledger_id_to_proto(ledger),
        master_key=key,
        entries=[bookie_pb2.PackedEntry(entry_id=e, data=packed(ledger, e)) for e in entry_ids],
    )


@pytest.fixture
async def served(tmp_path):
    """(bookie, stub, channel, address) for a bookie served on a free port."""
    bookie = Bookie(tmp_path, BookieSettings())
    await bookie.start()

    def register(server: grpc.aio.Server) -> list[str]:
        add_servicer_to_server(BookieServicer(bookie), server)
        return ["quire.bookie.v1.BookieService"]

    server, port, _ = create_server("127.0.0.1:0", register)
    await server.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield bookie, bookie_pb2_grpc.BookieServiceStub(channel), channel, f"127.0.0.1:{port}"
    finally:
        await channel.close()
        await server.stop(0)
        await bookie.close()


async def test_one_message_of_many_ledgers_is_stored_and_each_add_answered_alone(served):
    bookie, stub, _, _ = served
    ledgers = [LedgerId(7, n) for n in range(1, 9)]
    await bookie.fence(LedgerId(7, 100), KEY)  # adds to it are refused: that one fails, no other
    call = stub.AddStream()
    adds = [streamed_add(n + 1, ledger, [0, 1]) for n, ledger in enumerate(ledgers)]
    adds.append(streamed_add(50, LedgerId(7, 100), [0]))
    adds.append(streamed_add(51, ledgers[0], [2], key=master_key(b"wrong")))
    adds.append(bookie_pb2.StreamedAdd(add_id=52, master_key=KEY))  # names no ledger
    await call.write(bookie_pb2.AddStreamRequest(adds=adds))
    results: dict[int, bookie_pb2.AddResult] = {}
    messages = 0
    while len(results) < len(adds):
        response = await asyncio.wait_for(call.read(), 60)
        messages += 1
        results.update({r.add_id: r for r in response.results})
    await call.done_writing()
    assert await asyncio.wait_for(call.read(), 60) == grpc.aio.EOF  # ends once every add is answered

    for n in range(1, 9):
        assert results[n].code == 0 and not results[n].reason
    assert results[50].code == grpc.StatusCode.FAILED_PRECONDITION.value[0]
    assert results[50].reason == Reason.LEDGER_FENCED
    assert results[51].code == grpc.StatusCode.PERMISSION_DENIED.value[0]
    assert results[52].code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert messages < len(adds), "results completing together should share response messages"
    for ledger in ledgers:
        found, missing, _ = await bookie.read_entries(ledger, [0, 1, 2])
        assert [e for e, _ in found] == [0, 1] and missing == [2]
    assert sum(f.entries for f in bookie._recent_flushes) == 16


async def test_a_message_that_asks_for_stored_ids_gets_them_packed_and_refusals_alone(served):
    """A writer that sets stored_ids is answered with one packed list of the
    adds stored and an AddResult per refused add; one that does not (a writer
    of an earlier release) gets an AddResult per add, as the test above."""
    bookie, stub, _, _ = served
    ledger = LedgerId(7, 200)
    call = stub.AddStream()
    adds = [streamed_add(1, ledger, [0]), streamed_add(2, ledger, [1], key=master_key(b"wrong"))]
    adds.append(streamed_add(3, ledger, [2]))
    await call.write(bookie_pb2.AddStreamRequest(adds=adds, stored_ids=True))
    response = await asyncio.wait_for(call.read(), 60)
    assert list(response.stored_add_ids) == [1, 3]
    assert [(r.add_id, r.code) for r in response.results] == [(2, grpc.StatusCode.PERMISSION_DENIED.value[0])]
    await call.write(bookie_pb2.AddStreamRequest(adds=[streamed_add(4, ledger, [3])]))
    response = await asyncio.wait_for(call.read(), 60)
    assert not response.stored_add_ids and [(r.add_id, r.code) for r in response.results] == [(4, 0)]
    call.cancel()
    found, missing, _ = await bookie.read_entries(ledger, [0, 1, 2, 3])
    assert [e for e, _ in found] == [0, 2, 3] and missing == [1]


async def test_adds_refused_by_the_checks_before_any_state_are_counted_on_either_path(served):
    """quire.bookie.rejected_adds counts the adds refused by the checks that
    need no ledger state (a header naming another entry, a digest that does
    not match), whether streamed or unary; refusals by a ledger's state (a
    wrong key) are not among them."""
    bookie, stub, _, _ = served
    ledger = LedgerId(7, 300)
    mismatched = bookie_pb2.StreamedAdd(
        add_id=2, ledger_id=ledger_id_to_proto(ledger), master_key=KEY,
        entries=[bookie_pb2.PackedEntry(entry_id=1, data=packed(ledger, 5))],
    )  # fmt: skip
    adds = [streamed_add(1, ledger, [0]), mismatched, streamed_add(3, ledger, [1], key=master_key(b"wrong"))]
    call = stub.AddStream()
    await call.write(bookie_pb2.AddStreamRequest(adds=adds, stored_ids=True))
    response = await asyncio.wait_for(call.read(), 60)
    call.cancel()
    assert list(response.stored_add_ids) == [1]
    assert [(r.add_id, r.reason) for r in response.results] == [
        (2, Reason.ENTRY_HEADER_MISMATCH),
        (3, Reason.WRONG_PASSWORD),
    ]
    corrupted = bytearray(packed(ledger, 1))
    corrupted[-1] ^= 0xFF
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await stub.AddEntries(
            bookie_pb2.AddEntriesRequest(
                ledger_id=ledger_id_to_proto(ledger),
                master_key=KEY,
                entries=[bookie_pb2.PackedEntry(entry_id=1, data=bytes(corrupted))],
            )
        )
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert bookie.counters.rejected_adds == 2


async def test_a_known_ledgers_one_entry_adds_keep_every_check(served):
    """A stream's usual add (one entry, of a ledger it named before, not a
    recovery's) is checked and staged without the objects other adds go
    through; each refusal still holds for it, alone in its message: a fence,
    a wrong key, read-only, an entry too large, a header naming another entry,
    a digest that does not match. A recovery's add passes read-only."""
    bookie, stub, _, _ = served
    fenced, writable = LedgerId(7, 400), LedgerId(7, 401)
    call = stub.AddStream()
    first_adds = [streamed_add(1, fenced, [0]), streamed_add(2, writable, [0])]
    await call.write(bookie_pb2.AddStreamRequest(adds=first_adds, stored_ids=True))
    assert list((await asyncio.wait_for(call.read(), 60)).stored_add_ids) == [1, 2]
    await bookie.fence(fenced, KEY)
    corrupted = bytearray(packed(writable, 5))
    corrupted[-1] ^= 0xFF
    adds = [
        streamed_add(3, fenced, [1]),
        streamed_add(4, writable, [1], key=master_key(b"wrong")),
        bookie_pb2.StreamedAdd(
            add_id=5, ledger_id=ledger_id_to_proto(writable), master_key=KEY,
            entries=[bookie_pb2.PackedEntry(entry_id=2, data=packed(writable, 2, b"x" * 2048))],
        ),
        bookie_pb2.StreamedAdd(
            add_id=6, ledger_id=ledger_id_to_proto(writable), master_key=KEY,
            entries=[bookie_pb2.PackedEntry(entry_id=3, data=packed(writable, 4))],
        ),
        bookie_pb2.StreamedAdd(
            add_id=7, ledger_id=ledger_id_to_proto(writable), master_key=KEY,
            entries=[bookie_pb2.PackedEntry(entry_id=5, data=bytes(corrupted))],
        ),
        streamed_add(8, writable, [6]),
    ]  # fmt: skip
    bookie.settings = dataclasses.replace(bookie.settings, max_entry_bytes=1024)
    rejected_before = bookie.counters.rejected_adds
    await call.write(bookie_pb2.AddStreamRequest(adds=adds, stored_ids=True))
    response = await asyncio.wait_for(call.read(), 60)
    assert list(response.stored_add_ids) == [8]
    assert [(r.add_id, r.reason) for r in response.results] == [
        (3, Reason.LEDGER_FENCED),
        (4, Reason.WRONG_PASSWORD),
        (5, Reason.ENTRY_TOO_LARGE),
        (6, Reason.ENTRY_HEADER_MISMATCH),
        (7, Reason.DIGEST_MISMATCH),
    ]
    assert bookie.counters.rejected_adds - rejected_before == 3  # the checks that need no ledger state

    bookie.read_only_reason = "disk usage over the threshold"
    recovery = streamed_add(10, writable, [8])
    recovery.recovery = True
    await call.write(bookie_pb2.AddStreamRequest(adds=[streamed_add(9, writable, [7]), recovery], stored_ids=True))
    response = await asyncio.wait_for(call.read(), 60)
    call.cancel()
    assert list(response.stored_add_ids) == [10]
    assert [(r.add_id, r.reason) for r in response.results] == [(9, Reason.BOOKIE_READ_ONLY)]
    found, missing, _ = await bookie.read_entries(writable, list(range(9)))
    assert [e for e, _ in found] == [0, 6, 8] and missing == [1, 2, 3, 4, 5, 7]


async def test_an_ack_on_the_stream_means_the_entries_are_synced(served, monkeypatch):
    bookie, stub, _, _ = served
    synced: list[int] = []
    store_write = bookie._store.write

    def write(entries, states, sync=True):  # type: ignore[no-untyped-def]
        store_write(entries, states, sync=sync)
        synced.extend(entry_id for _, entry_id, _ in entries)

    monkeypatch.setattr(bookie._store, "write", write)
    ledger = LedgerId(7, 1)
    call = stub.AddStream()
    for entry_id in range(20):
        await call.write(bookie_pb2.AddStreamRequest(adds=[streamed_add(entry_id + 1, ledger, [entry_id])]))
    answered = 0
    while answered < 20:
        response = await asyncio.wait_for(call.read(), 60)
        for result in response.results:
            assert result.code == 0
            assert result.add_id - 1 in synced, "acknowledged before its synced write returned"
            answered += 1
    call.cancel()


def stream_to(channel: grpc.aio.Channel, broken: list[str] | None = None, **limits: int) -> BookieAddStream:
    """The gateway's stream to the served bookie; `broken` collects the times it broke."""

    async def open_call() -> AddStreamCallable:
        return add_stream_callable(channel)

    return BookieAddStream(
        "bookie-a", open_call, lambda: (broken if broken is not None else []).append("bookie-a"), **limits
    )


@contextmanager
def held_adds(bookie: Bookie) -> Iterator[asyncio.Event]:
    """Every add the bookie receives waits until the returned event is set
    (set, and the bookie restored, on the way out whatever happens)."""
    gate = asyncio.Event()
    real_queue = bookie.queue_add_message

    async def held_queue(*args):  # type: ignore[no-untyped-def]
        await gate.wait()
        return await real_queue(*args)

    bookie.queue_add_message = held_queue  # type: ignore[method-assign]
    try:
        yield gate
    finally:
        gate.set()
        bookie.queue_add_message = real_queue  # type: ignore[method-assign]


async def test_the_gateway_stream_multiplexes_ledgers_and_maps_errors(served):
    bookie, _, channel, _ = served
    broken: list[str] = []
    stream = stream_to(channel, broken)
    try:
        ledgers = [LedgerId(8, n) for n in range(1, 17)]
        await asyncio.gather(
            *(stream.add(ledger, KEY, [(0, packed(ledger, 0))], False, timeout_seconds=60) for ledger in ledgers)
        )
        assert stream.adds_sent == 16 and stream.messages_sent <= 16
        for ledger in ledgers:
            assert bookie.last_add_confirmed(ledger)[1] == 0

        await bookie.fence(ledgers[0], KEY)
        with pytest.raises(FailedPrecondition) as fenced:
            await stream.add(ledgers[0], KEY, [(1, packed(ledgers[0], 1))], False, timeout_seconds=60)
        assert fenced.value.reason == Reason.LEDGER_FENCED
        with pytest.raises(PermissionDenied):
            await stream.add(ledgers[1], master_key(b"wrong"), [(1, packed(ledgers[1], 1))], False, 60)
        with pytest.raises(InvalidArgument) as mismatch:
            await stream.add(ledgers[1], KEY, [(5, packed(ledgers[1], 6))], False, timeout_seconds=60)
        assert mismatch.value.reason == Reason.ENTRY_HEADER_MISMATCH
        # The refusals failed single adds; the stream itself is fine.
        await stream.add(ledgers[1], KEY, [(1, packed(ledgers[1], 1))], False, timeout_seconds=60)
        assert broken == []
    finally:
        await stream.close()


async def test_a_stream_that_breaks_fails_its_adds_unavailable_and_the_next_add_reopens(served):
    bookie, _, channel, address = served
    channels = [channel]

    async def open_call() -> AddStreamCallable:
        return add_stream_callable(channels[-1])

    broken: list[str] = []
    stream = BookieAddStream("bookie-a", open_call, lambda: broken.append("bookie-a"))
    ledger = LedgerId(8, 1)
    fresh = grpc.aio.insecure_channel(address)
    try:
        await stream.add(ledger, KEY, [(0, packed(ledger, 0))], False, timeout_seconds=60)
        with held_adds(bookie):  # the next add waits on the stream while the channel goes away
            waiting = asyncio.create_task(stream.add(ledger, KEY, [(1, packed(ledger, 1))], False, 60))
            await asyncio.sleep(0.2)
            await channel.close()
            with pytest.raises(Unavailable):
                await asyncio.wait_for(waiting, 60)
        assert broken == ["bookie-a"]
        channels.append(fresh)
        await stream.add(ledger, KEY, [(2, packed(ledger, 2))], False, timeout_seconds=60)
    finally:
        await stream.close()
        await fresh.close()


async def test_an_add_the_bookie_does_not_answer_in_time_fails_unavailable(served):
    bookie, _, channel, _ = served
    stream = stream_to(channel)
    ledger = LedgerId(8, 1)
    try:
        with held_adds(bookie):
            with pytest.raises(Unavailable) as late:
                await stream.add(ledger, KEY, [(0, packed(ledger, 0))], False, timeout_seconds=0.5)
        assert late.value.reason == Reason.BOOKIE_UNAVAILABLE and "no answer within" in late.value.message
        # The late answer is ignored, the stream stays usable.
        await stream.add(ledger, KEY, [(1, packed(ledger, 1))], False, timeout_seconds=60)
    finally:
        await stream.close()


def sent(stream: BookieAddStream, ledger: LedgerId, entry_id: int, payload: bytes, timeout: float) -> Any:
    """A writer's add (`send`, the callback form): a future of its outcome, None once stored."""
    outcome = asyncio.get_running_loop().create_future()
    entries = [(entry_id, packed(ledger, entry_id, payload))]
    stream.send(AddRequest(ledger, KEY, entries), timeout, lambda _bookie_id, error: outcome.set_result(error))
    return outcome


async def test_adds_queued_behind_a_bookie_that_answers_do_not_expire(served):
    """The deadline runs from when an add is sent: twelve writers' adds that
    each wait for the one before (one message unanswered at a time, each
    answered after 0.5 s) are all stored with a 3 s deadline, though the last waits
    about 6 s."""
    bookie, _, channel, _ = served
    stream = stream_to(channel, max_message_bytes=4096)  # one add per message
    ledger = LedgerId(8, 1)
    real_queue = bookie.queue_add_message

    async def slow_queue(*args):  # type: ignore[no-untyped-def]
        await asyncio.sleep(0.5)
        return await real_queue(*args)

    bookie.queue_add_message = slow_queue  # type: ignore[method-assign]
    try:
        outcomes = [sent(stream, ledger, e, b"x" * 3000, timeout=3) for e in range(12)]
        assert await asyncio.wait_for(asyncio.gather(*outcomes), 120) == [None] * 12
        assert stream.messages_sent == 12
    finally:
        bookie.queue_add_message = real_queue  # type: ignore[method-assign]
        await stream.close()


async def test_adds_queued_behind_an_unanswered_add_fail_with_it(served):
    bookie, _, channel, _ = served
    stream = stream_to(channel, max_message_bytes=4096)  # one add per message
    ledger = LedgerId(8, 1)
    try:
        with held_adds(bookie):
            first = sent(stream, ledger, 0, b"x" * 3000, timeout=0.5)
            behind = sent(stream, ledger, 1, b"x" * 3000, timeout=60)
            outcomes = await asyncio.wait_for(asyncio.gather(first, behind), 60)
        assert all(isinstance(o, Unavailable) for o in outcomes), outcomes
        assert "no answer within" in outcomes[0].message and "queued behind" in outcomes[1].message
        assert stream.adds_sent == 1
        await stream.add(ledger, KEY, [(0, packed(ledger, 0))], False, timeout_seconds=60)  # the stream goes on
    finally:
        await stream.close()


class _BookieThatStoppedReading(bookie_pb2_grpc.BookieServiceServicer):
    """A bookie as a paused one looks to the gateway: its AddStream takes no
    message, so the stream's flow-control window fills and the gateway's
    writes stop ending."""

    def __init__(self) -> None:
        self.release = asyncio.Event()

    async def AddStream(self, request_iterator, context):  # type: ignore[no-untyped-def]
        await self.release.wait()
        return
        yield  # a generator: a streaming handler


async def test_adds_queued_behind_a_write_the_bookie_never_takes_fail_and_the_stream_is_opened_again():
    """A writer's retries must not wait for ever behind a message the bookie
    never read: once that message's adds are past their deadline the stream
    is broken, and the retry goes on a new one and fails by its own deadline."""
    servicer = _BookieThatStoppedReading()
    server = grpc.aio.server()
    bookie_pb2_grpc.add_BookieServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    opened: list[int] = []

    async def open_call() -> AddStreamCallable:
        opened.append(1)
        return add_stream_callable(channel)

    broken: list[str] = []
    stream = BookieAddStream("bookie-a", open_call, lambda: broken.append("bookie-a"), max_messages_in_flight=64)
    ledger = LedgerId(8, 1)
    big = b"x" * (1024 * 1024)
    try:
        # 32 MiB: more than the stream's flow-control window and the socket's buffers take.
        first = [sent(stream, ledger, e, big, timeout=0.5) for e in range(32)]
        outcomes = await asyncio.wait_for(asyncio.gather(*first), 60)
        assert all(isinstance(o, Unavailable) for o in outcomes), outcomes
        assert any("no answer within" in o.message for o in outcomes)
        assert stream.adds_sent < 32, "some write must still be waiting for the bookie to read"
        assert broken == ["bookie-a"], "a stream whose write the bookie never takes counts as broken"
        retry = await asyncio.wait_for(sent(stream, ledger, 0, b"y", timeout=0.5), 60)
        assert isinstance(retry, Unavailable) and retry.reason == Reason.BOOKIE_UNAVAILABLE
        assert len(opened) == 2, "the retry opens a new stream"
    finally:
        await stream.close()
        servicer.release.set()
        await channel.close()
        await server.stop(0)


async def test_a_stream_that_cannot_be_opened_for_a_bug_fails_its_adds_rather_than_keep_them():
    async def open_call() -> AddStreamCallable:
        raise RuntimeError("a bug in resolving the bookie")

    stream = BookieAddStream("bookie-a", open_call, lambda: None)
    ledger = LedgerId(8, 1)
    try:
        outcome = await asyncio.wait_for(sent(stream, ledger, 0, b"y", timeout=60), 10)
        assert isinstance(outcome, Unavailable) and "a bug in resolving the bookie" in outcome.message
    finally:
        await stream.close()


async def test_unanswered_bytes_are_bounded_per_bookie(served):
    bookie, _, channel, _ = served
    stream = stream_to(channel, max_unanswered_bytes=4096)
    ledger = LedgerId(8, 1)
    payload = b"x" * 3000
    try:
        with held_adds(bookie) as gate:
            first = asyncio.create_task(stream.add(ledger, KEY, [(0, packed(ledger, 0, payload))], False, 60))
            second = asyncio.create_task(stream.add(ledger, KEY, [(1, packed(ledger, 1, payload))], False, 60))
            await asyncio.sleep(0.3)
            assert stream.adds_sent == 1, "the second add must wait for room, not be sent"
            assert not first.done() and not second.done()
            gate.set()
            await asyncio.wait_for(asyncio.gather(first, second), 60)
        assert stream.adds_sent == 2
    finally:
        await stream.close()


async def test_small_adds_wait_for_the_message_in_flight_and_leave_together(served):
    bookie, _, channel, _ = served
    stream = stream_to(channel)
    ledgers = [LedgerId(8, n) for n in range(1, 11)]
    try:
        with held_adds(bookie) as gate:
            first = asyncio.create_task(stream.add(ledgers[0], KEY, [(0, packed(ledgers[0], 0))], False, 60))
            await asyncio.sleep(0.2)
            rest = [
                asyncio.create_task(stream.add(ledger, KEY, [(0, packed(ledger, 0))], False, 60))
                for ledger in ledgers[1:]
            ]
            await asyncio.sleep(0.2)
            assert stream.messages_sent == 1, "small adds must wait while a message is in flight"
            gate.set()
            await asyncio.wait_for(asyncio.gather(first, *rest), 60)
        assert stream.messages_sent == 2 and stream.adds_sent == 10, "the nine waiting adds leave in one message"
    finally:
        await stream.close()


async def test_a_full_message_waiting_is_pipelined(served):
    bookie, _, channel, _ = served
    stream = stream_to(channel)
    ledger = LedgerId(8, 1)
    big = b"x" * (600 * 1024)
    try:
        with held_adds(bookie) as gate:
            adds = [asyncio.create_task(stream.add(ledger, KEY, [(0, packed(ledger, 0, big))], False, 60))]
            await asyncio.sleep(0.2)  # the first message is in flight, held by the bookie
            adds += [
                asyncio.create_task(stream.add(ledger, KEY, [(e, packed(ledger, e, big))], False, 60))
                for e in range(1, 4)
            ]
            await asyncio.sleep(0.3)
            assert stream.messages_sent >= 2, "a full message's worth waiting must not wait for the first answer"
            gate.set()
            await asyncio.wait_for(asyncio.gather(*adds), 60)
    finally:
        await stream.close()


async def test_a_stopping_bookie_answers_what_it_queued_and_ends_its_streams(served):
    bookie, stub, channel, _ = served
    ledger = LedgerId(7, 1)
    call = stub.AddStream()
    await call.write(bookie_pb2.AddStreamRequest(adds=[streamed_add(1, ledger, [0])]))
    first = await asyncio.wait_for(call.read(), 60)
    assert [r.add_id for r in first.results] == [1] and first.results[0].code == 0
    bookie.begin_shutdown()
    # The stream ends at once (not after the server's grace period), with an OK status.
    assert await asyncio.wait_for(call.read(), 10) == grpc.aio.EOF
    assert await call.code() == grpc.StatusCode.OK

    broken: list[str] = []
    stream = stream_to(channel, broken)
    try:
        await stream.add(ledger, KEY, [(1, packed(ledger, 1))], False, timeout_seconds=60)
        bookie.begin_shutdown()
        with pytest.raises(Unavailable):
            for entry_id in range(2, 1000):  # the stream is found ended: the adds on it fail, none hangs
                await asyncio.wait_for(stream.add(ledger, KEY, [(entry_id, packed(ledger, entry_id))], False, 60), 30)
        assert broken == ["bookie-a"]
    finally:
        await stream.close()


async def test_a_traced_stream_the_bookie_breaks_leaves_no_task_of_grpcs_pending(monkeypatch):
    """With tracing on, a stream the bookie ends leaves none of gRPC's tasks
    behind. OpenTelemetry's interceptor for bidirectional streams fed each
    `write` through a task of gRPC's that a failed call left pending for good
    (grpc/grpc#29518); the gateway logged it, destroyed, as "Task was destroyed
    but it is pending!" after every bookie it lost. Service channels leave
    that interceptor out (quire_common.channels)."""
    monkeypatch.setattr(channels, "tracing_enabled", lambda: True)

    async def end_at_once(requests: Any, context: grpc.aio.ServicerContext) -> Any:
        await anext(aiter(requests))
        await context.abort(grpc.StatusCode.UNAVAILABLE, "bookie going away")
        yield b""  # a generator: never reached

    server = grpc.aio.server()
    server.add_generic_rpc_handlers(
        [
            grpc.method_handlers_generic_handler(
                "quire.bookie.v1.BookieService", {"AddStream": grpc.stream_stream_rpc_method_handler(end_at_once)}
            )
        ]
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    channel = channels.open_channel(f"127.0.0.1:{port}")
    broken: list[str] = []
    stream = stream_to(channel, broken)
    ledger = LedgerId(8, 3)
    try:
        with pytest.raises(Unavailable):
            await stream.add(ledger, KEY, [(0, packed(ledger, 0))], False, timeout_seconds=60)
        assert broken == ["bookie-a"]
        await asyncio.sleep(0.5)  # what would end by itself has ended
        feeding = [t for t in asyncio.all_tasks() if "_consume_request_iterator" in repr(t.get_coro())]
        assert feeding == [], feeding
    finally:
        await stream.close()
        await channel.close()
        await server.stop(0)
