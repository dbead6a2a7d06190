"""Read replies encoded from pieces.

A ReadEntryResponse carries one entry, and the replies of ReadEntries,
ReadUnconfirmedEntries and TailEntries carry many. All four hold their
entries in field 1 of their message, so one entry's encoding serves each of
them; a GetBlobResponse holds a part of a blob in its field 1. Joined from
pieces, a payload is copied once, into the reply. A reply built as a
protobuf copies it into each Entry, again into the reply's repeated field,
and again when serialized: 16 entries of 64 KiB cost 1,452 µs built and 52
joined, a 1 MiB blob part 1,264 and 14 (docs/decisions.md, "ReadEntry
against the design's own floor"). The servicer sends these bytes as they are
(servicer.add_ledger_servicer_to_server, add_blob_servicer_to_server); unit
tests hold them equal to protobuf's own encoding.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from quire_api.limits import MAX_REPLY_BYTES
from quire_common.wire import add_entry_field, varint
from quire_gateway.read.replicas import ReadEntry

_BLOB_DATA_TAG = b"\x0a"  # GetBlobResponse field 1 (data), length-delimited


def read_entry_response(entry: ReadEntry) -> bytes:
    """The ReadEntryResponse carrying `entry`, encoded."""
    pieces: list[bytes] = []
    add_entry_field(pieces, *entry)
    return b"".join(pieces)


def entry_replies(entries: Iterable[ReadEntry], limit: int = MAX_REPLY_BYTES) -> Iterator[bytes]:
    """`entries` in order, in encoded replies of at most `limit` bytes each, so
    that every reply fits a client at gRPC's default 4 MiB receive limit. An
    entry is never split: the gateway accepts none larger than
    MAX_ENTRY_PAYLOAD_BYTES, which fits."""
    pieces: list[bytes] = []
    size = 0
    for entry in entries:
        mark = len(pieces)
        entry_size = add_entry_field(pieces, *entry)
        if size and size + entry_size > limit:
            yield b"".join(pieces[:mark])
            del pieces[:mark]
            size = 0
        size += entry_size
    if pieces:
        yield b"".join(pieces)


def blob_data_reply(data: bytes) -> bytes:
    """The GetBlobResponse carrying `data`, encoded (its one field, as protobuf leaves an empty one out)."""
    return b"".join((_BLOB_DATA_TAG, varint(len(data)), data)) if data else b""
