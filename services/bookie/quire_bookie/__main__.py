"""Entry point: python -m quire_bookie

Start-up order: check the bookie's identity (cookie), open storage, serve
gRPC with health NOT_SERVING, register with the registry, and only then turn
health SERVING. On SIGTERM: health NOT_SERVING, leave the registry, let
in-flight calls finish, sync every queued add, close RocksDB.
"""

from __future__ import annotations

import asyncio
import logging
import math

from grpc_health.v1 import health_pb2

from quire.bookie.v1 import bookie_pb2, bookie_pb2_grpc
from quire.common.v1 import common_pb2
from quire_api.errors import DataLoss, Reason
from quire_bookie.admin import register_metrics, status
from quire_bookie.bookie import Bookie
from quire_bookie.collector import LedgerCollector
from quire_bookie.config import BookieConfig
from quire_bookie.cookie import check_cookie
from quire_bookie.metadata import RegistryLedgerLookup
from quire_bookie.registration import RegistrationKeeper, RegistryCookies
from quire_bookie.servicer import BookieServicer
from quire_bookie.settings import BookieEnv
from quire_bookie.storage import DamagedJournal
from quire_common.admin_http import AdminServer
from quire_common.server import create_server, mark_serving, stop_gracefully, stop_signal
from quire_common.service import run_service
from quire_common.telemetry import set_instance

log = logging.getLogger("quire_bookie")
SERVICE_NAME = bookie_pb2.DESCRIPTOR.services_by_name["BookieService"].full_name
# A health service that is SERVING only while the bookie accepts adds.
WRITABLE_HEALTH = "writable"
# A health service that is SERVING only when adds are fsynced before they are
# acknowledged: NOT_SERVING under QUIRE_BOOKIE_UNSAFE_NO_SYNC_LOSES_DATA.
DURABLE_HEALTH = "durable"
SHUTDOWN_GRACE_SECONDS = 5.0


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


async def main(settings: BookieEnv) -> None:
    config = BookieConfig.from_settings(settings)
    set_instance(config.bookie_id)  # telemetry records name this bookie
    if config.storage.fault_sync_delay_seconds:
        log.warning(
            "QUIRE_BOOKIE_FAULT_SYNC_DELAY_SECONDS is set: every synced write is slowed by %g s (fault injection)",
            config.storage.fault_sync_delay_seconds,
        )
    if config.unsafe_no_sync:
        log.warning(
            "QUIRE_BOOKIE_UNSAFE_NO_SYNC_LOSES_DATA is set: adds are acknowledged WITHOUT fsync; "
            "a crash or power loss will lose acknowledged entries"
        )
    if config.storage.fault_unsafe_ignore_fence:
        log.warning(
            "QUIRE_BOOKIE_FAULT_UNSAFE_IGNORE_FENCE is set: fenced ledgers still take a writer's adds, so a "
            "writer recovered out of its ledger is NOT stopped (fault injection: a positive control, never in "
            "production)"
        )
    if config.storage.fault_unsafe_wal_point_in_time_recovery:
        log.warning(
            "QUIRE_BOOKIE_FAULT_UNSAFE_WAL_POINT_IN_TIME_RECOVERY is set: a WAL damaged in the middle is replayed "
            "only up to the damage and the bookie starts WITHOUT the acknowledged entries after it (fault "
            "injection: a positive control, never in production)"
        )
    stop = stop_signal()

    # Identity first: never open, let alone serve, data that is not this bookie's.
    if not config.standalone:
        identity = asyncio.create_task(verify_identity(config))
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait([identity, stopping], return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        if not identity.done():  # stopped while waiting for the registry
            identity.cancel()
            log.info("bookie %s stopped before its identity was checked", config.bookie_id)
            return
        identity.result()  # a mismatch raises ConfigError: no start
    try:
        bookie = Bookie(config.data_dir, config.storage)
    except DamagedJournal as exc:
        raise DataLoss(f"{exc}. {damaged_journal_way_out(config)}", Reason.STORAGE_ERROR) from None
    await bookie.start()
    register_metrics(bookie, config.bookie_id)

    def register(server):  # type: ignore[no-untyped-def]
        bookie_pb2_grpc.add_BookieServiceServicer_to_server(BookieServicer(bookie), server)
        return [SERVICE_NAME]

    server, port, health = create_server(
        config.listen_address, register, address_setting="QUIRE_BOOKIE_PORT", settings=settings.common.server
    )
    for name in ("", SERVICE_NAME, WRITABLE_HEALTH, DURABLE_HEALTH):
        await health.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)
    admin: AdminServer | None = None
    keeper: RegistrationKeeper | None = None
    collector: LedgerCollector | None = None
    lookup: RegistryLedgerLookup | None = None
    try:
        await server.start()
        if config.http_port:
            admin = AdminServer(
                "QUIRE_BOOKIE_HTTP_PORT",
                config.listen_address.rsplit(":", 1)[0],
                config.http_port,
                lambda: status(bookie, config.bookie_id),
                common=settings.common,
            )
            await admin.start()

        async def set_writable_health(read_only: bool) -> None:
            if not stop.is_set():
                status = (
                    health_pb2.HealthCheckResponse.NOT_SERVING if read_only else health_pb2.HealthCheckResponse.SERVING
                )
                await health.set(WRITABLE_HEALTH, status)

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
            registered = asyncio.create_task(keeper.registered.wait())
            stopping = asyncio.create_task(stop.wait())
            await asyncio.wait([registered, stopping], return_when=asyncio.FIRST_COMPLETED)
            registered.cancel()
            stopping.cancel()
            if config.gc_interval_seconds > 0:
                lookup = RegistryLedgerLookup(config.registry_target)
                collector = LedgerCollector(
                    bookie,
                    lookup.metadata_gone,
                    interval_seconds=config.gc_interval_seconds,
                    recheck_seconds=config.gc_recheck_seconds,
                )
                collector.start()
        health_updates: set[asyncio.Task[None]] = set()  # keep a reference until each is done

        def on_mode_change(read_only: bool, _: str) -> None:
            task = asyncio.create_task(set_writable_health(read_only))
            health_updates.add(task)
            task.add_done_callback(health_updates.discard)

        bookie.on_read_only_change(on_mode_change)
        if not stop.is_set():
            await mark_serving(health, [SERVICE_NAME])
            await set_writable_health(bookie.read_only)
            if not config.unsafe_no_sync:
                await health.set(DURABLE_HEALTH, health_pb2.HealthCheckResponse.SERVING)
            log.info(
                "bookie %s serving on port %d (admin http %s), data in %s%s",
                config.bookie_id,
                port,
                admin.port if admin else "off",
                config.data_dir,
                f"; read-only: {bookie.read_only_reason}" if bookie.read_only else "",
            )
            await stop.wait()
    finally:

        async def quiesce() -> None:
            if collector is not None:
                await collector.stop()
            if lookup is not None:
                await lookup.close()
            if keeper is not None:
                await keeper.stop()
            bookie.begin_shutdown()  # add streams answer what they queued, then end

        async def release() -> None:  # once in-flight adds have finished (their syncs included)
            if admin is not None:
                await admin.stop()
            await bookie.close()  # syncs whatever is still queued, then closes RocksDB

        await stop_gracefully(server, health, SHUTDOWN_GRACE_SECONDS, before_server=quiesce, after_server=release)
        log.info("bookie %s stopped", config.bookie_id)


if __name__ == "__main__":
    run_service("bookie", BookieEnv, main)
