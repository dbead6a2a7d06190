"""A gateway's reads of ledgers: confirmed reads up to the LAC readers know
(OUT_OF_RANGE past it), unconfirmed reads past it (BP-5), single-entry reads,
tails that follow the LAC, and the readers' LAC itself: a closed ledger's end,
the writer's LAC when the ledger is written here, else the bookies' (with
coverage), remembered per ledger, or the owner's when it is written on
another gateway (read-your-writes). Entries come from the entry cache first,
then from the replicas. Domain code: no grpc here."""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import aclosing

from quire_api.backoff import Backoff
from quire_api.errors import InvalidArgument, OutOfRange, QuireError, Reason
from quire_api.ids import LedgerId
from quire_gateway import metrics
from quire_gateway.cluster_calls import ClusterCalls
from quire_gateway.metadata_store import LedgerMetadataStore
from quire_gateway.ownership.lease import GatewayLease
from quire_gateway.read.bookie_lac import read_last_add_confirmed
from quire_gateway.read.entry_cache import EntryCache, incarnation
from quire_gateway.read.replicas import CHUNK_ENTRIES, EntryReader, ReadEntry, ReadSettings
from quire_gateway.repairs import mark_for_repair
from quire_proto.common.v1 import common_pb2

log = logging.getLogger(__name__)


def check_range(first: int, last: int, *, confirmed: bool) -> None:
    """The parameter rules of ReadEntries and ReadUnconfirmedEntries; last =
    -1 means "up to the LAC", which only a confirmed read can ask for."""
    if first < 0:
        raise InvalidArgument(f"first_entry_id {first} is negative")
    if last == -1:
        if not confirmed:
            raise InvalidArgument("an unconfirmed read needs an explicit last_entry_id")
        return
    if last < -1:
        raise InvalidArgument(f"last_entry_id {last} is invalid (use -1 for 'up to the LAC')")
    if first > last:
        raise InvalidArgument(f"first_entry_id {first} is after last_entry_id {last}")


def confirmed_by_ack(acknowledged: int, lac: int) -> int:
    """The highest entry an acknowledgement shows confirmed: entries are
    acknowledged in order, each once the ack quorum holds it and every
    entry before it, so the acknowledged entry itself is confirmed even
    when the LAC the acknowledgement carries trails it."""
    return max(acknowledged, lac)


READER_LACS_KEPT = 100_000
# A confirmed read past the LAC this gateway remembers asks the bookies again
# when what it remembers is older than this: with several gateways the writer
# is usually elsewhere, and a client that appends through one connection and
# reads through another expects to see its entries. Younger, the answer stands
# (OUT_OF_RANGE at once), so a reader polling past the end costs no bookie calls.
READER_LAC_MAX_AGE_SECONDS = 1.0


# The LAC of the ledger's write handle on this gateway, or None when it is not written here.
WriterLac = Callable[[LedgerId], int | None]


class LedgerReads:
    def __init__(
        self,
        remote: ClusterCalls,
        metadata_store: LedgerMetadataStore,  # the metadata cache, or the registry each time
        writer_lac: WriterLac,
        read_settings: ReadSettings,
        bookie_timeout_seconds: float,
        entry_cache: EntryCache | None = None,
        lease: GatewayLease | None = None,
        owners_lac: Callable[[common_pb2.LedgerOwner, LedgerId], Awaitable[int]] | None = None,
    ) -> None:
        self.remote = remote
        self.metadata_store = metadata_store
        self._writer_lac = writer_lac
        self.read_settings = read_settings
        self._bookie_timeout_seconds = bookie_timeout_seconds
        # Recently confirmed entries: reads of fresh entries need no bookie. None: off.
        self.entry_cache = entry_cache
        # This gateway's registry lease: whether another gateway owns a ledger.
        self.lease = lease
        # Asks the gateway that writes a ledger for its LAC (the gateway mesh); None: never asked.
        self.owners_lac = owners_lac
        # LACs readers learned from the bookies, per ledger not written here (LRU-bounded).
        # (LAC, when it was read from the bookies), by ledger and incarnation.
        self._reader_lacs: OrderedDict[tuple[LedgerId, int], tuple[int, float]] = OrderedDict()
        self._background: set[asyncio.Task[None]] = set()

    async def last_add_confirmed(
        self,
        ledger_id: LedgerId,
        metadata: common_pb2.LedgerMetadata | None = None,
        *,
        refresh: bool = True,
        max_age_seconds: float | None = None,
    ) -> int:
        """The LAC readers get: a closed ledger's last entry; the write
        handle's LAC if this gateway writes the ledger; otherwise the LAC read
        from the bookies (coverage rule), remembered as the readers' LAC.
        Without `refresh` the remembered value is used as it stands (the
        bookies are asked only if there is none yet, or it is older than
        `max_age_seconds`), so a confirmed read is bounded by what readers
        last learned, as a BookKeeper reader is."""
        if metadata is None:
            metadata, _ = await self.metadata_store.recent_ledger_metadata(ledger_id)
        at_hand = (
            self._settled_lac(ledger_id, metadata)
            if refresh
            else self._lac_at_hand(ledger_id, metadata, max_age_seconds)
        )
        if at_hand is not None:
            return at_hand
        lac = await read_last_add_confirmed(self.remote, ledger_id, metadata, self._bookie_timeout_seconds)
        # Keyed by creation time too: a ledger deleted and created again under the same id starts afresh.
        return self._learn_lac((ledger_id, incarnation(metadata)), lac)

    def _lac_at_hand(
        self, ledger_id: LedgerId, metadata: common_pb2.LedgerMetadata, max_age_seconds: float | None = None
    ) -> int | None:
        """The LAC last_add_confirmed answers without refresh, when it need not
        ask the bookies: a settled one, or what readers last learned if no
        older than `max_age_seconds`; None when the bookies must be asked."""
        settled = self._settled_lac(ledger_id, metadata)
        if settled is not None:
            return settled
        key = (ledger_id, incarnation(metadata))
        known = self._reader_lacs.get(key)
        if known is not None and (max_age_seconds is None or time.monotonic() - known[1] <= max_age_seconds):
            self._reader_lacs.move_to_end(key)
            return known[0]
        return None

    def _learn_lac(self, key: tuple[LedgerId, int], lac: int) -> int:
        """Remember `lac` as the readers' LAC of a ledger's incarnation (a LAC
        never moves back); returns the LAC now known."""
        known = self._reader_lacs.get(key)
        lac = max(lac, known[0] if known is not None else -1)
        self._reader_lacs[key] = (lac, time.monotonic())
        self._reader_lacs.move_to_end(key)
        while len(self._reader_lacs) > READER_LACS_KEPT:
            self._reader_lacs.popitem(last=False)
        return lac

    async def relayed_acks(self, ledger_id: LedgerId) -> Callable[[int, int], None]:
        """For a write relayed to the ledger's owner: what to call with the
        last entry id and the LAC of each acknowledgement relayed back, so
        that a confirmed read here sees every entry this gateway has
        acknowledged (read-your-writes)."""
        if not self.read_settings.read_your_writes:
            return lambda acknowledged, lac: None
        metadata, _ = await self.metadata_store.recent_ledger_metadata(ledger_id)
        key = (ledger_id, incarnation(metadata))

        def learned(acknowledged: int, lac: int) -> None:
            confirmed = confirmed_by_ack(acknowledged, lac)
            if confirmed >= 0:
                self._learn_lac(key, confirmed)

        return learned

    async def _owners_lac(self, ledger_id: LedgerId, metadata: common_pb2.LedgerMetadata, lac: int) -> int:
        """The LAC of an open ledger written by another gateway, from that
        gateway (one hop, as writes are relayed): what it acknowledged may not
        be on the bookies' headers yet. Only `lac` when there is no other owner
        to ask or it does not answer within owner_lac_timeout_seconds."""
        owner = metadata.owner
        if self.owners_lac is None or not self.read_settings.read_your_writes or not owner.gateway:
            return lac
        if self.lease is None or self.lease.is_me(owner) or self.lease.is_a_previous_process(owner):
            return lac  # nobody else to ask: written here, or by a previous process of this name
        deadline = self.read_settings.owner_lac_timeout_seconds
        try:
            owners = await asyncio.wait_for(self.owners_lac(owner, ledger_id), deadline)
        except (QuireError, TimeoutError) as exc:  # the bookies' LAC stands: a reader elsewhere may lag the writer
            why = exc if isinstance(exc, QuireError) else f"no answer within {deadline} s"
            log.info("ledger %s: its owner %s did not say its LAC: %s", ledger_id, owner.gateway, why)
            return lac
        return self._learn_lac((ledger_id, incarnation(metadata)), owners)

    async def read(
        self, ledger_id: LedgerId, first: int, last: int, *, confirmed: bool
    ) -> AsyncGenerator[list[ReadEntry], None]:
        """Entries first..last. Parameters are checked first (INVALID_ARGUMENT),
        then, for confirmed reads, the LAC as readers know it (beyond it:
        OUT_OF_RANGE; last = -1 means up to it). A read that reaches past the
        LAC this gateway knows first asks the registry whether the ledger was
        closed, and the bookies for its LAC when what this gateway remembers
        is older than READER_LAC_MAX_AGE_SECONDS. OpenLedger, ReadLastAddConfirmed and tails
        refresh that LAC. Unconfirmed reads (BP-5) go past the LAC, fail
        NOT_FOUND where no replica has an entry, and never move the LAC."""
        check_range(first, last, confirmed=confirmed)
        if confirmed and first == last:  # one entry, the common read of a blob or a random reader
            at_hand = self.entry_at_hand(ledger_id, first)
            if at_hand is not None:
                yield [at_hand]
                return
        metadata, _ = await self.metadata_store.recent_ledger_metadata(ledger_id)
        if confirmed:
            metadata, lac = await self._confirmed_lac(ledger_id, metadata, first, last)
            if last == -1:
                if first == lac + 1:
                    return  # nothing confirmed at or past `first` yet
                last = lac
            confirmed_up_to = lac
        else:
            confirmed_up_to = self._known_lac(ledger_id, metadata)
        async for chunk in self._read_replicas(ledger_id, metadata, first, last, confirmed_up_to):
            yield chunk

    async def _confirmed_lac(
        self, ledger_id: LedgerId, metadata: common_pb2.LedgerMetadata, first: int, last: int
    ) -> tuple[common_pb2.LedgerMetadata, int]:
        """The metadata and LAC a confirmed read of first..last (last -1: up
        to the LAC) goes by, once the registry, the bookies and the owner
        have been asked as `read` says; OUT_OF_RANGE when the range reaches
        past that LAC (a read from LAC+1 up to it is not past it: it is empty)."""
        lac = await self.last_add_confirmed(ledger_id, metadata, refresh=False)
        if (last == -1 or last > lac) and metadata.state != common_pb2.LEDGER_STATE_CLOSED:
            # Past what this gateway knows: the ledger may have been closed through another
            # gateway since its metadata cache last heard (the registry has the exact end),
            # or grown there (the bookies know, once what is remembered is not fresh).
            metadata, _ = await self.metadata_store.get_ledger_metadata(ledger_id)
            lac = await self.last_add_confirmed(
                ledger_id, metadata, refresh=False, max_age_seconds=READER_LAC_MAX_AGE_SECONDS
            )
            if (last == -1 or last > lac) and metadata.state != common_pb2.LEDGER_STATE_CLOSED:
                lac = await self._owners_lac(ledger_id, metadata, lac)
        if last == -1 and first == lac + 1:
            return metadata, lac
        if max(first, last) > lac:
            raise OutOfRange(
                f"ledger {ledger_id}: entry {max(first, last)} is beyond the last-add-confirmed {lac}",
                Reason.READ_BEYOND_LAC,
                last_add_confirmed=str(lac),
            )
        return metadata, lac

    async def read_entry(self, ledger_id: LedgerId, entry_id: int) -> ReadEntry:
        """One confirmed entry, by every rule of read() with first = last =
        entry_id (the LAC, OUT_OF_RANGE past it, the registry and bookies
        asked as there, digests, the entry cache). An entry in the cache is
        answered from it directly: the common case of a blob or random read
        costs no reader and no stream of chunks."""
        if entry_id < 0:
            raise InvalidArgument(f"entry_id {entry_id} is negative")
        metadata, _ = await self.metadata_store.recent_ledger_metadata(ledger_id)
        metadata, lac = await self._confirmed_lac(ledger_id, metadata, entry_id, entry_id)
        cache = self.entry_cache if self.read_settings.verify_digests else None
        if cache is not None and cache.enabled:
            cached = cache.get(ledger_id, incarnation(metadata), entry_id)
            if cached is not None:
                return ReadEntry(entry_id, cached.payload, cached.length)
        async with aclosing(self._read_replicas(ledger_id, metadata, entry_id, entry_id, lac)) as chunks:
            async for chunk in chunks:
                if chunk:
                    return chunk[0]
        raise AssertionError("unreachable")  # a read of one entry at or below the LAC yields it or raises

    def entry_at_hand(self, ledger_id: LedgerId, entry_id: int) -> ReadEntry | None:
        """What read_entry answers, when it needs no wait to answer it: the
        ledger's metadata trusted in the metadata cache, the entry at or
        below a LAC known here (`_lac_at_hand`, read_entry's first step) and
        in the entry cache. None when read_entry must ask someone."""
        cache = self.entry_cache if self.read_settings.verify_digests else None
        if cache is None or not cache.enabled or entry_id < 0:
            return None
        cached_metadata = self.metadata_store.cached_ledger_metadata(ledger_id)
        if cached_metadata is None:
            return None
        metadata = cached_metadata[0]
        lac = self._lac_at_hand(ledger_id, metadata)
        if lac is None or entry_id > lac:
            return None
        # Only a hit is counted here: a miss is read_entry's to count, once.
        cached = cache.get(ledger_id, incarnation(metadata), entry_id, count_miss=False)
        return None if cached is None else ReadEntry(entry_id, cached.payload, cached.length)

    async def tail(self, ledger_id: LedgerId, first: int) -> AsyncIterator[list[ReadEntry]]:
        """Confirmed entries from `first` on, as the LAC advances; ends once
        the ledger is closed and its last entry delivered. The LAC comes from
        the bookies, except once: the first time the tail catches up with an
        open ledger written elsewhere it asks the owner (read-your-writes)."""
        check_range(first, -1, confirmed=True)
        next_entry = first
        owner_asked = False
        while True:
            metadata, _ = await self.metadata_store.recent_ledger_metadata(ledger_id)
            lac = await self.last_add_confirmed(ledger_id, metadata)
            if next_entry > lac and not owner_asked and metadata.state != common_pb2.LEDGER_STATE_CLOSED:
                # Caught up with what the bookies say: once, ask the owner, so that every entry
                # acknowledged before this tail started is delivered without waiting for the next.
                owner_asked = True
                lac = await self._owners_lac(ledger_id, metadata, lac)
            if next_entry <= lac:
                async for chunk in self._read_replicas(ledger_id, metadata, next_entry, lac, lac):
                    yield chunk
                next_entry = lac + 1
                continue
            if metadata.state == common_pb2.LEDGER_STATE_CLOSED:
                return
            await self.wait_for_lac(ledger_id, next_entry - 1)

    def _settled_lac(self, ledger_id: LedgerId, metadata: common_pb2.LedgerMetadata) -> int | None:
        """The LAC when this gateway knows it for sure: a closed ledger's last
        entry, or its own write handle's LAC (the writer knows best); else None."""
        if metadata.state == common_pb2.LEDGER_STATE_CLOSED:
            return metadata.last_entry_id
        return self._writer_lac(ledger_id)

    def _known_lac(self, ledger_id: LedgerId, metadata: common_pb2.LedgerMetadata) -> int:
        """The highest entry known to be confirmed, without asking anyone:
        what may go into the entry cache from an unconfirmed read."""
        settled = self._settled_lac(ledger_id, metadata)
        if settled is not None:
            return settled
        known = self._reader_lacs.get((ledger_id, incarnation(metadata)))
        return known[0] if known is not None else -1

    async def _read_replicas(
        self,
        ledger_id: LedgerId,
        metadata: common_pb2.LedgerMetadata,
        first: int,
        last: int,
        confirmed_up_to: int,
    ) -> AsyncGenerator[list[ReadEntry], None]:
        """Entries first..last in order: runs found in the entry cache as they
        are, the runs between them from the bookies. Entries read from the
        bookies at or below `confirmed_up_to` are kept in the cache."""
        reader: EntryReader | None = None  # made on the first miss: a read served from the cache needs none
        # Digests unchecked (a test-only positive control): nothing read may be cached.
        cache = self.entry_cache if self.read_settings.verify_digests else None
        life = incarnation(metadata)
        try:
            if cache is None or not cache.enabled:
                reader = self._reader(ledger_id, metadata)
                async for chunk in reader.read(first, last):
                    yield chunk
                return
            next_id = first
            while next_id <= last:
                hits = cache.run(ledger_id, life, next_id, min(last, next_id + CHUNK_ENTRIES - 1))
                if hits:
                    yield [ReadEntry(entry_id, cached.payload, cached.length) for entry_id, cached in hits]
                    next_id = hits[-1][0] + 1
                    continue
                miss_end = next_id
                while (
                    miss_end < last
                    and miss_end - next_id < CHUNK_ENTRIES - 1
                    and not cache.contains(ledger_id, life, miss_end + 1)
                ):
                    miss_end += 1
                reader = reader or self._reader(ledger_id, metadata)
                async for chunk in reader.read(next_id, miss_end):
                    for entry in chunk:
                        if entry.entry_id <= confirmed_up_to:
                            cache.put(ledger_id, life, entry.entry_id, entry.payload, entry.length)
                    yield chunk
                next_id = miss_end + 1
        finally:
            if reader is not None:
                reader.finish()

    def _reader(self, ledger_id: LedgerId, metadata: common_pb2.LedgerMetadata) -> EntryReader:
        return EntryReader(
            self.remote,
            ledger_id,
            metadata,
            self.read_settings,
            flag_damaged=functools.partial(self._flag_damaged, ledger_id),
        )

    def _flag_damaged(self, ledger_id: LedgerId, damaged: dict[str, tuple[int, int]]) -> None:
        """Copies a read found damaged are marked in the ledger's metadata, in
        the background, for the auditor to repair (once the ledger is closed)."""
        task = asyncio.create_task(self._mark_for_repair(ledger_id, damaged))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _mark_for_repair(self, ledger_id: LedgerId, damaged: dict[str, tuple[int, int]]) -> None:
        try:
            changed = await mark_for_repair(self.metadata_store, ledger_id, damaged)
        except QuireError as exc:
            log.warning("ledger %s: flagging damaged copies %s failed: %s", ledger_id, damaged, exc)
            return
        if changed:
            metrics.repair_flags.add(changed)
            log.warning("ledger %s: damaged copies flagged for repair: %s", ledger_id, damaged)

    async def wait_for_lac(self, ledger_id: LedgerId, known_lac: int) -> None:
        """Return once the LAC may have moved past `known_lac` (or the ledger
        closed), or after a while anyway. Today a poll of the bookies with a
        short backoff; a bookie-side long-poll replaces this one method."""
        polls = Backoff(first_seconds=0.01, longest_seconds=0.2, within_seconds=self.read_settings.tail_wait_seconds)
        for pause in polls.pauses():
            await asyncio.sleep(pause)
            metadata, _ = await self.metadata_store.recent_ledger_metadata(ledger_id)
            if metadata.state == common_pb2.LEDGER_STATE_CLOSED:
                return
            if await self.last_add_confirmed(ledger_id, metadata) > known_lac:
                return

    async def finish(self) -> None:
        """Let repair flags still being recorded finish (a few seconds at most)."""
        if self._background:
            await asyncio.wait(self._background, timeout=5)
