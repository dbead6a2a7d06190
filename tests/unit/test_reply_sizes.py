"""Every read reply fits a client at gRPC's default 4 MiB receive limit."""

from quire_api.limits import DEFAULT_CLIENT_MESSAGE_BYTES, MAX_ENTRY_PAYLOAD_BYTES, MAX_REPLY_BYTES
from quire_gateway.read.replicas import ReadEntry
from quire_gateway.servicer import batched_by_bytes
from quire_gateway.write.handle import WriteSettings
from quire_proto.gateway.v1 import ledger_pb2


def entry(entry_id: int, size: int) -> ReadEntry:
    return ReadEntry(entry_id=entry_id, payload=b"x" * size, length=(entry_id + 1) * size)


def test_the_largest_entry_fits_one_default_sized_reply():
    assert WriteSettings().max_entry_bytes == MAX_ENTRY_PAYLOAD_BYTES
    big = ReadEntry(entry_id=2**62, payload=b"x" * MAX_ENTRY_PAYLOAD_BYTES, length=2**63 - 1)
    (batch,) = batched_by_bytes([big])
    assert ledger_pb2.ReadEntriesResponse(entries=batch).ByteSize() <= MAX_REPLY_BYTES < DEFAULT_CLIENT_MESSAGE_BYTES


def test_replies_count_fields_and_framing_not_only_payloads():
    # Many small entries: their ids and lengths add up; 4 MiB of payload alone would overflow.
    entries = [entry(2**40 + i, 100) for i in range(60_000)]
    batches = list(batched_by_bytes(entries))
    assert [e.entry_id for b in batches for e in b] == [e.entry_id for e in entries]
    assert all(ledger_pb2.TailEntriesResponse(entries=b).ByteSize() <= MAX_REPLY_BYTES for b in batches)
    # Two entries near the largest never share a reply.
    assert len(list(batched_by_bytes([entry(0, 2_200_000), entry(1, 2_200_000)]))) == 2
