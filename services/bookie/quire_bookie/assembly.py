"""The bookie's composition root: its parts built from its settings, started
in order, and stopped in two phases around the gRPC server's drain, each in
the reverse order of starting (every part's stop is pushed on its phase's
exit stack as the part starts, so a start that fails half way stops what it
had started).

Start: check the bookie's identity (cookie), open storage, serve gRPC with
health NOT_SERVING, register with the registry, and only then turn health
SERVING. Stop: health NOT_SERVING, then what feeds the server (garbage
collection, the registration, the add streams told to wind down), then the
server lets calls in flight finish, then what those calls used (the admin
endpoint, storage: every queued add synced, RocksDB closed)."""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable
from contextlib import AsyncExitStack

import grpc
from grpc_health.v1 import health, health_pb2

from quire_api.errors import DataLoss, Reason
from quire_bookie.admin import register_metrics, status
from quire_bookie.bookie import Bookie
from quire_bookie.collector import LedgerCollector
from quire_bookie.config import BookieConfig
from quire_bookie.cookie import check_cookie
from quire_bookie.metadata import RegistryLedgerLookup
from quire_bookie.registration import RegistrationKeeper, RegistryCookies
from quire_bookie.servicer import SERVICE_NAME, BookieServicer, add_servicer_to_server
from quire_bookie.settings import BookieEnv
from quire_bookie.storage import DamagedJournal
from quire_common.admin_http import AdminServer
from quire_common.server import create_server, mark_serving, stop_gracefully, stop_signal
from quire_common.telemetry import set_instance
from quire_proto.common.v1 import common_pb2

log = logging.getLogger("quire_bookie")
# A health service that is SERVING only while the bookie accepts adds.
WRITABLE_HEALTH = "writable"
# A health service that is SERVING only when adds are fsynced before they are
# acknowledged: NOT_SERVING under QUIRE_BOOKIE_UNSAFE_NO_SYNC_LOSES_DATA.
DURABLE_HEALTH = "durable"
SHUTDOWN_GRACE_SECONDS = 5.0


class BookieProcess:
    """A bookie's parts, from its settings. `run()` starts them, serves until
    SIGTERM or SIGINT (which may also come while it starts), then stops them."""

    def __init__(self, settings: BookieEnv) -> None:
        self.settings = settings
        self.config = BookieConfig.from_settings(settings)
        self._stop = stop_signal()
        self._before_drain = AsyncExitStack()  # what feeds the server: stopped before it drains
        self._after_drain = AsyncExitStack()  # what calls in flight use: stopped once they are done
        self._server: grpc.aio.Server | None = None
        self._health: health.aio.HealthServicer | None = None
        self._health_updates: set[asyncio.Task[None]] = set()  # kept until each is done

    async def run(self) -> None:
        set_instance(self.config.bookie_id)  # telemetry records name this bookie
        warn_of_unsafe_settings(self.config)
        # Identity first: never open, let alone serve, data that is not this bookie's.
        if not self.config.standalone and not await self._until_stopped(verify_identity(self.config)):
            log.info("bookie %s stopped before its identity was checked", self.config.bookie_id)
            return
        bookie = self._open_storage()
        await bookie.start()
        self._after_drain.push_async_callback(bookie.close)  # syncs whatever is still queued, closes RocksDB
        self._before_drain.callback(bookie.begin_shutdown)  # add streams answer what they queued, then end
        register_metrics(bookie, self.config.bookie_id)
        try:
            await self._serve(bookie)
        finally:
            if self._server is not None and self._health is not None:
                await stop_gracefully(
                    self._server,
                    self._health,
                    SHUTDOWN_GRACE_SECONDS,
                    before_server=self._before_drain.aclose,
                    after_server=self._after_drain.aclose,
                )
            else:
                await self._before_drain.aclose()
                await self._after_drain.aclose()
            log.info("bookie %s stopped", self.config.bookie_id)

    def _open_storage(self) -> Bookie:
        try:
            return Bookie(self.config.data_dir, self.config.storage)
        except DamagedJournal as exc:
            raise DataLoss(f"{exc}. {damaged_journal_way_out(self.config)}", Reason.STORAGE_ERROR) from None

    async def _serve(self, bookie: Bookie) -> None:
        config = self.config

        def register(server: grpc.aio.Server) -> list[str]:
            add_servicer_to_server(BookieServicer(bookie), server)
            return [SERVICE_NAME]

        server, port, health_servicer = create_server(
            config.listen_address, register, address_setting="QUIRE_BOOKIE_PORT", settings=self.settings.common.server
        )
        self._server, self._health = server, health_servicer
        for name in ("", SERVICE_NAME, WRITABLE_HEALTH, DURABLE_HEALTH):
            await health_servicer.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)
        await server.start()
        admin = await self._start_admin(bookie)
        if config.standalone:
            log.warning("QUIRE_BOOKIE_STANDALONE is set: no registration, cookie check or garbage collection")
        else:
            keeper = RegistrationKeeper(
                config.registry_target,
                config.bookie_id,
                service_info(config, admin.port if admin else 0),
                config.registration_ttl_seconds,
                lambda: bookie.read_only,
            )
            bookie.on_read_only_change(lambda *_: keeper.nudge())  # re-register at once, not at the next beat
            keeper.start()
            self._before_drain.push_async_callback(keeper.stop)
            await self._until_stopped(keeper.registered.wait())
            self._start_collector(bookie)
        bookie.on_read_only_change(lambda read_only, _why: self._update_writable_health(read_only))
        if self._stop.is_set():
            return
        await mark_serving(health_servicer, [SERVICE_NAME])
        await self._set_writable_health(bookie.read_only)
        if not config.unsafe_no_sync:
            await health_servicer.set(DURABLE_HEALTH, health_pb2.HealthCheckResponse.SERVING)
        log.info(
            "bookie %s serving on port %d (admin http %s), data in %s%s",
            config.bookie_id,
            port,
            admin.port if admin else "off",
            config.data_dir,
            f"; read-only: {bookie.read_only_reason}" if bookie.read_only else "",
        )
        await self._stop.wait()

    async def _start_admin(self, bookie: Bookie) -> AdminServer | None:
        config = self.config
        if not config.http_port:
            return None
        admin = AdminServer(
            "QUIRE_BOOKIE_HTTP_PORT",
            config.listen_address.rsplit(":", 1)[0],
            config.http_port,
            lambda: status(bookie, config.bookie_id),
            common=self.settings.common,
        )
        await admin.start()
        self._after_drain.push_async_callback(admin.stop)
        return admin

    def _start_collector(self, bookie: Bookie) -> None:
        """Garbage collection of deleted ledgers' entries, when it is on."""
        config = self.config
        if config.gc_interval_seconds <= 0:
            return
        lookup = RegistryLedgerLookup(config.registry_target)
        self._before_drain.push_async_callback(lookup.close)
        collector = LedgerCollector(
            bookie,
            lookup.existing_ledgers,
            lookup.metadata_gone,
            interval_seconds=config.gc_interval_seconds,
            recheck_seconds=config.gc_recheck_seconds,
        )
        collector.start()
        self._before_drain.push_async_callback(collector.stop)

    async def _until_stopped(self, work: Awaitable[object]) -> bool:
        """Await `work` unless SIGTERM or SIGINT comes first: True once it
        is done (its exception raised), False when stopped."""
        task = asyncio.ensure_future(work)
        stopping = asyncio.create_task(self._stop.wait())
        await asyncio.wait([task, stopping], return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        if not task.done():
            task.cancel()
            return False
        task.result()
        return True

    def _update_writable_health(self, read_only: bool) -> None:
        task = asyncio.create_task(self._set_writable_health(read_only))
        self._health_updates.add(task)
        task.add_done_callback(self._health_updates.discard)

    async def _set_writable_health(self, read_only: bool) -> None:
        if self._health is not None and not self._stop.is_set():
            serving = (
                health_pb2.HealthCheckResponse.NOT_SERVING if read_only else health_pb2.HealthCheckResponse.SERVING
            )
            await self._health.set(WRITABLE_HEALTH, serving)


def warn_of_unsafe_settings(config: BookieConfig) -> None:
    """Say so in the log when a setting that weakens a guarantee (or injects a fault) is on."""
    storage = config.storage
    if storage.fault_sync_delay_seconds:
        log.warning(
            "QUIRE_BOOKIE_FAULT_SYNC_DELAY_SECONDS is set: every synced write is slowed by %g s (fault injection)",
            storage.fault_sync_delay_seconds,
        )
    if config.unsafe_no_sync:
        log.warning(
            "QUIRE_BOOKIE_UNSAFE_NO_SYNC_LOSES_DATA is set: adds are acknowledged WITHOUT fsync; "
            "a crash or power loss will lose acknowledged entries"
        )
    if storage.fault_unsafe_ignore_fence:
        log.warning(
            "QUIRE_BOOKIE_FAULT_UNSAFE_IGNORE_FENCE is set: fenced ledgers still take a writer's adds, so a "
            "writer recovered out of its ledger is NOT stopped (fault injection: a positive control, never in "
            "production)"
        )
    if storage.fault_unsafe_wal_point_in_time_recovery:
        log.warning(
            "QUIRE_BOOKIE_FAULT_UNSAFE_WAL_POINT_IN_TIME_RECOVERY is set: a WAL damaged in the middle is replayed "
            "only up to the damage and the bookie starts WITHOUT the acknowledged entries after it (fault "
            "injection: a positive control, never in production)"
        )


def service_info(config: BookieConfig, http_port: int) -> common_pb2.BookieServiceInfo:
    """What this bookie advertises (BP-38)."""
    info = common_pb2.BookieServiceInfo()
    info.endpoints.add(id="rpc", host=config.advertised_host, port=config.advertised_port, protocol="bookie-rpc")
    if http_port:
        info.endpoints.add(id="http", host=config.advertised_host, port=http_port, protocol="http")
    if config.rack:
        info.properties["topology.rack"] = config.rack
    if config.region:
        info.properties["topology.region"] = config.region
    if config.autorecovery:
        info.properties["autorecovery.enabled"] = config.autorecovery
    return info


async def verify_identity(config: BookieConfig) -> None:
    """Refuse to start when the data directories belong to another BookieId
    (ConfigError from the cookie check)."""
    cookies = RegistryCookies(config.registry_target)
    try:
        # However long the registry takes (a whole cluster may start in any order); SIGTERM ends the wait.
        await check_cookie(cookies, config.bookie_id, [config.data_dir], wait_seconds=math.inf)
    finally:
        await cookies.close()


def damaged_journal_way_out(config: BookieConfig) -> str:
    """What an operator does about a damaged journal (docs/faults.md)."""
    return (
        "The bookie refuses to start rather than answer 'no such entry' for them. Way out: keep it stopped; "
        "the gateway's auditor copies its ledgers from the other replicas once it has been unregistered for "
        f"QUIRE_AUDITOR_LOST_BOOKIE_DELAY_SECONDS; `quire bookie decommission {config.bookie_id}` waits for "
        f"that and removes its cookie; then move {config.data_dir} aside and start the bookie again: it "
        "formats an empty data directory and joins as a new, empty bookie"
    )
