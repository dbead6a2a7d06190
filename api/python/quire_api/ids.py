"""Identifiers: 128-bit ledger ids (BP-35) and BookieIds (BP-41).

A ledger id is a (scope_id, ledger_id) pair of unsigned 64-bit integers. Its
text form, the qualified name, is the 128-bit value as a lowercase UUID string,
so ledgers sort by scope, then by ledger id, in both etcd and RocksDB.
"""

from __future__ import annotations

import functools
import os
import re
import secrets
import time
from typing import NamedTuple

from quire_api.errors import InvalidArgument, Reason
from quire_proto.common.v1 import common_pb2

U64_MAX = (1 << 64) - 1

_HEX32 = re.compile(r"^[0-9a-fA-F]{32}$")
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_SCOPED_DECIMAL = re.compile(r"^([0-9]+):([0-9]+)$")


class _LedgerIdFields(NamedTuple):
    scope_id: int
    ledger_id: int


class LedgerId(_LedgerIdFields):
    """A 128-bit ledger id: scope in the high 64 bits, ledger in the low 64.

    A tuple, so that hashing and comparing one (every dict a bookie or a
    gateway keys by ledger, several times per entry) runs in C; a frozen
    dataclass paid a Python-level `__hash__` each time (docs/decisions.md)."""

    __slots__ = ()

    def __new__(cls, scope_id: int, ledger_id: int) -> LedgerId:
        # Both checked in one test (every request names a ledger): 0.35 against 0.49 µs.
        if not (0 <= scope_id <= U64_MAX and 0 <= ledger_id <= U64_MAX):
            name, value = ("scope_id", scope_id) if not 0 <= scope_id <= U64_MAX else ("ledger_id", ledger_id)
            raise InvalidArgument(f"{name} {value} is not an unsigned 64-bit integer", Reason.INVALID_LEDGER_ID)
        return super().__new__(cls, scope_id, ledger_id)

    @property
    def value(self) -> int:
        return (self.scope_id << 64) | self.ledger_id

    @property
    def qualified_name(self) -> str:
        text = f"{self.value:032x}"
        return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"

    @property
    def key(self) -> bytes:
        """The 16-byte big-endian form used in storage keys."""
        return ((self[0] << 64) | self[1]).to_bytes(16, "big")  # not through `value`: a bookie asks per entry

    @classmethod
    def from_value(cls, value: int) -> LedgerId:
        return cls(value >> 64, value & U64_MAX)

    @classmethod
    def from_key(cls, key: bytes) -> LedgerId:
        return cls.from_value(int.from_bytes(key[:16], "big"))

    @classmethod
    def parse(cls, text: str) -> LedgerId:
        """Parse a qualified name, 32 hex digits, or `scope:ledger` in decimal."""
        text = text.strip()
        if _UUID.match(text) or _HEX32.match(text):
            return cls.from_value(int(text.replace("-", ""), 16))
        match = _SCOPED_DECIMAL.match(text)
        if match:
            return cls(int(match.group(1)), int(match.group(2)))
        raise InvalidArgument(
            f"malformed ledger id {text!r}: expected a UUID-form qualified name "
            "(xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx), 32 hex digits, or scope:ledger in decimal",
            Reason.INVALID_LEDGER_ID,
        )

    def __str__(self) -> str:
        return self.qualified_name


def new_uuid7_ledger_id() -> LedgerId:
    """A fresh 128-bit id laid out as a UUIDv7: time-ordered, so new ledgers
    land at the end of the RocksDB key space."""
    unix_ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    value = (unix_ms & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76  # version 7
    value |= ((rand >> 62) & 0xFFF) << 64  # rand_a, 12 bits
    value |= 0b10 << 62  # RFC 9562 variant
    value |= rand & ((1 << 62) - 1)  # rand_b, 62 bits
    return LedgerId.from_value(value)


def new_scoped_ledger_id(scope_id: int) -> LedgerId:
    """A new ledger id within a scope: milliseconds in the high bits keep it
    time-ordered, 22 random bits make a clash unlikely; the registry's
    create-if-absent turns a clash into a retry."""
    unix_ms = time.time_ns() // 1_000_000
    return LedgerId(scope_id, ((unix_ms << 22) | secrets.randbits(22)) & (U64_MAX >> 1))


# BookieIds (BP-41): 1-255 characters of [A-Za-z0-9._:-], never "readonly".
# An explicit set, not a regex: `$` would let a trailing newline through.
_BOOKIE_ID_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:-")


def validate_bookie_id(bookie_id: str) -> str:
    """Return the id unchanged, or raise InvalidArgument saying what is wrong."""
    if not bookie_id:
        raise InvalidArgument("BookieId is empty", Reason.INVALID_BOOKIE_ID)
    if len(bookie_id) > 255:
        raise InvalidArgument(
            f"BookieId is {len(bookie_id)} characters long; at most 255 are allowed",
            Reason.INVALID_BOOKIE_ID,
        )
    if not _BOOKIE_ID_CHARS.issuperset(bookie_id):
        raise InvalidArgument(
            f"BookieId {bookie_id!r} may only hold letters, digits and . _ : -",
            Reason.INVALID_BOOKIE_ID,
        )
    if bookie_id.lower() == "readonly":
        raise InvalidArgument("BookieId may not be 'readonly'", Reason.INVALID_BOOKIE_ID)
    return bookie_id


REQUEST_ID_MAX_LENGTH = 128
_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")


def validate_request_id(request_id: str) -> str:
    """A CreateLedger idempotency key: 1 to 128 of A-Z a-z 0-9 . _ : - (it
    becomes part of a metadata store key, so no slashes)."""
    if not _REQUEST_ID.fullmatch(request_id):
        raise InvalidArgument(
            f"request_id {request_id[:REQUEST_ID_MAX_LENGTH]!r} is not 1 to {REQUEST_ID_MAX_LENGTH} of "
            "A-Z a-z 0-9 . _ : - (a UUID fits)"
        )
    return request_id


def parse_host_port(bookie_id: str) -> tuple[str, int] | None:
    """The (host, port) a legacy `host:port` BookieId names, or None."""
    host, sep, port = bookie_id.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        return None
    return host, int(port)


def ledger_id_from_proto(message: common_pb2.LedgerId | None, field: str = "ledger_id") -> LedgerId:
    """The LedgerId a request names, by its two halves or its qualified_name
    (for clients without 64-bit integers); INVALID_ARGUMENT when it names
    none, or when both forms are given and differ."""
    scope_id, ledger_id = (message.scope_id, message.ledger_id) if message is not None else (0, 0)
    name = message.qualified_name if message is not None else ""
    if name:
        named = _parsed_name(name)
        if (scope_id or ledger_id) and (scope_id, ledger_id) != (named.scope_id, named.ledger_id):
            raise InvalidArgument(
                f"{field}: qualified_name {name!r} is {named.scope_id}:{named.ledger_id} but "
                f"scope_id and ledger_id say {scope_id}:{ledger_id} (rounded by a JSON or "
                "JavaScript number?); send one form, or both equal",
                Reason.INVALID_LEDGER_ID,
            )
        scope_id, ledger_id = named.scope_id, named.ledger_id
    if not scope_id and not ledger_id:
        raise InvalidArgument(f"{field} is required (scope 0, ledger 0 is not a ledger)", Reason.INVALID_LEDGER_ID)
    return LedgerId(scope_id, ledger_id)


@functools.lru_cache(maxsize=4096)
def _parsed_name(text: str) -> LedgerId:
    """LedgerId.parse, remembered: a client names the same few ledgers in
    call after call, and the parse (regular expressions, a 128-bit int) was
    a visible share of a one-entry read. Malformed names raise every time."""
    return LedgerId.parse(text)


def ledger_id_to_proto(ledger_id: LedgerId) -> common_pb2.LedgerId:
    return common_pb2.LedgerId(scope_id=ledger_id.scope_id, ledger_id=ledger_id.ledger_id)
