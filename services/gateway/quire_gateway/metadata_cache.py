"""Ledger metadata cached in the gateway, kept current by the registry's
WatchLedgerMetadata stream. Domain code: no grpc here (cluster_calls.py turns the
stream into MetadataChange values, metadata_store.py).

Reads (`recent_ledger_metadata`) are answered from the cache when the entry can be trusted, and
otherwise fetched from the registry and kept (LRU, at most `capacity`
ledgers). The rules:

- The watch delivers every change (PUT with the new version, DELETED) after a
  revision. A PUT replaces a cached entry only when its version is newer; a
  DELETED removes an entry older than the delete. Changes of ledgers not
  cached are ignored, except while a fetch of that ledger is in flight (so a
  fetch that read before a change cannot put back what the change replaced).
- An *epoch* is a stretch of watching with no gap in what was delivered. A
  stream that resumes where the last one ended continues the epoch; a stream
  started from "now" and a RESET (the registry could not replay history that
  etcd compacted) begin a new one, and drop every entry of an open (or
  in-recovery) ledger. An entry is stamped with the epoch in which it was
  read (for a fetch: when the fetch started).
- An entry of a ledger that is not CLOSED is trusted only while the watch is
  connected and the entry belongs to the current epoch. Otherwise `get` goes
  to the registry: a writer may have added an ensemble, closed or recovered
  the ledger, and nobody would tell us.
- An entry of a CLOSED ledger is trusted whether or not the watch is
  connected, so closed ledgers stay readable while the registry or etcd is
  down. A closed ledger's end, digest type and password never change; what
  may still change is where copies live (the auditor replaces a lost bookie)
  and repair markers, and the ledger may be deleted. Stale copies of those
  cost availability, never correctness: every entry is digest-checked, and
  any good copy holds the same bytes. A closed entry from an earlier epoch
  (changes may have been missed across the gap) is served at once and
  checked with the registry in the background; one found deleted is dropped.
- The cache is a layer in front of the registry's metadata calls (the same
  `LedgerMetadataStore` interface as without it, metadata_store.py): the
  gateway's own reads, compare-and-swaps and deletes go through it and are
  kept (`learned`, `forget`): a successful update moves a cached entry to the
  new version; a compare-and-swap conflict or a NOT_FOUND drops it.

A deleted ledger is therefore forgotten as soon as the watch delivers the
delete; while the watch is down, a cached closed ledger that another gateway
deletes stays readable here until the watch resumes (the delete is replayed)
or, after a RESET, until its first use checks it. Reads of it then fail
NOT_FOUND, as they do once the bookies have dropped its entries.

Entries hold each record serialized (about 300 bytes with their keys; a
parsed LedgerMetadata held about 1.8 KB of RSS) and parse it on every hit
(about 1 µs). Returned metadata objects may still be shared between callers
(concurrent misses share one fetch): callers must not modify them (copy
first, as every writer does).
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from quire_api.backoff import Backoff
from quire_api.errors import Aborted, NotFound
from quire_api.ids import LedgerId, ledger_id_to_proto
from quire_common.tasks import cancel_and_wait
from quire_gateway.metadata_store import ChangeKind, MetadataChange, MetadataSource
from quire_proto.common.v1 import common_pb2

log = logging.getLogger(__name__)

DEFAULT_CAPACITY = 10_000
HEARTBEAT_SECONDS = 2.0  # asked of the registry: PROGRESS at least this often
SILENCE_SECONDS = 3 * HEARTBEAT_SECONDS  # nothing heard for this long: the stream counts as broken
_RECONNECT = Backoff(first_seconds=0.2, longest_seconds=5.0)


@dataclass(slots=True)
class _Entry:
    record: bytes  # the LedgerMetadata, serialized
    version: int
    epoch: int
    closed: bool

    @classmethod
    def of(cls, metadata: common_pb2.LedgerMetadata, version: int, epoch: int) -> _Entry:
        return cls(metadata.SerializeToString(), version, epoch, _closed(metadata))

    def metadata(self) -> common_pb2.LedgerMetadata:
        return common_pb2.LedgerMetadata.FromString(self.record)


@dataclass(slots=True)
class _Fetch:
    task: asyncio.Future[tuple[common_pb2.LedgerMetadata, int]]
    epoch: int  # the cache's epoch when the fetch started
    deleted_at: int = 0  # the latest delete the watch reported meanwhile
    discard: bool = False  # forgotten meanwhile: do not keep the result


def _closed(metadata: common_pb2.LedgerMetadata) -> bool:
    return metadata.state == common_pb2.LEDGER_STATE_CLOSED


class LedgerMetadataCache:
    def __init__(
        self,
        source: MetadataSource,
        capacity: int = DEFAULT_CAPACITY,
        *,
        heartbeat_seconds: float = HEARTBEAT_SECONDS,
        silence_seconds: float | None = None,
    ) -> None:
        if capacity < 1:
            raise ValueError("a metadata cache holds at least one ledger")
        self._source = source
        self.capacity = capacity
        self._heartbeat = heartbeat_seconds
        self._silence = silence_seconds or 3 * heartbeat_seconds
        self._entries: OrderedDict[LedgerId, _Entry] = OrderedDict()
        self._fetches: dict[LedgerId, _Fetch] = {}
        self._task: asyncio.Task[None] | None = None
        self.connected = False  # a watch stream is delivering changes now
        self.epoch = 0  # 0: before the first stream started
        self._epoch_start = 0  # the current epoch's stream delivers every change after this revision
        self.revision = 0  # every change up to this revision has been applied (0: none yet)
        self._requested = 0  # the start revision the current stream asked for (0: from now)
        self.hits = 0
        self.misses = 0
        self.resets = 0
        self.evictions = 0
        # Told every PUT and DELETED the watch delivers, of every ledger (the auditor's marked ledgers).
        self._followers: list[Callable[[MetadataChange], None]] = []

    def follow(self, follower: Callable[[MetadataChange], None]) -> None:
        """Call `follower` with every ledger change the watch delivers from
        now on, cached or not; `epoch` says whether any may have been missed."""
        self._followers.append(follower)

    # -- reads -------------------------------------------------------------------

    async def recent_ledger_metadata(self, ledger_id: LedgerId) -> tuple[common_pb2.LedgerMetadata, int]:
        """The ledger's metadata and version: from the cache when it can be
        trusted (see the module's rules), else from the registry."""
        cached = self.cached_ledger_metadata(ledger_id)
        if cached is not None:
            return cached
        self.misses += 1
        fetch = self._fetches.get(ledger_id) or self._start_fetch(ledger_id)
        return await asyncio.shield(fetch.task)

    def cached_ledger_metadata(self, ledger_id: LedgerId) -> tuple[common_pb2.LedgerMetadata, int] | None:
        """The ledger's metadata and version if the cache holds them and
        they can be trusted now (see the module's rules); None when the
        registry must be asked."""
        entry = self._entries.get(ledger_id)
        if entry is None or not (entry.closed or self.connected):
            return None
        if entry.epoch == self.epoch:
            self._entries.move_to_end(ledger_id)
            self.hits += 1
            return entry.metadata(), entry.version
        if entry.closed:  # from before a gap: serve it, and check it behind the reader's back
            self._entries.move_to_end(ledger_id)
            self.hits += 1
            if ledger_id not in self._fetches:
                self._start_fetch(ledger_id)
            return entry.metadata(), entry.version
        return None

    def _start_fetch(self, ledger_id: LedgerId) -> _Fetch:
        """One registry read per ledger at a time; concurrent misses share it."""
        fetch = _Fetch(asyncio.ensure_future(self.get_ledger_metadata(ledger_id)), self.epoch)
        self._fetches[ledger_id] = fetch
        fetch.task.add_done_callback(lambda _: self._fetched(ledger_id, fetch))
        return fetch

    def _fetched(self, ledger_id: LedgerId, fetch: _Fetch) -> None:
        if self._fetches.get(ledger_id) is fetch:
            del self._fetches[ledger_id]
        if fetch.task.cancelled():
            return
        error = fetch.task.exception()  # retrieved here too: a background check has no reader to raise to
        if error is not None:
            if isinstance(error, NotFound):
                self._entries.pop(ledger_id, None)
            return
        metadata, version = fetch.task.result()
        if fetch.discard or fetch.deleted_at > version:
            return  # forgotten or deleted while it was read: keep nothing
        self._store(ledger_id, metadata, version, fetch.epoch)

    def _store(self, ledger_id: LedgerId, metadata: common_pb2.LedgerMetadata, version: int, epoch: int) -> None:
        entry = self._entries.get(ledger_id)
        if entry is not None and entry.version >= version:
            if entry.version == version:
                entry.epoch = max(entry.epoch, epoch)  # the same record, confirmed later
            return
        self._entries[ledger_id] = _Entry.of(metadata, version, epoch)
        self._entries.move_to_end(ledger_id)
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)
            self.evictions += 1

    # -- the registry's calls, through the cache ----------------------------------

    async def get_ledger_metadata(self, ledger_id: LedgerId) -> tuple[common_pb2.LedgerMetadata, int]:
        """The registry's record, read now (the update loop's re-read after a
        conflict, the auditor's checks); a cached entry learns it."""
        try:
            metadata, version = await self._source.get_ledger_metadata(ledger_id)
        except NotFound:
            self.forget(ledger_id)
            raise
        self.learned(ledger_id, metadata, version)
        return metadata, version

    async def update_ledger_metadata(
        self, ledger_id: LedgerId, metadata: common_pb2.LedgerMetadata, expected_version: int
    ) -> int:
        """Compare-and-swap in the registry: a cached entry learns the new
        record, or is dropped on a conflict (ABORTED) or NOT_FOUND."""
        try:
            version = await self._source.update_ledger_metadata(ledger_id, metadata, expected_version)
        except (Aborted, NotFound):
            self.forget(ledger_id)
            raise
        stored = common_pb2.LedgerMetadata()
        stored.CopyFrom(metadata)  # the caller keeps its own object
        stored.ledger_id.CopyFrom(ledger_id_to_proto(ledger_id))  # as the registry stores it
        self.learned(ledger_id, stored, version)
        return version

    async def delete_ledger_metadata(self, ledger_id: LedgerId) -> None:
        try:
            await self._source.delete_ledger_metadata(ledger_id)
        finally:  # whatever the outcome (a failed call may still have deleted it)
            self.forget(ledger_id)

    # -- what this gateway read or wrote itself ------------------------------------

    def learned(self, ledger_id: LedgerId, metadata: common_pb2.LedgerMetadata, version: int) -> None:
        """A record this gateway read or wrote through the registry. Applied
        only to a cached ledger and only when newer: storing a ledger that is
        not cached could put back a version the watch has already replaced."""
        entry = self._entries.get(ledger_id)
        if entry is None or version <= entry.version:
            return
        # A version after the epoch's start is covered by this epoch's watch; an
        # older one may predate a gap, so it keeps the entry's epoch.
        epoch = self.epoch if version > self._epoch_start else entry.epoch
        self._entries[ledger_id] = _Entry.of(metadata, version, epoch)

    def forget(self, ledger_id: LedgerId) -> None:
        """Drop what is known of a ledger (deleted, not found, or a
        compare-and-swap found another version than ours); a fetch in flight
        keeps nothing either."""
        self._entries.pop(ledger_id, None)
        fetch = self._fetches.get(ledger_id)
        if fetch is not None:
            fetch.discard = True

    # -- the watch ---------------------------------------------------------------

    def apply(self, change: MetadataChange) -> None:
        """Apply one message of the watch stream."""
        kind = change.kind
        if kind is ChangeKind.STARTED or kind is ChangeKind.RESET:
            if kind is ChangeKind.RESET or self._requested == 0:
                self._new_epoch(change.revision, reset=kind is ChangeKind.RESET)
            self.connected = True
            self.revision = change.revision
            return
        self.revision = max(self.revision, change.revision)
        if kind is ChangeKind.PROGRESS or change.ledger_id is None:
            return
        for follower in self._followers:
            follower(change)
        ledger_id = change.ledger_id
        if kind is ChangeKind.PUT and change.metadata is not None:
            entry = self._entries.get(ledger_id)
            if entry is not None:
                if change.revision > entry.version:
                    self._entries[ledger_id] = _Entry.of(change.metadata, change.revision, self.epoch)
            elif ledger_id in self._fetches:
                self._store(ledger_id, change.metadata, change.revision, self.epoch)
            return
        # DELETED, or a record that no longer parses: forget it.
        entry = self._entries.get(ledger_id)
        if entry is not None and change.revision > entry.version:
            del self._entries[ledger_id]
        fetch = self._fetches.get(ledger_id)
        if fetch is not None:
            fetch.deleted_at = max(fetch.deleted_at, change.revision)

    def _new_epoch(self, revision: int, *, reset: bool) -> None:
        """Changes before `revision` may have been missed: open ledgers'
        entries go; closed ones stay, to be checked on their next use."""
        self.epoch += 1
        self._epoch_start = revision
        if reset:
            self.resets += 1
        dropped = [ledger_id for ledger_id, entry in self._entries.items() if not entry.closed]
        for ledger_id in dropped:
            del self._entries[ledger_id]
        if reset:
            log.warning(
                "ledger metadata watch reset at revision %d (history compacted): %d open ledgers' entries "
                "dropped, %d closed ones kept",
                revision,
                len(dropped),
                len(self._entries),
            )

    def disconnected(self) -> None:
        """The stream broke: open ledgers' entries are not trusted until it is back."""
        self.connected = False

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._follow(), name="ledger-metadata-watch")

    async def close(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None
        for fetch in list(self._fetches.values()):
            fetch.task.cancel()

    async def _follow(self) -> None:
        """Follow the watch for ever: resume where the last stream ended,
        reconnect with a backoff when it breaks or falls silent."""
        pauses = _RECONNECT.pauses()
        while True:
            self._requested = self.revision + 1 if self.revision else 0
            stream = self._source.watch_ledger_metadata(self._requested, self._heartbeat)
            try:
                while True:
                    # A timer on this task, not wait_for's new task per message.
                    async with asyncio.timeout(self._silence):
                        change = await anext(stream)
                    if not self.connected:
                        log.info("ledger metadata watch %s at revision %d", change.kind.value, change.revision)
                    self.apply(change)
                    pauses = _RECONNECT.pauses()
            except asyncio.CancelledError:
                raise
            except StopAsyncIteration:
                reason = "the registry ended it"
            except TimeoutError:
                reason = f"nothing heard for {self._silence:.0f}s"
            except Exception as exc:  # the registry went away, or is restarting
                reason = str(exc)
            finally:
                self.disconnected()
                await stream.aclose()
            pause = next(pauses)
            log.warning(
                "ledger metadata watch broke (%s); metadata of open ledgers is read from the registry "
                "until it is back; retrying in %.1fs",
                reason,
                pause,
            )
            await asyncio.sleep(pause)

    # -- reporting ---------------------------------------------------------------

    def stats(self) -> dict[str, int]:
        return {
            "hits": self.hits,
            "misses": self.misses,
            "ledgers": len(self._entries),
            "watch_connected": int(self.connected),
            "watch_resets": self.resets,
            "evictions": self.evictions,
        }

    def status(self) -> dict[str, Any]:
        """For the admin /status."""
        return {
            **self.stats(),
            "capacity": self.capacity,
            "watch_connected": self.connected,
            "watch_revision": self.revision,
        }
