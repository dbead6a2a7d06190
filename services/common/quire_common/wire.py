"""Pieces of protobuf's wire format, for the few messages Quire writes by
hand on a hot path (a gateway's AddStream requests, its single-entry read
answers): joined from pieces, a message's large bytes are copied once, into
the message itself, where building the protobuf and serializing it copies
them twice and costs each message a few objects more."""

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
