"""A bookie writes its ReadEntry and ReadEntries replies by hand
(quire_bookie.servicer): they must be the bytes protobuf's encoder writes."""

from __future__ import annotations

import pytest

from quire_bookie.servicer import read_entries_reply, read_entry_reply
from quire_proto.bookie.v1 import bookie_pb2

FOUND = [(0, b""), (1, b"a" * 40), (300, b"b" * 70_000), (2**62, b"c")]


@pytest.mark.parametrize("entry_id, data", FOUND)
def test_a_read_entry_reply_is_what_protobuf_encodes(entry_id: int, data: bytes) -> None:
    expected = bookie_pb2.ReadEntryResponse(entry=bookie_pb2.PackedEntry(entry_id=entry_id, data=data))
    assert read_entry_reply(entry_id, data) == expected.SerializeToString()


@pytest.mark.parametrize(
    "found, missing, truncated",
    [
        (FOUND, [], False),
        (FOUND[1:2], [5, 2**40, 0], True),  # an id of 0 is still sent in a packed list
        ([], [7], False),
        ([], [], False),  # nothing: the empty message
    ],
)
def test_a_read_entries_reply_is_what_protobuf_encodes(
    found: list[tuple[int, bytes]], missing: list[int], truncated: bool
) -> None:
    expected = bookie_pb2.ReadEntriesResponse(
        entries=[bookie_pb2.PackedEntry(entry_id=e, data=d) for e, d in found],
        missing_entry_ids=missing,
        truncated=truncated,
    )
    encoded = read_entries_reply(found, missing, truncated)
    assert encoded == expected.SerializeToString()
    decoded = bookie_pb2.ReadEntriesResponse.FromString(encoded)
    assert [(e.entry_id, e.data) for e in decoded.entries] == found
    assert (list(decoded.missing_entry_ids), decoded.truncated) == (missing, truncated)
