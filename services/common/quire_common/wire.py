"""Pieces of protobuf's wire format, for the few messages Quire writes by
hand on a hot path (a gateway's AddStream requests, the replies that carry
entries or blob parts): joined from pieces, a message's large bytes are
copied once, into the message itself, where building the protobuf and
serializing it copies them two or three times and costs each message a few
objects more (docs/decisions.md, "ReadEntry against the design's own
floor"). Unit tests hold each such message equal to protobuf's own encoding."""

from __future__ import annotations

# An int64 goes on the wire as its 64-bit two's complement: `varint(value & U64)`.
U64 = (1 << 64) - 1


def varint(value: int) -> bytes:
    """A protobuf base-128 varint of a value from 0 to 2**64 - 1."""
    if value < 0x80:
        return _ONE_BYTE_VARINTS[value]
    if value < 0x4000:
        return bytes(((value & 0x7F) | 0x80, value >> 7))
    if value < 0x200000:  # ids and lengths spend most of their lives here
        return bytes(((value & 0x7F) | 0x80, ((value >> 7) & 0x7F) | 0x80, value >> 14))
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_ONE_BYTE_VARINTS = [bytes((value,)) for value in range(0x80)]


def packed_ids(tag: bytes, ids: list[int]) -> bytes:
    """A repeated integer field of `ids` (each 0 to 2**64 - 1), packed as
    protobuf packs it: its tag, the length, the varints; nothing for none."""
    if not ids:
        return b""
    varints = b"".join([varint(value) for value in ids])
    return tag + varint(len(varints)) + varints


_ENTRY_FIELD_TAG = b"\x0a"  # field 1, length-delimited: the entry (or entries) of every reply written here
_ENTRY_ID_TAG = b"\x08"  # the entry's field 1 (entry_id), varint
_DATA_TAG = b"\x12"  # the entry's field 2 (the gateway's payload, a bookie's packed data), length-delimited
_LENGTH_TAG = b"\x18"  # the entry's field 3 (the gateway's length), varint


def add_entry_field(pieces: list[bytes], entry_id: int, data: bytes, length: int = 0) -> int:
    """Append to `pieces` field 1 of a reply whose field 1 holds entries: the
    gateway's Entry (entry_id, payload, length) or a bookie's PackedEntry
    (entry_id, data), which number their fields alike. Fields at zero are
    left out, as protobuf leaves them. Returns the bytes appended."""
    head = _ENTRY_ID_TAG + varint(entry_id & U64) if entry_id else b""
    framing = _DATA_TAG + varint(len(data)) if data else b""
    tail = _LENGTH_TAG + varint(length & U64) if length else b""
    size = len(head) + len(framing) + len(data) + len(tail)
    prefix = _ENTRY_FIELD_TAG + varint(size)
    pieces += (prefix, head, framing, data, tail)
    return len(prefix) + size
