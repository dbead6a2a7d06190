"""Entry format V2 (written) and V1 (read), digests and the master key.

V2, all integers big-endian:
    flags(1) | scope_id(8) | ledger_id(8) | entry_id(8) | lac(8) | length(8) | digest | payload
flags: bit 7 set (marks V2), bits 4-6 minor version (0), bits 0-3 the digest type.
V1 (scope 0 only, read for compatibility):
    ledger_id(8) | entry_id(8) | lac(8) | length(8) | digest | payload
The digest covers the header and the payload.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum

import google_crc32c

from quire_api.errors import DataLoss, InvalidArgument, Reason
from quire_api.ids import LedgerId

V2_FLAG = 0x80
V2_MINOR_VERSION = 0
_V2_HEADER = struct.Struct(">BQQqqq")  # flags, scope, ledger, entry, lac, length
_V1_HEADER = struct.Struct(">Qqqq")  # ledger, entry, lac, length
V2_HEADER_SIZE = _V2_HEADER.size  # 41
V1_HEADER_SIZE = _V1_HEADER.size  # 32


class DigestType(IntEnum):
    """Numbers as in BookKeeper and quire.common.v1.DigestType."""

    CRC32 = 1
    HMAC = 2
    CRC32C = 3
    DUMMY = 4


DIGEST_SIZES = {DigestType.CRC32: 8, DigestType.HMAC: 20, DigestType.CRC32C: 4, DigestType.DUMMY: 0}


class DigestMismatch(DataLoss):
    """A stored entry's digest does not match its bytes."""

    default_reason = Reason.DIGEST_MISMATCH


def master_key(password: bytes) -> bytes:
    """SHA1("ledger" + password): proves to a bookie that an add or fence
    comes from someone who knows the ledger's password."""
    return hashlib.sha1(b"ledger" + password).digest()


def mac_key(password: bytes) -> bytes:
    """SHA1("mac" + password): the key of a ledger's HMAC digests."""
    return hashlib.sha1(b"mac" + password).digest()


def v2_flags(digest_type: DigestType) -> int:
    """A V2 entry's flags byte for `digest_type`."""
    return V2_FLAG | (V2_MINOR_VERSION << 4) | int(digest_type)


class Digester:
    """Computes one ledger's entry digests, from the password or from the
    HMAC key derived from it (`key`, as a ledger record keeps it)."""

    def __init__(self, digest_type: DigestType | int, password: bytes = b"", *, key: bytes | None = None) -> None:
        try:
            self.digest_type = DigestType(digest_type)
        except ValueError:
            raise InvalidArgument(f"unknown digest type {digest_type}") from None
        self.size = DIGEST_SIZES[self.digest_type]
        self.v2_flags = v2_flags(self.digest_type)
        # The digest type's function, chosen once: a writer computes a digest for every entry.
        # Only an HMAC needs the key (a SHA-1 to derive from a password): every read makes a Digester.
        self.compute: Callable[[bytes, bytes], bytes]
        if self.digest_type is DigestType.HMAC:
            self.compute = functools.partial(_hmac_digest, key if key is not None else mac_key(password))
        else:
            self.compute = _UNKEYED_DIGESTS[self.digest_type]


def _crc32c_digest(header: bytes, payload: bytes) -> bytes:
    return google_crc32c.extend(google_crc32c.value(header), payload).to_bytes(4, "big")


def _hmac_digest(key: bytes, header: bytes, payload: bytes) -> bytes:
    mac = hmac.new(key, header, hashlib.sha1)
    mac.update(payload)
    return mac.digest()


def _crc32_digest(header: bytes, payload: bytes) -> bytes:
    return zlib.crc32(payload, zlib.crc32(header)).to_bytes(8, "big")


def _no_digest(header: bytes, payload: bytes) -> bytes:
    return b""


_UNKEYED_DIGESTS: dict[DigestType, Callable[[bytes, bytes], bytes]] = {
    DigestType.CRC32C: _crc32c_digest,
    DigestType.CRC32: _crc32_digest,
    DigestType.DUMMY: _no_digest,
}


@dataclass(frozen=True, slots=True)
class EntryHeader:
    """The fields a packed entry's header carries."""

    ledger_id: LedgerId
    entry_id: int
    last_add_confirmed: int
    length: int
    format_version: int
    digest_type: DigestType | None  # None for V1, whose header does not say

    @property
    def size(self) -> int:
        return V2_HEADER_SIZE if self.format_version == 2 else V1_HEADER_SIZE


def pack_entry(
    ledger_id: LedgerId,
    entry_id: int,
    last_add_confirmed: int,
    length: int,
    payload: bytes,
    digester: Digester,
) -> bytes:
    """Pack one entry in format V2."""
    header = _V2_HEADER.pack(
        digester.v2_flags, ledger_id.scope_id, ledger_id.ledger_id, entry_id, last_add_confirmed, length
    )
    return header + digester.compute(header, payload) + payload


def pack_entry_v1(
    ledger_id: int, entry_id: int, last_add_confirmed: int, length: int, payload: bytes, digester: Digester
) -> bytes:
    """Pack one entry in format V1. Quire never writes V1; this exists so that
    tests can prove V1 data is still read."""
    header = _V1_HEADER.pack(ledger_id, entry_id, last_add_confirmed, length)
    return header + digester.compute(header, payload) + payload


def parse_header(data: bytes) -> EntryHeader:
    """Read a packed entry's header without checking its digest."""
    if not data:
        raise InvalidArgument("packed entry is empty", Reason.ENTRY_HEADER_MISMATCH)
    if data[0] & V2_FLAG:
        if len(data) < V2_HEADER_SIZE:
            raise InvalidArgument(
                f"packed V2 entry is {len(data)} bytes, shorter than its {V2_HEADER_SIZE}-byte header",
                Reason.ENTRY_HEADER_MISMATCH,
            )
        flags, scope, ledger, entry_id, lac, length = _V2_HEADER.unpack_from(data)
        if (flags >> 4) & 0x7 != V2_MINOR_VERSION:
            raise InvalidArgument(
                f"unsupported entry format minor version {(flags >> 4) & 0x7}", Reason.ENTRY_HEADER_MISMATCH
            )
        try:
            digest_type = DigestType(flags & 0x0F)
        except ValueError:
            raise InvalidArgument(
                f"unknown digest type {flags & 0x0F} in entry header", Reason.ENTRY_HEADER_MISMATCH
            ) from None
        return EntryHeader(LedgerId(scope, ledger), entry_id, lac, length, 2, digest_type)
    if len(data) < V1_HEADER_SIZE:
        raise InvalidArgument(
            f"packed V1 entry is {len(data)} bytes, shorter than its {V1_HEADER_SIZE}-byte header",
            Reason.ENTRY_HEADER_MISMATCH,
        )
    ledger, entry_id, lac, length = _V1_HEADER.unpack_from(data)
    return EntryHeader(LedgerId(0, ledger), entry_id, lac, length, 1, None)


def header_ids(data: bytes) -> tuple[int, int, int, int]:
    """(scope id, ledger id, entry id, lac) of a packed entry: the fields a
    bookie checks on every add, without building objects for a well-formed
    V2 header. Anything else goes through parse_header and its errors."""
    if len(data) >= V2_HEADER_SIZE and data[0] & 0xF0 == V2_FLAG and 1 <= data[0] & 0x0F <= 4:
        _, scope, ledger, entry_id, lac, _ = _V2_HEADER.unpack_from(data)
        return scope, ledger, entry_id, lac
    header = parse_header(data)
    return header.ledger_id.scope_id, header.ledger_id.ledger_id, header.entry_id, header.last_add_confirmed


# Digests that need no password, so a bookie can check them on the way in.
_KEYLESS_DIGESTERS: dict[int, Digester] = {}


def check_keyless_digest(data: bytes) -> bool | None:
    """Whether a packed V2 entry's CRC32 or CRC32C digest matches its bytes;
    None when it cannot be told without the ledger's password (HMAC), the
    entry has no digest (DUMMY) or does not say its type (V1)."""
    if len(data) < V2_HEADER_SIZE or data[0] & 0xF0 != V2_FLAG:
        return None  # V1 (or not an entry at all: parse_header says why)
    kind = data[0] & 0x0F
    if kind not in (DigestType.CRC32, DigestType.CRC32C):
        return None
    digester = _KEYLESS_DIGESTERS.get(kind)
    if digester is None:
        digester = _KEYLESS_DIGESTERS[kind] = Digester(DigestType(kind))
    digest_end = V2_HEADER_SIZE + digester.size
    if len(data) < digest_end:
        return False
    return digester.compute(data[:V2_HEADER_SIZE], data[digest_end:]) == data[V2_HEADER_SIZE:digest_end]


# The flags byte of a V2 entry with a CRC32C digest: what Quire's writers pack.
_V2_CRC32C_FLAGS = v2_flags(DigestType.CRC32C)
_V2_CRC32C_PAYLOAD_AT = V2_HEADER_SIZE + DIGEST_SIZES[DigestType.CRC32C]
# Its header and the digest after it, read in one unpack.
_V2_HEADER_AND_CRC32C = struct.Struct(_V2_HEADER.format + "I")


def header_ids_and_digest(data: bytes) -> tuple[int, int, int, int, bool | None]:
    """`header_ids` and `check_keyless_digest` of one packed entry in one
    call, as a bookie checks every add: an entry in Quire's own form (V2,
    CRC32C) takes one unpack and one checksum here, any other goes through
    those two functions."""
    if len(data) >= _V2_CRC32C_PAYLOAD_AT and data[0] == _V2_CRC32C_FLAGS:
        _, scope, ledger, entry_id, lac, _, digest = _V2_HEADER_AND_CRC32C.unpack_from(data)
        crc = google_crc32c.extend(google_crc32c.value(data[:V2_HEADER_SIZE]), data[_V2_CRC32C_PAYLOAD_AT:])
        return scope, ledger, entry_id, lac, crc == digest
    return (*header_ids(data), check_keyless_digest(data))


def unpack_entry(data: bytes, digester: Digester) -> tuple[EntryHeader, bytes]:
    """Parse a packed entry and check its digest; DigestMismatch if it is wrong."""
    header = parse_header(data)
    if header.digest_type is not None and header.digest_type != digester.digest_type:
        raise DigestMismatch(
            f"entry {header.entry_id} carries digest type {header.digest_type.name}, "
            f"the ledger uses {digester.digest_type.name}"
        )
    start = header.size
    digest_end = start + digester.size
    if len(data) < digest_end:
        raise DigestMismatch(f"entry {header.entry_id} is truncated inside its digest")
    payload = data[digest_end:]
    expected = digester.compute(data[:start], payload)
    if not hmac.compare_digest(expected, data[start:digest_end]):
        raise DigestMismatch(f"digest mismatch on entry {header.entry_id}")
    return header, payload


def verified_without_key(data: bytes, ledger_id: LedgerId, entry_id: int) -> bool:
    """What a bookie, which holds no ledger's key, can verify of a stored copy
    of `entry_id` of `ledger_id`: its header names that entry, and a CRC32 or
    CRC32C digest matches (an HMAC digest is left to `verified_entry`)."""
    if len(data) >= V2_HEADER_SIZE and data[0] & 0xF0 == V2_FLAG:
        # The common case, parsed once: the scrub verifies every copy it samples here.
        flags, scope, ledger, header_entry, _, _ = _V2_HEADER.unpack_from(data)
        if scope != ledger_id.scope_id or ledger != ledger_id.ledger_id or header_entry != entry_id:
            return False
        kind = flags & 0x0F
        digester = _KEYLESS_DIGESTERS.get(kind)
        if digester is None:
            return check_keyless_digest(data) is not False  # HMAC, DUMMY, a bad type, or not seen yet
        digest_end = V2_HEADER_SIZE + digester.size
        return (
            len(data) >= digest_end
            and digester.compute(data[:V2_HEADER_SIZE], data[digest_end:]) == data[V2_HEADER_SIZE:digest_end]
        )
    try:
        scope, ledger, header_entry, _ = header_ids(data)
    except InvalidArgument:
        return False
    if (scope, ledger, header_entry) != (ledger_id.scope_id, ledger_id.ledger_id, entry_id):
        return False
    return check_keyless_digest(data) is not False


def verified_entry(data: bytes, digester: Digester, ledger_id: LedgerId, entry_id: int) -> tuple[EntryHeader, bytes]:
    """A stored copy of `entry_id` of `ledger_id`, checked: its digest holds
    and its header names that entry. Every reader of replica copies (reads,
    recovery, the auditor, the scrub) decides "is this copy good?" here. A
    copy of another entry carries a digest of its own that checks, so the
    digest alone would pass it; DataLoss (ENTRY_HEADER_MISMATCH) instead."""
    header, payload = unpack_entry(data, digester)
    if header.ledger_id != ledger_id or header.entry_id != entry_id:
        raise DataLoss(
            f"the copy stored as entry {entry_id} of ledger {ledger_id} is entry {header.entry_id} "
            f"of ledger {header.ledger_id}",
            Reason.ENTRY_HEADER_MISMATCH,
        )
    return header, payload
