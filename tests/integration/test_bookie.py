"""The bookie: real RocksDB in tmp_path, real gRPC server on port 0."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from google.rpc import error_details_pb2, status_pb2

from quire.bookie.v1 import bookie_pb2, bookie_pb2_grpc
from quire_bookie.bookie import Bookie, BookieSettings
from quire_bookie.servicer import BookieServicer
from quire_common.entry import Digester, DigestType, master_key, pack_entry
from quire_common.errors import FailedPrecondition, InvalidArgument, PermissionDenied, ResourceExhausted
from quire_common.ids import LedgerId, ledger_id_to_proto
from quire_common.server import STATUS_DETAILS_KEY, create_server

pytestmark = pytest.mark.integration

LEDGER = LedgerId(9, 1)
KEY = master_key(b"secret")
DIGEST = Digester(DigestType.CRC32C)


def packed(entry_id: int, payload: bytes = b"payload", ledger: LedgerId = LEDGER, lac: int | None = None) -> bytes:
    return pack_entry(ledger, entry_id, entry_id - 1 if lac is None else lac, entry_id + 1, payload, DIGEST)


@pytest.fixture
async def bookie(tmp_path):
    instance = Bookie(tmp_path, BookieSettings(max_entry_bytes=64 * 1024))
    await instance.start()
    yield instance
    await instance.close()


async def test_added_entries_survive_reopen(tmp_path):
    first = Bookie(tmp_path)
    await first.start()
    await first.add_entries(LEDGER, KEY, [(i, packed(i)) for i in range(10)], recovery=False)
    await first.fence(LedgerId(9, 2), KEY)
    await first.close()

    second = Bookie(tmp_path)
    await second.start()
    try:
        assert (await second.read_entry(LEDGER, 7))[1] == packed(7)
        assert (await second.read_entry(LEDGER, -1))[0] == 9
        assert second.last_add_confirmed(LEDGER) == (8, 9, False)
        assert second.last_add_confirmed(LedgerId(9, 2))[2] is True  # the fence is durable
    finally:
        await second.close()


async def test_concurrent_adds_share_synced_writes(bookie):
    await asyncio.gather(*(bookie.add_entries(LEDGER, KEY, [(i, packed(i))], False) for i in range(200)))
    flushes = list(bookie._recent_flushes)
    assert sum(f.entries for f in flushes) == 200
    assert len(flushes) < 200, "group commit should put several adds in one synced write"
    found, missing, truncated = await bookie.read_entries(LEDGER, [*range(200), 500], 0)
    assert len(found) == 200 and missing == [500] and not truncated


async def test_fencing_and_master_keys(bookie):
    await bookie.add_entries(LEDGER, KEY, [(0, packed(0))], False)
    with pytest.raises(PermissionDenied):
        await bookie.add_entries(LEDGER, master_key(b"wrong"), [(1, packed(1))], False)
    with pytest.raises(PermissionDenied):
        await bookie.fence(LEDGER, master_key(b"wrong"))
    assert bookie.last_add_confirmed(LEDGER)[2] is False  # a wrong key fences nothing
    state = await bookie.fence(LEDGER, KEY)
    assert state.fenced and state.last_entry_id == 0
    with pytest.raises(FailedPrecondition):
        await bookie.add_entries(LEDGER, KEY, [(1, packed(1))], False)
    await bookie.add_entries(LEDGER, KEY, [(1, packed(1))], recovery=True)
    assert (await bookie.read_entry(LEDGER, 1))[1] == packed(1)


async def test_header_must_match_the_request(bookie):
    with pytest.raises(InvalidArgument, match="header says"):
        await bookie.add_entries(LEDGER, KEY, [(1, packed(2))], False)
    with pytest.raises(InvalidArgument, match="header says"):
        await bookie.add_entries(LEDGER, KEY, [(1, packed(1, ledger=LedgerId(9, 99)))], False)
    with pytest.raises(ResourceExhausted):
        await bookie.add_entries(LEDGER, KEY, [(0, packed(0, b"x" * 70_000))], False)


async def test_read_byte_limit_returns_at_least_one_entry(bookie):
    big = b"y" * 40_000
    await bookie.add_entries(LEDGER, KEY, [(i, packed(i, big)) for i in range(3)], False)
    found, missing, truncated = await bookie.read_entries(LEDGER, [0, 1, 2], 10)
    assert [e for e, _ in found] == [0] and truncated and missing == []


async def test_delete_removes_entries_and_state(bookie):
    await bookie.add_entries(LEDGER, KEY, [(i, packed(i)) for i in range(5)], False)
    other = LedgerId(9, 2)
    await bookie.add_entries(other, KEY, [(0, packed(0, ledger=other))], False)
    assert await bookie.delete_ledger(LEDGER) == 5
    found, missing, _ = await bookie.read_entries(LEDGER, [0, 4], 0)
    assert found == [] and missing == [0, 4]
    assert bookie.last_add_confirmed(LEDGER) == (-1, -1, False)
    assert (await bookie.read_entry(other, 0))[1] == packed(0, ledger=other)


@pytest.fixture
async def bookie_stub(bookie):
    def register(server):
        bookie_pb2_grpc.add_BookieServiceServicer_to_server(BookieServicer(bookie), server)
        return ["quire.bookie.v1.BookieService"]

    server, port, _ = create_server("127.0.0.1:0", register)
    await server.start()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        yield bookie_pb2_grpc.BookieServiceStub(channel)
    await server.stop(0)


def reason_of(error: grpc.aio.AioRpcError) -> str:
    for key, value in error.trailing_metadata():
        if key == STATUS_DETAILS_KEY:
            info = error_details_pb2.ErrorInfo()
            status_pb2.Status.FromString(value).details[0].Unpack(info)
            return info.reason
    return ""


async def test_errors_reach_clients_with_code_and_reason(bookie_stub):
    request = bookie_pb2.AddEntriesRequest(
        ledger_id=ledger_id_to_proto(LEDGER),
        master_key=KEY,
        entries=[bookie_pb2.PackedEntry(entry_id=3, data=packed(4))],
    )
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await bookie_stub.AddEntries(request)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert reason_of(caught.value) == "ERROR_REASON_ENTRY_HEADER_MISMATCH"
    assert "Traceback" not in (caught.value.details() or "")

    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await bookie_stub.ReadEntry(bookie_pb2.ReadEntryRequest(ledger_id=ledger_id_to_proto(LEDGER), entry_id=0))
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND

    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await bookie_stub.ReadEntry(bookie_pb2.ReadEntryRequest(entry_id=0))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert reason_of(caught.value) == "ERROR_REASON_INVALID_LEDGER_ID"

    info = await bookie_stub.GetBookieInfo(bookie_pb2.GetBookieInfoRequest())
    assert info.total_disk_bytes >= info.free_disk_bytes > 0
