"""Every read reply fits a client at gRPC's default 4 MiB receive limit."""

from quire_api.limits import DEFAULT_CLIENT_MESSAGE_BYTES, MAX_ENTRY_PAYLOAD_BYTES, MAX_REPLY_BYTES
from quire_gateway.read.replicas import ReadEntry
from quire_gateway.read.replies import entry_replies
from quire_gateway.write.handle import WriteSettings
from quire_proto.gateway.v1 import ledger_pb2


def entry(entry_id: int, size: int) -> ReadEntry:
    return ReadEntry(entry_id=entry_id, payload=b"x" * size, length=(entry_id + 1) * size)


def test_the_largest_entry_fits_one_default_sized_reply():
    assert WriteSettings().max_entry_bytes == MAX_ENTRY_PAYLOAD_BYTES
    big = ReadEntry(entry_id=2**62, payload=b"x" * MAX_ENTRY_PAYLOAD_BYTES, length=2**63 - 1)
    (reply,) = entry_replies([big])
    assert len(reply) <= MAX_REPLY_BYTES < DEFAULT_CLIENT_MESSAGE_BYTES


def test_replies_count_fields_and_framing_not_only_payloads():
    # Many small entries: their ids and lengths add up; 4 MiB of payload alone would overflow.
    entries = [entry(2**40 + i, 100) for i in range(60_000)]
    replies = list(entry_replies(entries))
    assert len(replies) > 1
    assert all(len(reply) <= MAX_REPLY_BYTES for reply in replies)
    decoded = [e.entry_id for reply in replies for e in ledger_pb2.TailEntriesResponse.FromString(reply).entries]
    assert decoded == [e.entry_id for e in entries]
    # Two entries near the largest never share a reply.
    assert len(list(entry_replies([entry(0, 2_200_000), entry(1, 2_200_000)]))) == 2


def test_a_reply_fills_up_to_its_limit_exactly():
    """Sizes are the encoded ones, not bounds: a reply takes every entry that fits."""
    one = len(next(entry_replies([entry(5, 1000)])))
    replies = list(entry_replies([entry(5, 1000)] * 10, limit=3 * one))
    assert [len(reply) for reply in replies] == [3 * one, 3 * one, 3 * one, one]
