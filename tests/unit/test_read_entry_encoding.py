"""The gateway writes the replies that carry entries by hand
(quire_gateway.read.replies): they must be the bytes protobuf's encoder
writes, and read back as the entries they carry."""

from __future__ import annotations

import pytest

from quire_api.errors import OutOfRange
from quire_gateway.read.replicas import ReadEntry
from quire_gateway.read.replies import blob_data_reply, entry_replies, read_entry_response
from quire_gateway.servicer import read_entry_error_response
from quire_proto.gateway.v1 import blob_pb2, ledger_pb2

ENTRIES = [
    ReadEntry(0, b"", 0),  # every field at its default: an empty Entry, still present
    ReadEntry(0, b"first", 5),
    ReadEntry(127, b"p" * 1024, 128 * 1024),  # one-byte id, two-byte payload length
    ReadEntry(16_384, b"q" * 70_000, 2**21),  # three-byte id and lengths
    ReadEntry(2**62, b"r", 2**63 - 1),  # the largest ids and lengths an int64 holds
]


def entry_message(entry: ReadEntry) -> ledger_pb2.Entry:
    return ledger_pb2.Entry(entry_id=entry.entry_id, payload=entry.payload, length=entry.length)


@pytest.mark.parametrize("entry", ENTRIES)
def test_an_encoded_read_entry_answer_is_what_protobuf_encodes(entry: ReadEntry) -> None:
    encoded = read_entry_response(entry)
    assert encoded == ledger_pb2.ReadEntryResponse(entry=entry_message(entry)).SerializeToString()
    decoded = ledger_pb2.ReadEntryResponse.FromString(encoded)
    assert decoded.WhichOneof("result") == "entry"
    assert (decoded.entry.entry_id, decoded.entry.payload, decoded.entry.length) == tuple(entry)


@pytest.mark.parametrize(
    "reply", [ledger_pb2.ReadEntriesResponse, ledger_pb2.ReadUnconfirmedEntriesResponse, ledger_pb2.TailEntriesResponse]
)
def test_an_encoded_reply_of_entries_is_what_protobuf_encodes(reply: type) -> None:
    (encoded,) = entry_replies(ENTRIES)
    assert encoded == reply(entries=[entry_message(entry) for entry in ENTRIES]).SerializeToString()
    decoded = reply.FromString(encoded)
    assert [(e.entry_id, e.payload, e.length) for e in decoded.entries] == [tuple(entry) for entry in ENTRIES]


def test_an_encoded_error_answer_carries_the_error() -> None:
    decoded = ledger_pb2.ReadEntryResponse.FromString(read_entry_error_response(OutOfRange("past the LAC")))
    assert decoded.WhichOneof("result") == "error"
    assert decoded.error.message == "past the LAC"


@pytest.mark.parametrize("data", [b"", b"x", b"y" * 300, b"z" * (1 << 20)])
def test_an_encoded_blob_part_is_what_protobuf_encodes(data: bytes) -> None:
    encoded = blob_data_reply(data)
    assert encoded == blob_pb2.GetBlobResponse(data=data).SerializeToString()
    assert blob_pb2.GetBlobResponse.FromString(encoded).data == data
