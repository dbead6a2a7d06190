"""Finding a ledger's end: recovery (fence, read forward, re-add, close)
for a ledger whose writer may be gone; the LAC as the bookies know it is
the read path's (read/bookie_lac.py).

The procedure (docs/architecture.md, "A recovery open"; BookKeeper's recovery read):
  1. CAS the metadata OPEN -> IN_RECOVERY (a ledger already IN_RECOVERY is
     being recovered by someone else; recovery is idempotent, so go on).
  2. Fence every bookie of the last ensemble in parallel, each call bounded
     by its own timeout, and go on as soon as the answers cover the ensemble
     (quorums.covered): from then on the old writer cannot gather an ack
     quorum, so nothing new can be acknowledged.
  3. From the highest LAC answered, read entries forward from their write
     sets. An entry found (digest checked) is re-added with recovery=true to
     its whole write set (at least A acks); an entry is missing once W-A+1
     bookies of its write set say they do not have it (quorums.entry_missing).
     The first missing entry ends the ledger.
  4. CAS to CLOSED with the last entry id and the length from its header.
     A CAS conflict re-reads the metadata: if another recovery (or the
     writer) closed it first, its end is the answer, so concurrent recoveries
     always report one agreed end.
Each step is idempotent, so a step that meets unavailable bookies is tried
again (with a short backoff) until QUIRE_GATEWAY_RECOVERY_TIMEOUT_SECONDS ends
the whole; the error then names the last cause.
No grpc here: the calls go through ClusterCalls.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from quire_api.backoff import Backoff
from quire_api.errors import QuireError, Reason, Unavailable
from quire_api.ids import LedgerId
from quire_common.entry import parse_header, verified_entry
from quire_common.fanout import ask_all
from quire_common.ledger_secrets import ledger_digester, ledger_master_key
from quire_common.telemetry import tracer
from quire_gateway import metrics
from quire_gateway.cluster_calls import ClusterCalls
from quire_gateway.metadata_store import MetadataStore
from quire_gateway.metadata_updates import Update, update_metadata
from quire_gateway.quorum_rules import entry_missing, replicas_of
from quire_gateway.read.bookie_lac import until_covered
from quire_gateway.write.ensemble_change import replaceable
from quire_proto.common.v1 import common_pb2

log = logging.getLogger(__name__)
_tracer = tracer(__name__)
T = TypeVar("T")
# Between tries of a recovery step; the recovery timeout bounds the whole.
_STEP_RETRY = Backoff(first_seconds=0.05, longest_seconds=1.0)


@dataclass(frozen=True)
class RecoverySettings:
    # The whole recovery open, fencing to close.
    timeout_seconds: float = 30.0
    # Each fence, LAC read, recovery read and recovery add to one bookie: a
    # hung bookie costs at most this much, and the coverage rule goes on without it.
    bookie_timeout_seconds: float = 2.0
    # Entries read (and re-added) per round past the LAC.
    batch_entries: int = 64


@dataclass
class _Copies:
    """What the replicas of one entry said during a recovery read."""

    good: bytes | None = None  # a copy whose digest checks
    not_found: int = 0  # replicas that say they do not have it
    cut: bool = False  # a replica left it out to keep its response small
    problems: list[str] = field(default_factory=list)


@dataclass
class _Found:
    entry_id: int
    data: bytes
    length: int


class Recovery:
    """One recovery open of one ledger."""

    def __init__(
        self,
        remote: ClusterCalls,
        metadata_store: MetadataStore,
        ledger_id: LedgerId,
        metadata: common_pb2.LedgerMetadata,
        version: int,
        settings: RecoverySettings,
    ) -> None:
        self.remote = remote
        self.metadata_store = metadata_store
        self.ledger_id = ledger_id
        self.metadata = metadata
        self.version = version
        self.settings = settings
        self.master_key = ledger_master_key(metadata)
        self.digester = ledger_digester(metadata)
        self._last_problem = ""

    async def run(self) -> common_pb2.LedgerMetadata:
        """The closed metadata, within the configured timeout."""
        outcome = "error"
        try:
            with _tracer.start_as_current_span(
                "quire.gateway.recover", attributes={"quire.ledger": self.ledger_id.qualified_name}
            ):
                closed = await asyncio.wait_for(self._run(), self.settings.timeout_seconds)
                outcome = "closed"
                return closed
        except TimeoutError:
            outcome = "timeout"
            cause = f": {self._last_problem}" if self._last_problem else ""
            raise Unavailable(
                f"recovery of ledger {self.ledger_id} did not finish within {self.settings.timeout_seconds:g}s{cause}",
                Reason.BOOKIE_UNAVAILABLE,
            ) from None
        finally:
            metrics.recovery_runs.add(1, {"outcome": outcome})

    async def _retrying(self, step: Callable[[], Awaitable[T]]) -> T:
        """Run one step of recovery again while bookies are unavailable: every
        step is idempotent, and the recovery timeout bounds the whole."""
        pauses = _STEP_RETRY.pauses()
        while True:
            try:
                return await step()
            except Unavailable as exc:
                self._last_problem = str(exc)
                log.info("ledger %s recovery: %s; trying again", self.ledger_id, exc)
                await asyncio.sleep(next(pauses))

    async def _run(self) -> common_pb2.LedgerMetadata:
        if self.metadata.state == common_pb2.LEDGER_STATE_CLOSED:
            return self.metadata
        if not await self._mark_in_recovery():
            return self.metadata  # closed meanwhile
        fenced_lac = await self._retrying(self._fence)
        last_ensemble = self.metadata.ensembles[-1]
        # Entries before the last ensemble were confirmed when it was made.
        last_entry_id = max(fenced_lac, last_ensemble.first_entry_id - 1)
        length = await self._retrying(lambda: self._length_at(last_entry_id))
        next_entry = last_entry_id + 1
        while True:
            found, ended = await self._retrying(lambda: self._read_forward(next_entry))  # noqa: B023
            if found:
                await self._retrying(lambda: self._re_add(found))  # noqa: B023
                last_entry_id, length = found[-1].entry_id, found[-1].length
                next_entry = last_entry_id + 1
            if ended:
                break
        log.info("ledger %s recovered: last entry %d, length %d", self.ledger_id, last_entry_id, length)
        return await self._close(last_entry_id, length)

    async def _mark_in_recovery(self) -> bool:
        """OPEN -> IN_RECOVERY. False if the ledger turned out closed."""

        def take_over(metadata: common_pb2.LedgerMetadata) -> common_pb2.LedgerMetadata | None:
            if metadata.state != common_pb2.LEDGER_STATE_OPEN:
                return None  # in recovery already (recovery is idempotent), or closed
            metadata.state = common_pb2.LEDGER_STATE_IN_RECOVERY
            return metadata

        await self._update_metadata(take_over)
        return self.metadata.state != common_pb2.LEDGER_STATE_CLOSED

    async def _fence(self) -> int:
        timeout = self.settings.bookie_timeout_seconds

        async def ask(bookie: str) -> tuple[int, int]:
            return await self.remote.fence_ledger(bookie, self.ledger_id, self.master_key, timeout)

        with _tracer.start_as_current_span("quire.gateway.fence"):
            answers = await until_covered(self.metadata, ask, f"fencing ledger {self.ledger_id}")
        return max(lac for lac, _ in answers)

    async def _read_copies(self, entry_ids: list[int]) -> dict[int, _Copies]:
        """Ask every replica of each entry, one ReadEntries call per bookie, and
        return once every entry has a good copy, or every replica has answered.
        Calls still outstanding once each entry has a copy are no longer waited
        for (they end by their deadlines), so a slow replica (a congested link)
        does not cost every batch its timeout. Telling
        that an entry is missing still waits for every replica: a copy, wherever
        it is found, wins over replicas that lack it (a replacement put into the
        last ensemble by recovery lacks everything)."""
        by_bookie: dict[str, list[int]] = {}
        for entry_id in entry_ids:
            for bookie in replicas_of(self.metadata, entry_id):
                by_bookie.setdefault(bookie, []).append(entry_id)
        outcome = {e: _Copies() for e in entry_ids}
        await ask_all(
            {
                b: self.remote.read_entries(b, self.ledger_id, ids, self.settings.bookie_timeout_seconds)
                for b, ids in by_bookie.items()
            },
            lambda bookie, answer, error: self._fold(outcome, bookie, by_bookie[bookie], answer, error),
            lambda: all(copies.good is not None for copies in outcome.values()),
            cancel_rest=False,
        )
        return outcome

    def _fold(
        self,
        outcome: dict[int, _Copies],
        bookie: str,
        entry_ids: list[int],
        answer: tuple[dict[int, bytes], set[int]] | None,
        error: QuireError | None,
    ) -> None:
        """Add one bookie's answer (or failure) to what is known of each entry."""
        for entry_id in entry_ids:
            copies = outcome[entry_id]
            if answer is None:
                copies.problems.append(f"{bookie}: {error}")
                continue
            found, missing = answer
            if entry_id in found:
                if copies.good is not None:
                    continue
                if self._checks(entry_id, found[entry_id]):
                    copies.good = found[entry_id]
                else:
                    copies.problems.append(f"{bookie}: corrupt copy")
            elif entry_id in missing:
                copies.not_found += 1
            else:
                copies.cut = True  # by the bookie's response size limit

    def _checks(self, entry_id: int, data: bytes) -> bool:
        try:
            verified_entry(data, self.digester, self.ledger_id, entry_id)
        except QuireError:
            return False
        return True

    async def _read_forward(self, first: int) -> tuple[list[_Found], bool]:
        """Entries found from `first` on, in order, up to one batch; and
        whether the end (a missing entry) was reached."""
        entry_ids = list(range(first, first + self.settings.batch_entries))
        outcome = await self._read_copies(entry_ids)
        found: list[_Found] = []
        for entry_id in entry_ids:
            copies = outcome[entry_id]
            if copies.good is not None:
                found.append(_Found(entry_id, copies.good, parse_header(copies.good).length))
                continue
            if entry_missing(self.metadata.write_quorum_size, self.metadata.ack_quorum_size, copies.not_found):
                return found, True
            if copies.cut:
                return found, False  # ask again from here next round
            raise Unavailable(
                f"recovery of ledger {self.ledger_id}: cannot tell whether entry {entry_id} exists "
                f"({copies.not_found} replicas say it does not; {'; '.join(copies.problems) or 'no answer'})",
                Reason.BOOKIE_UNAVAILABLE,
            )
        return found, False

    async def _re_add(self, found: list[_Found]) -> None:
        """Write each found entry to its whole write set (recovery adds pass
        the fence); each needs A acknowledgements. A bookie of the last
        ensemble that is down, hung or full is replaced first, as a writer's
        ensemble change would: with W = A one dead member could otherwise hold
        the recovery until its timeout."""
        for _ in range(self.metadata.ensemble_size + 1):
            short, failed, problems = await self._try_re_add(found)
            if not short:
                return
            current = self.metadata.ensembles[-1].bookie_ids
            broken = [b for b in failed if b in current]
            if not broken or self.metadata.state == common_pb2.LEDGER_STATE_CLOSED:
                break
            if not await self._replace(broken, first_entry_id=found[0].entry_id):
                return  # another recovery closed the ledger; its end stands
        raise Unavailable(
            f"recovery of ledger {self.ledger_id}: entry {short[0]} could not be re-added to "
            f"{self.metadata.ack_quorum_size} bookies ({'; '.join(problems)})",
            Reason.BOOKIE_UNAVAILABLE,
        )

    async def _try_re_add(self, found: list[_Found]) -> tuple[list[int], list[str], list[str]]:
        """One round of recovery adds: (entries short of A acks, bookies that
        failed in a way a replacement fixes, what went wrong). The round ends as
        soon as every entry has A acks, as a writer's add does: calls still
        outstanding (a slow replica) are cancelled rather than waited for."""
        by_bookie: dict[str, list[tuple[int, bytes]]] = {}
        for item in found:
            for bookie in replicas_of(self.metadata, item.entry_id):
                by_bookie.setdefault(bookie, []).append((item.entry_id, item.data))
        acks = {item.entry_id: 0 for item in found}
        failed: list[str] = []
        problems: list[str] = []

        def take(bookie: str, _: object, error: QuireError | None) -> None:
            if error is not None:
                problems.append(f"{bookie}: {error}")
                if replaceable(error):
                    failed.append(bookie)
                return
            for entry_id, _data in by_bookie[bookie]:
                acks[entry_id] += 1

        await ask_all(
            {
                b: self.remote.add_entries(
                    b,
                    self.ledger_id,
                    self.master_key,
                    entries,
                    recovery=True,
                    timeout_seconds=self.settings.bookie_timeout_seconds,
                )
                for b, entries in by_bookie.items()
            },
            take,
            lambda: all(n >= self.metadata.ack_quorum_size for n in acks.values()),
            cancel_rest=True,
        )
        short = [e for e, n in acks.items() if n < self.metadata.ack_quorum_size]
        return short, failed, problems

    async def _replace(self, broken: list[str], first_entry_id: int) -> bool:
        """Put replacements for `broken` into the last ensemble from
        `first_entry_id` on, by compare-and-swap (the ledger is IN_RECOVERY,
        so only recoveries change it). False when another recovery closed the
        ledger meanwhile."""
        ensemble = list(self.metadata.ensembles[-1].bookie_ids)
        for bookie in broken:
            replacement = await self.remote.replace_bookie(self.metadata, ensemble, bookie, broken)
            ensemble = [replacement if b == bookie else b for b in ensemble]

        def replace(metadata: common_pb2.LedgerMetadata) -> common_pb2.LedgerMetadata | None:
            if metadata.state == common_pb2.LEDGER_STATE_CLOSED:
                return None
            if metadata.ensembles[-1].first_entry_id >= first_entry_id:
                # Nothing confirmed in the last ensemble yet: replace it in place.
                metadata.ensembles[-1].first_entry_id = min(metadata.ensembles[-1].first_entry_id, first_entry_id)
                del metadata.ensembles[-1].bookie_ids[:]
                metadata.ensembles[-1].bookie_ids.extend(ensemble)
            else:
                metadata.ensembles.append(common_pb2.Ensemble(first_entry_id=first_entry_id, bookie_ids=ensemble))
            return metadata

        if not await self._update_metadata(replace):
            return False
        log.info(
            "ledger %s recovery: %s replaced from entry %d; ensemble now %s",
            self.ledger_id,
            ", ".join(broken),
            first_entry_id,
            " ".join(ensemble),
        )
        metrics.ensemble_changes.add(len(broken))
        return True

    async def _update_metadata(self, update: Update) -> bool:
        """Apply `update` by compare-and-swap (metadata_updates) and keep what
        the registry holds now; whether `update` changed anything."""
        result = await update_metadata(self.metadata_store, self.ledger_id, update, (self.metadata, self.version))
        self.metadata, self.version = result.metadata, result.version
        return result.changed

    async def _length_at(self, entry_id: int) -> int:
        """The ledger's length up to `entry_id`, from that entry's header."""
        if entry_id < 0:
            return 0
        copies = (await self._read_copies([entry_id]))[entry_id]
        if copies.good is None:
            raise Unavailable(
                f"recovery of ledger {self.ledger_id}: confirmed entry {entry_id} could not be read "
                f"({'; '.join(copies.problems) or 'no replica has it'})",
                Reason.BOOKIE_UNAVAILABLE,
            )
        return parse_header(copies.good).length

    async def _close(self, last_entry_id: int, length: int) -> common_pb2.LedgerMetadata:
        def close(metadata: common_pb2.LedgerMetadata) -> common_pb2.LedgerMetadata | None:
            if metadata.state == common_pb2.LEDGER_STATE_CLOSED:
                return None  # by another recovery (or the writer): its end stands
            metadata.state = common_pb2.LEDGER_STATE_CLOSED
            metadata.last_entry_id = last_entry_id
            metadata.length = length
            return metadata

        if not await self._update_metadata(close) and self.metadata.last_entry_id != last_entry_id:
            log.info(
                "ledger %s was closed by another recovery at entry %d (this one found %d); its end stands",
                self.ledger_id,
                self.metadata.last_entry_id,
                last_entry_id,
            )
        return self.metadata
