"""Storage fault injection for the fault lab (tests and drills only).

`FaultyStore` wraps the EntryStore and can:
- fail writes with EIO while a trigger file exists (QUIRE_BOOKIE_FAULT_WRITE_EIO_FILE),
- fail reads with EIO while a trigger file exists (QUIRE_BOOKIE_FAULT_READ_EIO_FILE),
- keep written batches in memory instead of writing them, as a page cache
  that is never written back (QUIRE_BOOKIE_FAULT_LOSE_UNSYNCED_WRITES, only
  together with QUIRE_BOOKIE_UNSAFE_NO_SYNC_LOSES_DATA). A SIGKILL then loses
  every acknowledged entry: the power-loss positive control of the fault
  suite. Buffered entries are written on a graceful close.
Trigger files let a test switch a fault on and off while the bookie runs.
Production never sets any of these; the bookie logs a loud warning when one is.
"""

from __future__ import annotations

import errno
import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from quire_api.ids import LedgerId
from quire_bookie.storage import EntryStore, LedgerState, entry_key

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StorageFaults:
    write_eio_file: Path | None = None
    read_eio_file: Path | None = None
    lose_unsynced_writes: bool = False

    @property
    def any(self) -> bool:
        return bool(self.write_eio_file or self.read_eio_file or self.lose_unsynced_writes)


class FaultyStore:
    """An EntryStore with injected faults; everything else passes through."""

    def __init__(self, store: EntryStore, faults: StorageFaults) -> None:
        self._store = store
        self._faults = faults
        self._lock = threading.Lock()
        self._unwritten: dict[bytes, bytes] = {}  # entry key -> packed entry, never written
        self._unwritten_states: dict[LedgerId, LedgerState] = {}
        log.warning("STORAGE FAULT INJECTION ENABLED: %s; never set this in production", faults)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    @staticmethod
    def _raise_if(trigger: Path | None, what: str) -> None:
        if trigger is not None and trigger.exists():
            raise OSError(errno.EIO, f"injected I/O error on {what}")

    def write(
        self, entries: list[tuple[LedgerId, int, bytes]], states: dict[LedgerId, LedgerState], *, sync: bool = True
    ) -> None:
        self._raise_if(self._faults.write_eio_file, "write")
        if not self._faults.lose_unsynced_writes:
            self._store.write(entries, states, sync=sync)
            return
        with self._lock:
            for ledger_id, entry_id, data in entries:
                self._unwritten[entry_key(ledger_id, entry_id)] = data
            self._unwritten_states.update(states)

    def read_state(self, ledger_id: LedgerId) -> LedgerState | None:
        """As the store would answer once what is held were written: the
        record, moved on to the highest entry held or stored."""
        prefix = ledger_id.key
        with self._lock:
            held = self._unwritten_states.get(ledger_id)
            held_entries = [(int.from_bytes(k[16:], "big"), d) for k, d in self._unwritten.items() if k[:16] == prefix]
        state = held if held is not None else self._store.read_state(ledger_id)
        if state is None or not held_entries:
            return state
        return state.with_last_entry(max(held_entries))

    def state_ledger_ids(self) -> list[LedgerId]:
        stored = self._store.state_ledger_ids()
        with self._lock:
            held = set(self._unwritten_states).difference(stored)
        return stored + sorted(held)

    def count_states(self) -> int:
        return len(self.state_ledger_ids())

    def read(self, ledger_id: LedgerId, entry_id: int) -> bytes | None:
        self._raise_if(self._faults.read_eio_file, "read")
        with self._lock:
            held = self._unwritten.get(entry_key(ledger_id, entry_id))
        return held if held is not None else self._store.read(ledger_id, entry_id)

    def read_many(self, *args: Any, **kwargs: Any) -> Any:
        self._raise_if(self._faults.read_eio_file, "read")
        return self._store.read_many(*args, **kwargs)

    def read_range(self, *args: Any, **kwargs: Any) -> Any:
        self._raise_if(self._faults.read_eio_file, "read")
        return self._store.read_range(*args, **kwargs)

    def close(self) -> None:
        """A graceful stop writes back what was held (only SIGKILL loses it)."""
        with self._lock:
            if self._unwritten or self._unwritten_states:
                held = [
                    (
                        LedgerId(int.from_bytes(k[:8], "big"), int.from_bytes(k[8:16], "big")),
                        int.from_bytes(k[16:], "big"),
                        d,
                    )
                    for k, d in self._unwritten.items()
                ]
                self._store.write(held, self._unwritten_states)
                self._unwritten.clear()
                self._unwritten_states.clear()
        self._store.close()
