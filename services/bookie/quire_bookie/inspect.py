"""`quire bookie inspect`: look into a stopped bookie's RocksDB.

Opens the database read-only (RocksDB's read-only mode takes no lock and
writes nothing), lists ledgers with their state, dumps entries, and checks
digests. CRC32, CRC32C and DUMMY digests need no password; HMAC needs the
ledger's password. V1 entries do not say their digest type, so they are
dumped but not verified.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from quire_api.errors import InvalidArgument
from quire_api.ids import LedgerId
from quire_bookie.storage import NO_ENTRY, EntryStore, LedgerState
from quire_common.entry import DIGEST_SIZES, Digester, DigestMismatch, DigestType, parse_header, unpack_entry

LAST_ENTRY_ID = (1 << 63) - 1


@dataclass(frozen=True)
class LedgerRow:
    ledger_id: LedgerId
    entries: int
    last_entry_id: int
    last_add_confirmed: int
    fenced: bool


@dataclass(frozen=True)
class EntryRow:
    entry_id: int
    size_bytes: int
    format_version: int
    digest_type: str
    last_add_confirmed: int
    length: int
    payload: bytes
    digest_ok: bool | None  # None: not checked (not asked, V1, or HMAC without a password)
    problem: str = ""


def open_store(data_dir: Path) -> EntryStore:
    """The bookie's database, read-only; accepts the data directory or the
    RocksDB directory inside it."""
    path = data_dir / "rocksdb" if (data_dir / "rocksdb").is_dir() else data_dir
    return EntryStore(path, read_only=True)


def list_ledgers(data_dir: Path) -> list[LedgerRow]:
    store = open_store(data_dir)
    try:
        counts = store.ledgers_with_entries()
        states = store.load_states()
    finally:
        store.close()
    rows = []
    for ledger_id in sorted(set(counts) | set(states)):
        state = states.get(ledger_id, LedgerState())
        rows.append(LedgerRow(ledger_id, counts.get(ledger_id, 0), state.last_entry_id, state.lac, state.fenced))
    return rows


def _row(entry_id: int, data: bytes, verify: bool, password: bytes | None) -> EntryRow:
    try:
        header = parse_header(data)
    except InvalidArgument as exc:
        return EntryRow(entry_id, len(data), 0, "?", NO_ENTRY, 0, b"", False if verify else None, str(exc))
    kind = header.digest_type
    digest_end = header.size + (DIGEST_SIZES[kind] if kind is not None else 0)
    payload = data[digest_end:]
    problem = ""
    if header.entry_id != entry_id:
        problem = f"stored under entry {entry_id} but its header says {header.entry_id}"
    digest_ok: bool | None = None
    if verify and kind is not None and (kind is not DigestType.HMAC or password is not None):
        try:
            unpack_entry(data, Digester(kind, password or b""))
            digest_ok = not problem
        except DigestMismatch as exc:
            digest_ok, problem = False, str(exc)
    elif verify:
        problem = "V1 entry: digest type unknown" if kind is None else "HMAC digest: needs --password"
    return EntryRow(
        entry_id,
        len(data),
        header.format_version,
        kind.name if kind is not None else "unknown (V1)",
        header.last_add_confirmed,
        header.length,
        payload,
        digest_ok,
        problem,
    )


def dump_entries(
    data_dir: Path,
    ledger_id: LedgerId,
    first: int = 0,
    last: int = LAST_ENTRY_ID,
    *,
    verify: bool = False,
    password: bytes | None = None,
) -> Iterator[EntryRow]:
    """A ledger's entries with ids in [first, last], decoded, digests
    checked when `verify` is set."""
    store = open_store(data_dir)
    try:
        for entry_id, data in store.entries(ledger_id, max(first, 0), last):
            yield _row(entry_id, data, verify, password)
    finally:
        store.close()
