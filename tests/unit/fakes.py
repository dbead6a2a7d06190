"""An in-memory stand-in for the gateway's ClusterCalls: bookies as dicts, metadata
with versions, and switches to make a bookie fail, hang or be slow."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from quire_api.errors import Aborted, FailedPrecondition, NotFound, QuireError, Reason, Unavailable
from quire_api.ids import LedgerId
from quire_proto.common.v1 import common_pb2


class ManualClock:
    """A monotonic clock the test moves by hand (`clock.now += seconds`)."""

    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@dataclass
class FakeBookie:
    entries: dict[int, bytes] = field(default_factory=dict)
    fenced: bool = False
    lac: int = -1
    down: bool = False
    delay_seconds: float = 0.0


class FakeClusterCalls:
    def __init__(self, bookies: list[str], spare: list[str] | None = None) -> None:
        self.bookies = {b: FakeBookie() for b in [*bookies, *(spare or [])]}
        self.metadata: common_pb2.LedgerMetadata | None = None
        self.version = 1
        self.calls: list[tuple[str, str]] = []  # (method, bookie)
        self.before_update: list[common_pb2.LedgerMetadata] = []  # metadata swapped in before the next CAS
        self.unreachable_updates = 0  # CASes to refuse next, UNAVAILABLE, as a store out of reach does
        self.unreachable_update_seconds = 0.0  # how long each of them takes to fail (the registry's deadline)
        self.lost_update_answers = 0  # CASes to commit next whose answer is then lost (UNAVAILABLE)
        self._sends: set[asyncio.Future[None]] = set()

    async def _reach(self, method: str, bookie_id: str, timeout_seconds: float | None = None) -> FakeBookie:
        """Like a call with a deadline: a slow bookie past it is UNAVAILABLE."""
        self.calls.append((method, bookie_id))
        bookie = self.bookies[bookie_id]
        if bookie.delay_seconds:
            if timeout_seconds is not None and bookie.delay_seconds > timeout_seconds:
                await asyncio.sleep(timeout_seconds)
                raise Unavailable(f"bookie {bookie_id}: deadline exceeded", Reason.BOOKIE_UNAVAILABLE)
            await asyncio.sleep(bookie.delay_seconds)
        if bookie.down:
            raise Unavailable(f"bookie {bookie_id} is down", Reason.BOOKIE_UNAVAILABLE)
        return bookie

    async def add_entries(self, bookie_id, ledger_id, master_key, entries, recovery=False, timeout_seconds=None):  # type: ignore[no-untyped-def]
        bookie = await self._reach("add", bookie_id, timeout_seconds)
        if bookie.fenced and not recovery:
            raise FailedPrecondition(f"ledger {ledger_id} is fenced", Reason.LEDGER_FENCED)
        from quire_common.entry import parse_header

        for entry_id, data in entries:
            bookie.entries[entry_id] = data
            bookie.lac = max(bookie.lac, parse_header(data).last_add_confirmed)

    @staticmethod
    def add_request(ledger_id, master_key, entries, fields=None):  # type: ignore[no-untyped-def]
        return (ledger_id, master_key, entries)

    def add_sender(self, bookie_id):  # type: ignore[no-untyped-def]
        """The AddStream's callback form, over add_entries (send_entries, looked up
        at each call, so that a test may replace it)."""
        return lambda request, timeout_seconds, on_done: self.send_entries(bookie_id, request, timeout_seconds, on_done)

    def send_entries(self, bookie_id, request, timeout_seconds, on_done):  # type: ignore[no-untyped-def]
        """One add to `bookie_id`, over add_entries."""
        ledger_id, master_key, entries = request

        async def add() -> None:
            try:
                await self.add_entries(bookie_id, ledger_id, master_key, entries, timeout_seconds=timeout_seconds)
            except QuireError as exc:
                on_done(bookie_id, exc)
            else:
                on_done(bookie_id, None)

        task = asyncio.ensure_future(add())
        self._sends.add(task)
        task.add_done_callback(self._sends.discard)

    async def read_entries(self, bookie_id, ledger_id, entry_ids, timeout_seconds=None):  # type: ignore[no-untyped-def]
        bookie = await self._reach("read", bookie_id, timeout_seconds)
        found = {e: bookie.entries[e] for e in entry_ids if e in bookie.entries}
        return found, {e for e in entry_ids if e not in bookie.entries}

    async def read_last_add_confirmed(self, bookie_id, ledger_id, timeout_seconds=None):  # type: ignore[no-untyped-def]
        bookie = await self._reach("lac", bookie_id, timeout_seconds)
        return bookie.lac, max(bookie.entries, default=-1), bookie.fenced

    async def fence_ledger(self, bookie_id, ledger_id, master_key, timeout_seconds=None):  # type: ignore[no-untyped-def]
        bookie = await self._reach("fence", bookie_id, timeout_seconds)
        bookie.fenced = True
        return bookie.lac, max(bookie.entries, default=-1)

    async def replace_bookie(self, metadata, ensemble, failed, exclude):  # type: ignore[no-untyped-def]
        self.calls.append(("replace", failed))
        candidates = sorted(b for b in self.bookies if b not in ensemble and b not in exclude and b != failed)
        if not candidates:
            raise Unavailable("not enough bookies: needs 1, 0 are available", Reason.NOT_ENOUGH_BOOKIES)
        return candidates[0]

    async def new_ensembles(self, requests):  # type: ignore[no-untyped-def]
        """Placement: the first bookies, in name order (spares come after)."""
        return [sorted(self.bookies)[: request.ensemble_size] for request in requests]

    async def create_ledgers_metadata(self, requests):  # type: ignore[no-untyped-def]
        """The registry: this fake holds one ledger, the one named by the create."""
        created = []
        for request in requests:
            self.metadata = common_pb2.LedgerMetadata()
            self.metadata.CopyFrom(request.metadata)
            self.metadata.ledger_id.CopyFrom(request.ledger_id)
            created.append((self._copy(), self.version))
        return created

    def _copy(self) -> common_pb2.LedgerMetadata:
        assert self.metadata is not None
        copy = common_pb2.LedgerMetadata()
        copy.CopyFrom(self.metadata)
        return copy

    async def get_ledger_metadata(self, ledger_id: LedgerId) -> tuple[common_pb2.LedgerMetadata, int]:
        if self.metadata is None:
            raise NotFound(f"ledger {ledger_id} not found")
        return self._copy(), self.version

    async def update_ledger_metadata(self, ledger_id, metadata, expected_version):  # type: ignore[no-untyped-def]
        if self.before_update:
            self.metadata = self.before_update.pop(0)
            self.version += 1
        if self.unreachable_updates:
            self.unreachable_updates -= 1
            await asyncio.sleep(self.unreachable_update_seconds)
            raise Unavailable("etcd transaction timed out", Reason.METADATA_STORE_UNAVAILABLE)
        if expected_version != self.version:
            raise Aborted("version conflict")
        self.metadata = common_pb2.LedgerMetadata()
        self.metadata.CopyFrom(metadata)
        self.version += 1
        if self.lost_update_answers:
            self.lost_update_answers -= 1
            raise Unavailable("etcd transaction failed: Stream removed", Reason.METADATA_STORE_UNAVAILABLE)
        return self.version


def new_metadata(
    ledger_id: LedgerId, ensemble: list[str], write_quorum: int, ack_quorum: int
) -> common_pb2.LedgerMetadata:
    return common_pb2.LedgerMetadata(
        ledger_id=common_pb2.LedgerId(scope_id=ledger_id.scope_id, ledger_id=ledger_id.ledger_id),
        ensemble_size=len(ensemble),
        write_quorum_size=write_quorum,
        ack_quorum_size=ack_quorum,
        state=common_pb2.LEDGER_STATE_OPEN,
        last_entry_id=-1,
        digest_type=common_pb2.DIGEST_TYPE_CRC32C,
        password=b"pw",
        ensembles=[common_pb2.Ensemble(first_entry_id=0, bookie_ids=ensemble)],
    )
