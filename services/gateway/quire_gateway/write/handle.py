"""The write handle: one open ledger being written through this gateway.

Entry e goes to the ensemble members (e + i) mod E for i in 0..W-1 (docs/architecture.md,
"An append, step by step"). An entry completes when A of its write set have it durably AND
every earlier entry has completed; the LAC then moves to it. Each entry is
packed (format V2, the ledger's digest) with the LAC as it stood when packed.
Each submit's entries are handed to the gateway's one AddStream per bookie
(bookie_streams.py) as one add per bookie, with a callback: the stream owns
the batching and flow control (everything waiting for a bookie, from every
ledger, leaves in one message) and the handle counts the answers, with no
task or future per add.

In-flight bytes are bounded: `submit` waits for room, so a slow bookie slows
its writers instead of growing memory without bound.

Ensemble change (its rules in ensemble_change.py): a bookie that stays
unreachable (or times out, or turns read-only) is replaced. Placement picks a bookie outside the ensemble, a new
ensemble starting at LAC+1 is recorded in the metadata by compare-and-swap,
and the pending entries the failed bookie should have stored are resent to
its replacement; the writer carries on. With `delay_ensemble_change` (off by
default, as in BookKeeper) a failed bookie is instead left out while every
write set keeps A live members: entries go to the others, the ledger is marked
under-replicated in its metadata (custom key `quire.under-replicated/<bookie>`
= the first entry the bookie may lack; the auditor repairs it once the ledger
is closed), and the ensemble changes only when a further failure would leave
some write set short of A; then every failed bookie is replaced at once.
Whatever the setting, a failed bookie that no bookie can replace now is left
out the same way when the write sets can spare it, rather than the ledger
failed (docs/decisions.md).
A fence (FAILED_PRECONDITION
LEDGER_FENCED from a bookie, or metadata IN_RECOVERY) fails the handle
instead: the ledger belongs to a recovery now.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from dataclasses import dataclass
from typing import Any

from opentelemetry.trace import Span, SpanContext, Status, StatusCode

from quire_api.backoff import Backoff
from quire_api.errors import (
    DeadlineExceeded,
    FailedPrecondition,
    QuireError,
    Reason,
    ResourceExhausted,
    Unavailable,
)
from quire_api.ids import LedgerId
from quire_api.limits import MAX_ENTRY_PAYLOAD_BYTES
from quire_api.replication import add_marker
from quire_common.entry import V2_HEADER_SIZE, pack_entry
from quire_common.ledger_secrets import ledger_digester, ledger_master_key
from quire_common.telemetry import current_span_context, start_batch_span, tracer, tracing_enabled
from quire_gateway import metrics
from quire_gateway.cluster_calls import ClusterCalls
from quire_gateway.metadata_store import MetadataStore
from quire_gateway.metadata_updates import update_metadata
from quire_gateway.quorum_rules import write_set
from quire_gateway.read.entry_cache import EntryCache, incarnation
from quire_gateway.write.bookie_streams import AddSender, add_fields
from quire_gateway.write.ensemble_change import (
    can_leave_out,
    reassign,
    record_new_ensemble,
    replaceable,
    with_replacements,
)
from quire_gateway.write.explicit_lac import ExplicitLacs
from quire_gateway.write.quarantine import Quarantine, choose_avoiding
from quire_proto.common.v1 import common_pb2

__all__ = ["WriteHandle", "WriteSettings", "write_set"]

log = logging.getLogger(__name__)
_tracer = tracer(__name__)

# Why a handle may fail when its ledger was ended by someone else.
_ENDED_ELSEWHERE = frozenset(
    {Reason.LEDGER_CLOSED, Reason.LEDGER_FENCED, Reason.LEDGER_NOT_FOUND, Reason.LEDGER_OWNER_GONE}
)


# Between attempts to record a ledger's end that the metadata store missed (a writer that
# failed, a close the store did not answer): no bound, until it is closed here or elsewhere.
_CLOSE_AGAIN_BACKOFF = Backoff(first_seconds=0.5, longest_seconds=5.0)


# What an entry in flight holds besides its packed bytes, counted against
# max_inflight_bytes with them: its pending record, future and ack set, its place in
# the adds to its bookies, the caller's payload object. Measured: with every bookie
# paused and 8-byte entries streamed until the bound held, the gateway grew by about
# 570 bytes per entry in flight, 69 of them packed (docs/decisions.md, "What an entry in
# flight counts").
ENTRY_BOOKKEEPING_BYTES = 512


@dataclass(slots=True)
class _Pending:
    entry_id: int
    payload: bytes  # the caller's bytes (no copy): what the entry cache keeps once confirmed
    packed: bytes  # kept until confirmed: an ensemble change resends it
    length: int  # the ledger's cumulative length including this entry
    write_set: list[str]
    future: asyncio.Future[int]
    acks: set[str]
    submitted_at: float  # time.perf_counter, taken once for all the entries of one submit
    origin: SpanContext | None  # the span of the request that added it (tracing only)


@dataclass(frozen=True)
class WriteSettings:
    max_inflight_bytes: int = 64 * 1024 * 1024
    # Bytes of adds allowed to wait for room beyond max_inflight_bytes; past it
    # an add is refused at once (RESOURCE_EXHAUSTED, OVERLOADED, retryable).
    # 0: no cap, writers wait as long as it takes (back-pressure only).
    max_waiting_bytes: int = 0
    # Entries an AppendEntries session takes and has not answered before it stops reading
    # its client's messages (session.py).
    session_window_entries: int = 65_536
    # The default is also the most allowed: larger entries would not fit a default client's reply.
    max_entry_bytes: int = MAX_ENTRY_PAYLOAD_BYTES
    # How long an unreachable bookie is retried before it is replaced.
    bookie_retry_seconds: float = 2.0
    # Deadline of one add to a bookie; past it the bookie counts as failed.
    add_timeout_seconds: float = 5.0
    # The largest add to a bookie; a bigger append is split. Batching across
    # adds and ledgers is the bookie's AddStream's (bookie_streams.py).
    max_call_bytes: int = 4 * 1024 * 1024
    # Keep writing without a failed bookie while every write set still has A live members.
    delay_ensemble_change: bool = False
    # How long a replaced bookie is avoided by this gateway's new ensembles and replacements.
    bookie_quarantine_seconds: float = 300.0
    # Mark, at an ensemble change, the confirmed entries the replaced bookie never
    # acknowledged, so the auditor copies them back (off only as a fault-suite control).
    mark_replaced_copies: bool = True
    # After this long without a new entry, a LAC that no stored entry carries
    # yet is written to the ensemble's bookies, so that readers and tails on
    # other gateways see the last entries of a burst (0: never).
    explicit_lac_seconds: float = 0.1
    # How long a metadata change of the writer (an ensemble change, a bookie
    # left out) is tried again while the metadata store is out of reach (None:
    # until it is answered, or the handle is closed; a bound only as a control).
    metadata_retry_seconds: float | None = None


class WriteHandle:
    def __init__(
        self,
        remote: ClusterCalls,
        metadata_store: MetadataStore,  # the ensemble changes' and the close's compare-and-swaps
        ledger_id: LedgerId,
        metadata: common_pb2.LedgerMetadata,
        version: int,
        settings: WriteSettings,
        quarantine: Quarantine | None = None,
        entry_cache: EntryCache | None = None,
        explicit_lacs: ExplicitLacs | None = None,  # shared by the gateway's handles; None: never published
        # Told once the ledger has ended: elsewhere, or closed here after the writer failed.
        on_ended: Callable[[WriteHandle], None] | None = None,
    ) -> None:
        self.remote = remote
        self._on_ended = on_ended
        self.metadata_store = metadata_store
        # Confirmed entries go here for readers (None or a zero-sized cache: kept nowhere).
        self._entry_cache = entry_cache if entry_cache is not None and entry_cache.enabled else None
        self._life = incarnation(metadata)
        self.quarantine = quarantine or Quarantine(0.0)  # shared by the gateway's handles
        self.ledger_id = ledger_id
        self.metadata = metadata
        self.version = version
        self.settings = settings
        self.write_quorum = metadata.write_quorum_size
        self._set_ensemble(list(metadata.ensembles[-1].bookie_ids))
        self.ack_quorum = metadata.ack_quorum_size
        self.digester = ledger_digester(metadata)
        self.master_key = ledger_master_key(metadata)
        self._add_fields = add_fields(ledger_id, self.master_key)  # what every add to a bookie says besides its entries
        self.next_entry_id = 0
        self.last_add_confirmed = -1
        self.length = 0  # cumulative length of every entry submitted
        self.confirmed_length = 0  # cumulative length up to the LAC
        self.closed = False
        self.ensemble_changes = 0
        self._pending: dict[int, _Pending] = {}
        self._inflight_bytes = 0
        self._waiting_bytes = 0  # of adds waiting for room (bounded by max_waiting_bytes)
        self._room = asyncio.Event()  # cleared and waited on by writers waiting for room (_waiting_bytes)
        # close() waiting for the entries in flight (no Event: setting one is a call per entry).
        self._idle_waiters: list[asyncio.Future[None]] = []
        # Cleared while the ensemble changes: no new entries are striped and
        # the LAC stands still, so the new ensemble's first entry (LAC+1) and
        # the entries to resend are one consistent set.
        self._stable = asyncio.Event()
        self._stable.set()
        self._is_stable = True  # what _stable says, read per entry without a call (set by _set_stable)
        self._change_lock = asyncio.Lock()
        self._replaced: set[str] = set()
        # Failed bookies left out without an ensemble change (their marker is in the metadata).
        self._delayed: set[str] = set()
        self._unstored_from: dict[str, int] = {}  # per failed bookie (_first_lacking)
        self._failure: QuireError | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        # The first entry id of each add not answered yet, with the bookies it waits for (one
        # element per add sent there): kept per add rather than per bookie, since it is
        # written for every add and read only when a bookie fails (_lowest_unstored).
        self._unanswered_firsts: dict[int, list[str]] = {}
        # The highest LAC the bookies can report: carried in an entry's header, or written explicitly.
        self._lac_published = -1
        self._submits = 0  # submit() calls so far: an explicit LAC waits for a pause in them
        self._traced = tracing_enabled()
        self._explicit_lacs = explicit_lacs
        self._recording_end = False  # a task is recording the end (_keep_closing)
        # The running loop, asked for once: asking makes a system call (getpid) in this Python.
        self._loop: asyncio.AbstractEventLoop | None = None
        # Per bookie, its AddStream's send (cluster_calls.add_sender), looked up once.
        self._senders: dict[str, AddSender] = {}

    def _set_stable(self, stable: bool) -> None:
        """Stop (False) or resume striping entries and moving the LAC, around an ensemble change."""
        self._is_stable = stable
        if stable:
            self._stable.set()
        else:
            self._stable.clear()

    def _set_ensemble(self, ensemble: list[str]) -> None:
        self.ensemble = ensemble
        # Write sets repeat every E entries: compute them once per ensemble, not per entry.
        self._stripes = [write_set(i, ensemble, self.write_quorum) for i in range(len(ensemble))]

    @property
    def failed(self) -> bool:
        return self._failure is not None

    def _check_writable(self) -> None:
        if self._failure is not None:
            raise self._failure
        if self.closed:
            raise FailedPrecondition(f"ledger {self.ledger_id} is closed", Reason.LEDGER_CLOSED)

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def submit(self, payloads: list[bytes], expected_entry_id: int | None = None) -> list[asyncio.Future[int]]:
        """Assign ids to `payloads`, send them, and return one future per entry
        that resolves to its id once it is confirmed (or fails). With
        `expected_entry_id` (a conditional append) the first must get that id,
        checked where ids are assigned so no other submit slips in between.
        Waits while the entries in flight leave no room, or the ensemble changes."""
        futures = self.submit_now(payloads, expected_entry_id)
        if futures is not None:
            return futures
        size = self._size(payloads)
        waiting = False
        try:
            while True:
                if not self._is_stable:
                    await self._stable.wait()
                elif self._inflight_bytes and self._inflight_bytes + size > self.settings.max_inflight_bytes:
                    if not waiting:
                        self._check_waiting_room(size)
                        self._waiting_bytes += size
                        waiting = True
                    self._room.clear()
                    await self._room.wait()
                else:
                    break
                self._check_writable()
        finally:
            if waiting:
                self._waiting_bytes -= size
        return self._assign(payloads, expected_entry_id)

    def submit_now(
        self, payloads: list[bytes], expected_entry_id: int | None = None
    ) -> list[asyncio.Future[int]] | None:
        """`submit` when it need not wait (the common case, without a
        coroutine per message); None, with nothing submitted, when it must."""
        if self._failure is not None or self.closed:  # _check_writable's cases, without its call
            self._check_writable()
        size = self._size(payloads)
        if not self._is_stable or (
            self._inflight_bytes and self._inflight_bytes + size > self.settings.max_inflight_bytes
        ):
            return None
        return self._assign(payloads, expected_entry_id)

    def _size(self, payloads: list[bytes]) -> int:
        """The bytes `payloads` will hold in flight; ENTRY_TOO_LARGE for one over the limit."""
        limit = self.settings.max_entry_bytes
        size = 0
        for payload in payloads:
            if len(payload) > limit:
                raise ResourceExhausted(
                    f"entry payload is {len(payload)} bytes; the limit is {limit}", Reason.ENTRY_TOO_LARGE
                )
            size += len(payload) + V2_HEADER_SIZE + ENTRY_BOOKKEEPING_BYTES
        return size

    def _assign(self, payloads: list[bytes], expected_entry_id: int | None) -> list[asyncio.Future[int]]:
        """Give `payloads` their ids and send them, once there is room."""
        if expected_entry_id is not None and expected_entry_id != self.next_entry_id:
            raise FailedPrecondition(
                f"ledger {self.ledger_id}: the next entry id is {self.next_entry_id}, not {expected_entry_id}; "
                "nothing was appended",
                Reason.UNEXPECTED_ENTRY_ID,
                next_entry_id=str(self.next_entry_id),
                last_add_confirmed=str(self.last_add_confirmed),
            )
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        origin = current_span_context() if self._traced else None
        self._submits += 1
        # The newest header carries the LAC as it stands now.
        if self.last_add_confirmed > self._lac_published:
            self._lac_published = self.last_add_confirmed
        futures, staged = self._stage(payloads, loop, origin)
        if len(staged) == 1:  # the common case: one add, shared by the entry's write set
            members = self._stripes[staged[0][0] % len(self._stripes)]
            if self._delayed:
                members = [bookie_id for bookie_id in members if bookie_id not in self._delayed]
            self._send(members, staged)
        elif self.write_quorum == len(self.ensemble) and not self._delayed:
            # W = E: every entry goes to every bookie, so they all share one add, no grouping.
            self._queue(self.ensemble, staged)
        else:
            self._queue_striped(staged)
        return futures

    def _queue_striped(self, staged: list[tuple[int, bytes]]) -> None:
        """Queue entries for the bookies of their stripes (W < E, or bookies
        delayed): each bookie gets its entries in as few adds as
        max_call_bytes allows."""
        stripes = self._stripes
        per_bookie: dict[str, list[tuple[int, bytes]]] = {}
        for entry in staged:
            for bookie_id in stripes[entry[0] % len(stripes)]:
                if bookie_id not in self._delayed:
                    per_bookie.setdefault(bookie_id, []).append(entry)
        # Bookies sent the same entries (W < E puts each where its stripe says) share one add.
        same_entries: dict[tuple[int, ...], list[str]] = {}
        for bookie_id, entries in per_bookie.items():
            same_entries.setdefault(tuple(entry_id for entry_id, _ in entries), []).append(bookie_id)
        for bookie_ids in same_entries.values():
            self._queue(bookie_ids, per_bookie[bookie_ids[0]])

    def _stage(
        self, payloads: list[bytes], loop: asyncio.AbstractEventLoop, origin: SpanContext | None
    ) -> tuple[list[asyncio.Future[int]], list[tuple[int, bytes]]]:
        """Give each payload the next id, pack it and record it as pending;
        returns their futures and their (id, packed bytes). The handle's
        counters are kept in locals and stored once: one message can carry
        hundreds of entries, and nothing in the loop can fail but a bug."""
        ledger_id, lac, digester = self.ledger_id, self.last_add_confirmed, self.digester
        stripes, unconfirmed = self._stripes, self._pending
        stripe_count = len(stripes)
        entry_id, length, packed_bytes = self.next_entry_id, self.length, 0
        submitted_at = time.perf_counter()
        futures: list[asyncio.Future[int]] = []
        staged: list[tuple[int, bytes]] = []
        for payload in payloads:
            length += len(payload)
            packed = pack_entry(ledger_id, entry_id, lac, length, payload, digester)
            future = loop.create_future()
            write_set = stripes[entry_id % stripe_count]
            unconfirmed[entry_id] = _Pending(
                entry_id, payload, packed, length, write_set, future, set(), submitted_at, origin
            )
            futures.append(future)
            staged.append((entry_id, packed))
            packed_bytes += len(packed)
            entry_id += 1
        self.next_entry_id, self.length = entry_id, length
        self._inflight_bytes += packed_bytes + ENTRY_BOOKKEEPING_BYTES * len(payloads)
        return futures, staged

    def _check_waiting_room(self, size: int) -> None:
        """Refuse at once rather than queue past max_waiting_bytes (one write
        may always wait, whatever its size)."""
        cap = self.settings.max_waiting_bytes
        if cap and self._waiting_bytes and self._waiting_bytes + size > cap:
            raise ResourceExhausted(
                f"ledger {self.ledger_id} is overloaded: {self._inflight_bytes} bytes in flight and "
                f"{self._waiting_bytes} waiting (limits {self.settings.max_inflight_bytes} and {cap}); retry later",
                Reason.OVERLOADED,
            )

    def _queue(self, bookie_ids: list[str], entries: list[tuple[int, bytes]]) -> None:
        """Hand `entries` to each bookie's AddStream, in adds of at most
        max_call_bytes; the streams batch them with every other ledger's."""
        batch: list[tuple[int, bytes]] = []
        size = 0
        for entry in entries:
            if batch and size + len(entry[1]) > self.settings.max_call_bytes:
                self._send(bookie_ids, batch)
                batch, size = [], 0
            batch.append(entry)
            size += len(entry[1])
        if batch:
            self._send(bookie_ids, batch)

    def _send(
        self, bookie_ids: list[str], entries: list[tuple[int, bytes]], pauses: Iterator[float] | None = None
    ) -> None:
        """One add to each of `bookie_ids`; each answer comes to `_stored`.
        Until then its first entry counts as possibly unstored there
        (`_lowest_unstored`)."""
        request = self.remote.add_request(self.ledger_id, self.master_key, entries, self._add_fields)
        # One answer callback for the whole write set, unless each bookie's add has a span of its own.
        stored = None if self._traced else functools.partial(self._stored, entries, pauses, None)
        first = entries[0][0]
        timeout_seconds = self.settings.add_timeout_seconds
        if pauses is None and bookie_ids:  # a retry (pauses) still counts as the add it retries
            waiting_for = self._unanswered_firsts.get(first)
            if waiting_for is None:
                self._unanswered_firsts[first] = list(bookie_ids)
            else:  # sent again (to a replacement) before every answer came
                waiting_for += bookie_ids
        for bookie_id in bookie_ids:
            on_done = stored or functools.partial(
                self._stored, entries, pauses, self._bookie_add_span(bookie_id, entries)
            )
            send = self._senders.get(bookie_id)
            if send is None:
                send = self._senders[bookie_id] = self.remote.add_sender(bookie_id)
            try:
                send(request, timeout_seconds, on_done)
            except Exception as exc:  # a bug must not leave the writer waiting forever
                log.exception("sending entries of ledger %s to bookie %s failed", self.ledger_id, bookie_id)
                self._bookie_failed(bookie_id, Unavailable(f"sending to bookie {bookie_id} failed: {exc!r}"))
                self._answered(bookie_id, entries[0][0])

    def _stored(
        self,
        entries: list[tuple[int, bytes]],
        pauses: Iterator[float] | None,
        span: Span | None,
        bookie_id: str,
        error: QuireError | None,
    ) -> None:
        """An add's answer. An unreachable bookie is retried with backoff for
        bookie_retry_seconds, then fails (and is replaced or left out)."""
        if span is not None:
            if error is not None:
                span.set_status(Status(StatusCode.ERROR, str(error)))
            span.end()
        if error is not None:
            if isinstance(error, Unavailable) and self._may_retry(bookie_id):
                pauses = (
                    pauses
                    or Backoff(
                        first_seconds=0.05, longest_seconds=1.0, within_seconds=self.settings.bookie_retry_seconds
                    ).pauses()
                )
                pause = next(pauses, None)
                if pause is not None:
                    self._spawn(self._send_again(bookie_id, entries, pauses, pause))
                    return
            self._bookie_failed(bookie_id, error)  # while this add still counts as unstored there
            self._answered(bookie_id, entries[0][0])
            return
        # _answered, inline: this runs for every answer of every bookie.
        first = entries[0][0]
        waiting_for = self._unanswered_firsts[first]
        waiting_for.remove(bookie_id)
        if not waiting_for:
            del self._unanswered_firsts[first]
        if bookie_id in self.quarantine.until:
            self.quarantine.lift(bookie_id, "it stored entries again")
        quorum = self.ack_quorum
        unconfirmed = self._pending
        reached = False
        for entry_id, _ in entries:
            pending = unconfirmed.get(entry_id)
            # An ack from a bookie replaced meanwhile does not count.
            if pending is not None and bookie_id in pending.write_set:
                acks = pending.acks
                acks.add(bookie_id)
                reached = reached or len(acks) == quorum
        # The LAC can move only when an entry has just reached its quorum (or when the ensemble
        # is stable again, where the change calls _advance): so for one of an entry's W answers.
        if reached:
            self._advance()

    def _may_retry(self, bookie_id: str) -> bool:
        return self._failure is None and bookie_id in self.ensemble and bookie_id not in self._delayed

    async def _send_again(
        self, bookie_id: str, entries: list[tuple[int, bytes]], pauses: Iterator[float], pause: float
    ) -> None:
        await asyncio.sleep(pause)
        if self._may_retry(bookie_id):
            self._send([bookie_id], entries, pauses)
        else:  # replaced, left out or failed meanwhile: nothing more to store there
            self._answered(bookie_id, entries[0][0])

    def _bookie_add_span(self, bookie_id: str, entries: list[tuple[int, bytes]]) -> Span:
        """The span of one add to a bookie, for the requests whose entries it
        carries; only while tracing (even a no-op span costs a share of every
        entry)."""
        return start_batch_span(
            _tracer,
            "quire.gateway.bookie_add",
            [pending.origin for e, _ in entries if (pending := self._pending.get(e)) is not None],
            {"quire.ledger": self.ledger_id.qualified_name, "quire.bookie": bookie_id, "quire.entries": len(entries)},
        )

    def _bookie_failed(self, bookie_id: str, error: QuireError) -> None:
        if self._failure is not None or bookie_id not in self.ensemble or bookie_id in self._delayed:
            return  # already failed, already replaced, or already left out
        if not replaceable(error):
            self._fail(error)
            return
        first = self._lowest_unstored(bookie_id)
        self._unstored_from[bookie_id] = min(first, self._unstored_from.get(bookie_id, first))
        if self.settings.delay_ensemble_change and self._can_leave_out(bookie_id):
            log.warning("ledger %s: bookie %s failed (%s); writing on without it", self.ledger_id, bookie_id, error)
            self._spawn(self._leave_out(bookie_id))
        else:
            log.warning("ledger %s: bookie %s failed (%s); replacing it", self.ledger_id, bookie_id, error)
            self._spawn(self._change_ensemble(bookie_id))

    def _can_leave_out(self, bookie_id: str) -> bool:
        """Whether every write set keeps A members without `bookie_id` and
        the bookies already left out."""
        return can_leave_out(self._stripes, {*self._delayed, bookie_id}, self.ack_quorum)

    def _lowest_unstored(self, bookie_id: str) -> int:
        """The lowest entry sent or queued to `bookie_id` without its ack:
        from there on the bookie may lack entries of its write sets."""
        firsts = [first for first, waiting_for in self._unanswered_firsts.items() if bookie_id in waiting_for]
        return min(firsts, default=self.next_entry_id)

    def _first_lacking(self, failed: str) -> int:
        """The first entry `failed` may lack, over all its failed adds since
        it was last replaced or left out (none: the next entry, so nothing
        confirmed to mark). Each failure starts a change, and the one that
        records the marker may be a later add's, queued behind an earlier
        one's that found no replacement."""
        return self._unstored_from.get(failed, self.next_entry_id)

    def _answered(self, bookie_id: str, first_entry_id: int) -> None:
        waiting_for = self._unanswered_firsts[first_entry_id]
        waiting_for.remove(bookie_id)
        if not waiting_for:
            del self._unanswered_firsts[first_entry_id]

    async def _leave_out(self, failed: str) -> None:
        """Delayed ensemble change: stop sending to `failed` and mark the
        entries it may lack in the metadata, keeping the ensemble."""
        async with self._change_lock:
            if self._failure is not None or failed not in self.ensemble or failed in self._delayed:
                return
            if not self._can_leave_out(failed):  # another bookie was left out meanwhile
                self._spawn(self._change_ensemble(failed))
                return
            self._set_stable(False)
            try:
                first = self._first_lacking(failed)
                await self._update_metadata(lambda updated: add_marker(updated, failed, first, None))
                self._delayed.add(failed)
                self._unstored_from.pop(failed, None)
                self.quarantine.add(failed)
                metrics.delayed_ensemble_changes.add(1)
                log.info("ledger %s: bookie %s left out from entry %d, ensemble kept", self.ledger_id, failed, first)
            except QuireError as exc:
                self._fail(exc)
            finally:
                self._set_stable(True)
        self._advance()

    async def _change_ensemble(self, failed: str) -> None:
        """Replace `failed`, and every bookie left out before it (docs/architecture.md,
        "An append, step by step", step 5): a new ensemble from LAC+1, recorded by compare-and-swap,
        then the pending entries they should have stored are resent to their
        replacements. Entries from the lowest `failed` had not acknowledged
        when any of its adds failed (_unstored_from) up to LAC were confirmed without it:
        they are marked in the same write, for the auditor to copy back to it
        when it returns (or to its replacement in the old segment if it does
        not), so the copies the user asked for are restored."""
        leave_out = choosing = False
        async with self._change_lock:
            if self._failure is not None or failed not in self.ensemble:
                return
            self._set_stable(False)
            gone = [failed, *(b for b in self._delayed if b != failed)]
            try:
                with _tracer.start_as_current_span(
                    "quire.gateway.ensemble_change",
                    attributes={"quire.ledger": self.ledger_id.qualified_name, "quire.bookie": gone},
                ):
                    replacements: dict[str, str] = {}
                    ensemble = list(self.ensemble)
                    choosing = True
                    for bookie in gone:
                        replacements[bookie] = await self._replacement(ensemble, bookie, set(gone))
                        ensemble = with_replacements(ensemble, {bookie: replacements[bookie]})
                    choosing = False
                    self._replaced.update(gone)
                    for bookie in gone:
                        self.quarantine.add(bookie)
                    first_entry_id = self.last_add_confirmed + 1
                    unacked = (failed, self._first_lacking(failed), first_entry_id - 1)
                    await self._record_ensemble(first_entry_id, ensemble, unacked)
                self._set_ensemble(ensemble)
                self._delayed.clear()
                self._unstored_from.pop(failed, None)
                self.ensemble_changes += len(gone)
                metrics.ensemble_changes.add(len(gone))
                resend = reassign(self._pending, replacements, self._stripes)
                for bookie in gone:
                    log.info(
                        "ledger %s: bookie %s replaced by %s from entry %d; resending %d entries",
                        self.ledger_id,
                        bookie,
                        replacements[bookie],
                        first_entry_id,
                        len(resend.get(replacements[bookie], [])),
                    )
                for replacement, entries in resend.items():
                    self._queue([replacement], entries)
            except QuireError as exc:
                # No bookie can take its place now (too few registered, as when a partition between
                # the registry and etcd lets registrations lapse, or placement out of reach), but
                # every write set keeps A live members without it: write on without it, as a
                # delayed ensemble change does, rather than fail the ledger; a later failure tries
                # a replacement again.
                leave_out = choosing and self._can_leave_out(failed)
                if leave_out:
                    log.warning("ledger %s: no bookie can replace %s now (%s); writing on without it",
                                self.ledger_id, failed, exc.message)  # fmt: skip
                else:
                    self._fail(exc)
            finally:
                self._set_stable(True)
        if leave_out:
            await self._leave_out(failed)  # it advances
        else:
            self._advance()

    async def _replacement(self, ensemble: list[str], failed: str, failing: set[str]) -> str:
        """A bookie to take `failed`'s place in `ensemble`, never one of
        `failing` (this change's failed bookies). Bookies replaced earlier in
        this handle, or quarantined by any, are avoided while others are left
        (quarantine.py)."""

        def choose(exclude: list[str]) -> Awaitable[str]:
            return self.remote.replace_bookie(self.metadata, ensemble, failed, exclude)

        avoid = self._replaced | self.quarantine.members()
        return await choose_avoiding(avoid, choose, f"ledger {self.ledger_id}: replacing {failed}", failing)

    async def _record_ensemble(
        self, first_entry_id: int, ensemble: list[str], unacked: tuple[str, int, int] | None = None
    ) -> None:
        """Append the ensemble that writes from `first_entry_id` on, and mark
        `unacked` (bookie, first, last) for repair when that range holds entries."""

        marked = unacked if self.settings.mark_replaced_copies else None
        await self._update_metadata(lambda updated: record_new_ensemble(updated, first_entry_id, ensemble, marked))

    async def _update_metadata(self, change: Callable[[common_pb2.LedgerMetadata], object]) -> None:
        """Apply `change` to the ledger's metadata by compare-and-swap
        (metadata_updates); refused once the ledger is closed or a recovery
        has taken it over."""

        def while_writing(metadata: common_pb2.LedgerMetadata) -> common_pb2.LedgerMetadata:
            if metadata.state == common_pb2.LEDGER_STATE_CLOSED:
                raise FailedPrecondition(f"ledger {self.ledger_id} was closed", Reason.LEDGER_CLOSED)
            if metadata.state == common_pb2.LEDGER_STATE_IN_RECOVERY:
                raise FailedPrecondition(
                    f"ledger {self.ledger_id} is fenced: a recovery has taken it over", Reason.LEDGER_FENCED
                )
            change(metadata)
            return metadata

        # The registry or etcd out of reach (a partition, an election) must not end the writer:
        # the change is tried again until the store answers. No time bound is needed for safety:
        # a recovery elsewhere (once this gateway's session has lapsed) sets IN_RECOVERY or
        # CLOSED first, and the next attempt is refused for it. A close (a client's, or the
        # gateway's on shutdown) gives the change up. An attempt whose answer was lost may have
        # committed; the next one then meets a version conflict, reads the record again and finds
        # the change already there (record_new_ensemble and add_marker change nothing twice).
        pauses = Backoff(
            first_seconds=0.1, longest_seconds=1.0, within_seconds=self.settings.metadata_retry_seconds
        ).pauses()
        while True:
            try:
                known = (self.metadata, self.version)
                result = await update_metadata(self.metadata_store, self.ledger_id, while_writing, known)
                break
            except (Unavailable, DeadlineExceeded) as exc:
                pause = next(pauses, None)
                if pause is None or self._failure is not None or self.closed:
                    raise
                log.info("ledger %s: its metadata change failed (%s); trying again", self.ledger_id, exc.message)
                await asyncio.sleep(pause)
        self.metadata, self.version = result.metadata, result.version

    def _advance(self) -> None:
        """Move the LAC over every consecutive entry that has its ack quorum
        (not while the ensemble changes)."""
        if not self._is_stable:
            return
        unconfirmed = self._pending
        quorum = self.ack_quorum
        confirmed_before = lac = self.last_add_confirmed
        pending = unconfirmed.get(lac + 1)
        if pending is None or len(pending.acks) < quorum:
            return  # nothing to confirm: so it is for all but one of an entry's W answers
        confirmed: list[tuple[int, bytes, int]] = []  # for the entry cache, in one call
        released = 0
        # Counted in locals and stored after the loop: nothing runs in between (a future's
        # callbacks run later, from the event loop), and a run can be hundreds of entries.
        while pending is not None and len(pending.acks) >= quorum:
            newest = pending
            lac += 1
            del unconfirmed[lac]
            released += len(pending.packed)
            confirmed.append((lac, pending.payload, pending.length))
            if not pending.future.done():
                pending.future.set_result(lac)
            pending = unconfirmed.get(lac + 1)
        self.last_add_confirmed = lac
        self.confirmed_length = newest.length
        self._inflight_bytes -= released + ENTRY_BOOKKEEPING_BYTES * (lac - confirmed_before)
        if self._entry_cache is not None:
            self._entry_cache.put_run(self.ledger_id, self._life, confirmed)
        metrics.add_latencies.note(time.perf_counter() - newest.submitted_at)
        metrics.entry_counts.acknowledged += lac - confirmed_before
        if self._waiting_bytes:
            self._room.set()
        if not self._pending:
            if self._idle_waiters:
                self._tell_idle()
            if self.last_add_confirmed > self._lac_published and self._explicit_lacs is not None:
                self._explicit_lacs.quiet(self)

    @property
    def submits(self) -> int:
        """submit() calls so far: an explicit LAC waits for a pause in them."""
        return self._submits

    def lac_to_publish(self, submits_when_quiet: int) -> int | None:
        """The LAC to write to the bookies now (explicit_lac.py), or None when
        this was not a pause (the next entries carry the LAC, and the next
        pause publishes it) or the ledger is closed or failed (the metadata
        holds the end, or the ledger is gone: no bookie needs it)."""
        lac = self.last_add_confirmed
        if self._submits != submits_when_quiet or self._pending or lac <= self._lac_published:
            return None
        if self.closed or self._failure is not None:
            return None
        return lac

    def lac_published(self, lac: int) -> None:
        self._lac_published = max(self._lac_published, lac)

    def _fail(self, error: QuireError) -> None:
        """The handle cannot go on: fail every pending entry."""
        if self._failure is None:
            self._failure = error
            # A recovery, a close or a delete elsewhere ending the ledger, or bookies and placement
            # out of reach (a partition, a crash), is what a fault is expected to do to its writer,
            # not an error of this gateway: the writer is told, and retries or recovers.
            ended_elsewhere = error.reason in _ENDED_ELSEWHERE
            out_of_reach = isinstance(error, Unavailable | DeadlineExceeded)
            log.log(logging.WARNING if ended_elsewhere or out_of_reach else logging.ERROR,
                    "ledger %s write handle failed: %s", self.ledger_id, error)  # fmt: skip
            if ended_elsewhere:
                self._ended()
            elif not self.closed:
                self._keep_closing(pause_first=False)
        for pending in self._pending.values():
            if not pending.future.done():
                pending.future.set_exception(error)
                # Marked retrieved: a caller's stream ends at its first failed entry and never
                # awaits the rest, which asyncio would otherwise log one by one as errors.
                pending.future.exception()
        self._pending.clear()
        self._inflight_bytes = 0
        self._room.set()
        self._tell_idle()
        self._set_stable(True)

    def _tell_idle(self) -> None:
        """Nothing is pending now: wake whoever waits for that (close)."""
        waiters, self._idle_waiters = self._idle_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def close(self) -> common_pb2.LedgerMetadata:
        """Stop taking entries, wait for those in flight, then record the end
        (the LAC) in the metadata with compare-and-swap."""
        self.closed = True
        while self._pending:
            waiter = asyncio.get_running_loop().create_future()
            self._idle_waiters.append(waiter)
            await waiter

        def closing(metadata: common_pb2.LedgerMetadata) -> common_pb2.LedgerMetadata | None:
            if metadata.state == common_pb2.LEDGER_STATE_IN_RECOVERY:
                raise FailedPrecondition(f"ledger {self.ledger_id} is being recovered", Reason.LEDGER_FENCED)
            if metadata.state == common_pb2.LEDGER_STATE_CLOSED:
                if metadata.last_entry_id != self.last_add_confirmed:
                    raise FailedPrecondition(
                        f"ledger {self.ledger_id} was closed elsewhere at entry {metadata.last_entry_id}",
                        Reason.LEDGER_CLOSED,
                    )
                return None  # closed here already, at the same end
            metadata.state = common_pb2.LEDGER_STATE_CLOSED
            metadata.last_entry_id = self.last_add_confirmed
            metadata.length = self.confirmed_length
            return metadata

        with _tracer.start_as_current_span(
            "quire.gateway.close_metadata", attributes={"quire.ledger": self.ledger_id.qualified_name}
        ):
            result = await update_metadata(self.metadata_store, self.ledger_id, closing, (self.metadata, self.version))
        if result.changed:
            self.metadata, self.version = result.metadata, result.version
            log.info("ledger %s closed at entry %d", self.ledger_id, self.last_add_confirmed)
        return result.metadata

    def close_later(self) -> None:
        """A close whose end the metadata store did not record (out of reach,
        or the caller gone before it answered): keep trying in the background,
        as after a failure, so that the ledger gets the end its writer was
        told, and a caller who asks again finds it closed or this handle
        still closing (never a ledger left open with no writer)."""
        self._keep_closing(pause_first=True)

    def _keep_closing(self, pause_first: bool) -> None:
        """One task recording the end, whether a failure or a close started it."""
        if not self._recording_end:
            self._recording_end = True
            self._spawn(self._close_until_recorded(pause_first))

    async def _close_until_recorded(self, pause_first: bool) -> None:
        """Close the ledger at its LAC (every entry acknowledged), tried again
        while the metadata store is out of reach; a recovery, close or delete
        elsewhere ends the ledger as well. A writer that cannot go on does this
        as BookKeeper's application closes a handle that failed: readers and
        the auditor then see the end, and the client's next write learns that
        the ledger is closed instead of being told to retry a writer that will
        never write again."""
        pauses = _CLOSE_AGAIN_BACKOFF.pauses()
        if pause_first:
            await asyncio.sleep(next(pauses))
        while True:
            try:
                await self.close()
                break
            except (Unavailable, DeadlineExceeded) as exc:
                pause = next(pauses)
                log.info("ledger %s: recording its end: %s; trying again", self.ledger_id, exc.message)
                await asyncio.sleep(pause)
            except QuireError as exc:
                log.info("ledger %s: its end not recorded here: %s", self.ledger_id, exc.message)
                break
        self._ended()

    def _ended(self) -> None:
        if self._on_ended is not None:
            self._on_ended(self)

    def abandon(self, error: QuireError) -> None:
        """Fail whatever is pending and stop (the ledger was deleted)."""
        self.closed = True
        self._fail(error)
