"""Entry point: python -m quire_gateway"""

from __future__ import annotations

import asyncio
import logging
import socket
from dataclasses import dataclass

from quire.gateway.v1 import blob_pb2, blob_pb2_grpc, ledger_pb2, ledger_pb2_grpc
from quire_api.errors import QuireError
from quire_common.admin_http import start_admin_server
from quire_common.auth import AuthSettings
from quire_common.bookie_resolver import BookieDirectory
from quire_common.call_limits import CallsPerCaller, ConnectionLimits, RequestIdle
from quire_common.config import ConfigError, env_bool, env_float, env_int, env_str
from quire_common.security import check_client_auth_mode, tls_settings
from quire_common.server import create_server, mark_not_serving, mark_serving, serve_until_signalled
from quire_common.service import run_service
from quire_common.tasks import cancel_and_wait
from quire_gateway import metrics
from quire_gateway.auditor import ROLE, Auditor, AuditorSettings
from quire_gateway.authn import GatewayAuthInterceptor
from quire_gateway.blobs import BlobSettings, BlobStore
from quire_gateway.entry_cache import DEFAULT_ENTRY_CACHE_BYTES, EntryCache
from quire_gateway.forwarding import Forwarder
from quire_gateway.handle import WriteSettings
from quire_gateway.leadership import RoleHolder
from quire_gateway.ledgers import LedgerManager
from quire_gateway.metadata_cache import DEFAULT_CAPACITY, LedgerMetadataCache
from quire_gateway.peers import GatewayPeers
from quire_gateway.reads import ReadSettings
from quire_gateway.recovery import RecoverySettings
from quire_gateway.remote import Remote
from quire_gateway.scrub import ScrubSettings
from quire_gateway.servicer import ActiveStreams, BlobServicer, LedgerServicer
from quire_gateway.sessions import GatewaySession

log = logging.getLogger("quire_gateway")
SERVICE_NAMES = [
    ledger_pb2.DESCRIPTOR.services_by_name["LedgerService"].full_name,
    blob_pb2.DESCRIPTOR.services_by_name["BlobService"].full_name,
]


def advertised_address(listen: str) -> str:
    """Where other gateways reach this one (QUIRE_GATEWAY_ADVERTISED_ADDRESS):
    by default the listen address, with this host's name for a wildcard host."""
    host, _, port = listen.rpartition(":")
    default = listen if host not in ("", "0.0.0.0", "[::]", "::") else f"{socket.gethostname()}:{port}"
    value = env_str("QUIRE_GATEWAY_ADVERTISED_ADDRESS", default)
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"QUIRE_GATEWAY_ADVERTISED_ADDRESS={value!r} is not host:port")
    return value


@dataclass(frozen=True)
class CallLimitSettings:
    idle: RequestIdle
    max_calls_per_caller: int
    connections: ConnectionLimits


def call_limit_settings() -> CallLimitSettings:
    """What one client call, caller and connection may hold (docs/security.md)."""
    return CallLimitSettings(
        idle=RequestIdle(
            first_message_seconds=env_float("QUIRE_GATEWAY_REQUEST_IDLE_SECONDS", 30.0, minimum=0.0),
            between_messages_seconds=env_float("QUIRE_GATEWAY_STREAM_IDLE_SECONDS", 0.0, minimum=0.0),
        ),
        max_calls_per_caller=env_int("QUIRE_GATEWAY_MAX_CALLS_PER_CALLER", 1000, minimum=0),
        connections=ConnectionLimits(
            max_streams_per_connection=env_int("QUIRE_GATEWAY_MAX_STREAMS_PER_CONNECTION", 256, minimum=0),
            keepalive_seconds=env_float("QUIRE_GATEWAY_KEEPALIVE_SECONDS", 60.0, minimum=0.0),
            max_connection_idle_seconds=env_float("QUIRE_GATEWAY_MAX_CONNECTION_IDLE_SECONDS", 600.0, minimum=0.0),
        ),
    )


async def main() -> None:
    limits = call_limit_settings()
    address = env_str("QUIRE_GATEWAY_ADDRESS", "127.0.0.1:7000")
    registry_target = env_str("QUIRE_REGISTRY_TARGET", "127.0.0.1:7001")
    placement_target = env_str("QUIRE_PLACEMENT_TARGET", "127.0.0.1:7002")
    settings = WriteSettings(
        max_inflight_bytes=env_int("QUIRE_GATEWAY_MAX_INFLIGHT_BYTES", 64 * 1024 * 1024, minimum=1024 * 1024),
        max_waiting_bytes=env_int("QUIRE_GATEWAY_MAX_WAITING_BYTES", 0, minimum=0),
        bookie_retry_seconds=env_float("QUIRE_GATEWAY_BOOKIE_RETRY_SECONDS", 2.0, minimum=0.0),
        add_timeout_seconds=env_float("QUIRE_GATEWAY_ADD_TIMEOUT_SECONDS", 5.0, minimum=0.1),
        max_calls_per_bookie=env_int("QUIRE_GATEWAY_MAX_CALLS_PER_BOOKIE", 2, minimum=1),
        delay_ensemble_change=env_bool("QUIRE_GATEWAY_DELAY_ENSEMBLE_CHANGE", False),
        bookie_quarantine_seconds=env_float(
            "QUIRE_GATEWAY_BOOKIE_QUARANTINE_SECONDS", WriteSettings.bookie_quarantine_seconds, minimum=0.0
        ),
        max_entry_bytes=env_int(
            "QUIRE_GATEWAY_MAX_ENTRY_BYTES",
            WriteSettings.max_entry_bytes,
            minimum=1,
            maximum=WriteSettings.max_entry_bytes,
        ),
        mark_replaced_copies=not env_bool("QUIRE_GATEWAY_FAULT_UNSAFE_NO_REPAIR_MARKS", False),
        explicit_lac_seconds=env_float(
            "QUIRE_GATEWAY_EXPLICIT_LAC_SECONDS", WriteSettings.explicit_lac_seconds, minimum=0.0
        ),
    )
    if not settings.mark_replaced_copies:
        log.warning("QUIRE_GATEWAY_FAULT_UNSAFE_NO_REPAIR_MARKS is set: replaced bookies' copies are NOT restored")
    recovery = RecoverySettings(
        timeout_seconds=env_float("QUIRE_GATEWAY_RECOVERY_TIMEOUT_SECONDS", 30.0, minimum=0.1),
        bookie_timeout_seconds=env_float("QUIRE_GATEWAY_RECOVERY_BOOKIE_TIMEOUT_SECONDS", 2.0, minimum=0.1),
    )
    reads = ReadSettings(
        speculative_delay_seconds=env_float("QUIRE_GATEWAY_SPECULATIVE_READ_SECONDS", 0.5, minimum=0.001),
        verify_digests=not env_bool("QUIRE_GATEWAY_FAULT_UNSAFE_SKIP_DIGEST_CHECK", False),
    )
    if not reads.verify_digests:
        log.warning("QUIRE_GATEWAY_FAULT_UNSAFE_SKIP_DIGEST_CHECK is set: reads are NOT verified; test use only")
    bookies = BookieDirectory(registry_target, resolver_enabled=env_bool("QUIRE_RESOLVER_ENABLED", True))
    bookies.start()
    remote = Remote(registry_target, placement_target, bookies)
    remote.start_health_checks(env_float("QUIRE_GATEWAY_DEPENDENCY_CHECK_SECONDS", 1.0, minimum=0.0))
    cache_ledgers = env_int("QUIRE_GATEWAY_METADATA_CACHE_LEDGERS", DEFAULT_CAPACITY, minimum=0)
    metadata_cache = LedgerMetadataCache(remote, cache_ledgers) if cache_ledgers > 0 else None
    if metadata_cache is not None:
        remote.metadata_observer = metadata_cache
        metrics.metadata_cache_stats = metadata_cache.stats
        metadata_cache.start()
    entry_cache = EntryCache(env_int("QUIRE_GATEWAY_ENTRY_CACHE_BYTES", DEFAULT_ENTRY_CACHE_BYTES, minimum=0))
    metrics.entry_cache_stats = entry_cache.status
    # Who this gateway is: in its registry session, as the owner of the ledgers it creates,
    # and when it campaigns for the auditor role. Unique per process.
    name = env_str("QUIRE_GATEWAY_NAME", f"{socket.gethostname()}:{address.rsplit(':', 1)[-1]}")
    if not 0 < len(name) <= 253 or not name.isprintable():
        raise ConfigError(f"QUIRE_GATEWAY_NAME={name!r} is not 1 to 253 printable characters")
    session = GatewaySession(
        remote,
        name,
        advertised_address(address),
        env_int("QUIRE_GATEWAY_SESSION_SECONDS", 10, minimum=2, maximum=300),
        trust_owners=env_bool("QUIRE_GATEWAY_FAULT_UNSAFE_IGNORE_OWNER_SESSION", False),
    )
    if session.trust_owners:
        log.warning("QUIRE_GATEWAY_FAULT_UNSAFE_IGNORE_OWNER_SESSION is set: a dead owner's ledgers are NEVER closed")
    forwarder = Forwarder(GatewayPeers(name, env_str("QUIRE_GATEWAY_PEER_TLS_NAME", "")))
    manager = LedgerManager(remote, settings, recovery, reads, metadata_cache, entry_cache, session)
    bookies.on_joined(lambda bookie_id, _address: manager.quarantine.lift(bookie_id, "it registered again"))
    blobs = BlobStore(
        manager,
        BlobSettings(
            ledgers_per_scope=env_int("QUIRE_GATEWAY_BLOB_LEDGERS_PER_SCOPE", 2, minimum=1),
            ledger_max_bytes=env_int("QUIRE_GATEWAY_BLOB_LEDGER_MAX_BYTES", 1024**3, minimum=1),
            ledger_max_age_seconds=env_float("QUIRE_GATEWAY_BLOB_LEDGER_MAX_AGE_SECONDS", 3600.0, minimum=1.0),
        ),
    )

    auditor_settings = AuditorSettings(
        interval_seconds=env_float("QUIRE_AUDITOR_INTERVAL_SECONDS", 30.0, minimum=0.0),
        lost_bookie_delay_seconds=env_float("QUIRE_AUDITOR_LOST_BOOKIE_DELAY_SECONDS", 60.0, minimum=0.0),
        lease_seconds=env_int("QUIRE_AUDITOR_LEASE_SECONDS", 10, minimum=2, maximum=300),
        scrub=ScrubSettings(
            entries_per_second=env_float("QUIRE_AUDITOR_SCRUB_ENTRIES_PER_SECOND", 2000.0, minimum=0.0),
            bytes_per_second=env_float("QUIRE_AUDITOR_SCRUB_BYTES_PER_SECOND", 8 * 1024 * 1024, minimum=1024.0),
            sample_entries=env_int("QUIRE_AUDITOR_SCRUB_SAMPLE_ENTRIES", 16, minimum=0),
            pass_interval_seconds=env_float("QUIRE_AUDITOR_SCRUB_PASS_INTERVAL_SECONDS", 60.0, minimum=1.0),
        ),
    )
    role = RoleHolder(remote, ROLE, name, auditor_settings.lease_seconds)
    auditor = Auditor(remote, bookies, auditor_settings, role)
    metrics.auditor_figures = lambda: {**auditor.state.figures(), "active": int(role.holds())}

    streams = ActiveStreams()

    def register(server):  # type: ignore[no-untyped-def]
        ledger_pb2_grpc.add_LedgerServiceServicer_to_server(LedgerServicer(manager, streams, forwarder), server)
        blob_pb2_grpc.add_BlobServiceServicer_to_server(BlobServicer(blobs, streams), server)
        return SERVICE_NAMES

    tls = tls_settings()
    auth = AuthSettings.from_env(tls.enabled)
    if tls.enabled and not auth.enabled:
        log.warning("QUIRE_AUTH_ENABLED=false: any client that completes the TLS handshake may do anything")
    client_auth = check_client_auth_mode(
        "QUIRE_GATEWAY_TLS_CLIENT_AUTH", env_str("QUIRE_GATEWAY_TLS_CLIENT_AUTH", "require")
    )
    check_before_read = not env_bool("QUIRE_GATEWAY_FAULT_UNSAFE_AUTH_AFTER_READ", False)
    if not check_before_read:
        log.warning("QUIRE_GATEWAY_FAULT_UNSAFE_AUTH_AFTER_READ is set: refused callers' messages are read first")
    interceptor = GatewayAuthInterceptor(
        auth,
        tls.enabled,
        idle=limits.idle,
        calls_per_caller=CallsPerCaller(limits.max_calls_per_caller),
        check_before_read=check_before_read,
    )
    server, port, health = create_server(
        address,
        register,
        internal=False,
        require_client_cert=client_auth == "require",
        auth_interceptors=[interceptor],
        address_setting="QUIRE_GATEWAY_ADDRESS",
        connection_limits=limits.connections,
    )
    await mark_not_serving(health, SERVICE_NAMES)  # until the registry answers
    # The admin endpoint first: a port it cannot use stops the start before gRPC serves anything.
    admin = await start_admin_server(
        "QUIRE_GATEWAY_HTTP_PORT",
        address,
        env_int("QUIRE_GATEWAY_HTTP_PORT", 8000, minimum=0, maximum=65535),
        lambda: {
            "service": "gateway",
            "registry": registry_target,
            "placement": placement_target,
            "dependencies": remote.dependencies(),
            "active_streams": streams.snapshot(),
            "open_write_handles": len(manager.handles),
            "entry_cache": entry_cache.status(),
            "metadata_cache": metadata_cache.status() if metadata_cache is not None else {"capacity": 0},
            "bookie_add_streams": remote.add_stream_stats(),
            "asyncio_tasks": len(asyncio.all_tasks()),
            "session": session.status(),
            "auditor": {**role.status(), **(auditor.state.figures() if role.holds() else {})},
        },
        streams.prometheus_text,
    )
    await server.start()
    if not bookies.view.complete:
        log.info("waiting for the registry at %s before serving (health NOT_SERVING)", registry_target)
        await bookies.wait_synced()
    await mark_serving(health, SERVICE_NAMES)
    log.info("gateway serving on port %d (registry %s, placement %s)", port, registry_target, placement_target)

    async def roll_over_blob_ledgers() -> None:
        while True:
            await asyncio.sleep(min(60.0, blobs.settings.ledger_max_age_seconds / 4))
            try:
                await blobs.roll_over_idle()
            except QuireError as exc:  # the registry may be restarting: try again next round
                log.warning("rolling over idle blob ledgers failed: %s", exc)

    roller = asyncio.create_task(roll_over_blob_ledgers())
    holding_session = asyncio.create_task(session.run())
    auditing = asyncio.create_task(auditor.run()) if auditor_settings.interval_seconds > 0 else None

    async def on_stop() -> None:
        if admin is not None:
            await admin.stop()
        await cancel_and_wait(roller)
        await cancel_and_wait(auditing)
        await manager.close_all()
        await cancel_and_wait(holding_session)
        await session.end()  # its ledgers are closed: let the session go now, not at lease expiry
        await forwarder.close()
        if metadata_cache is not None:
            await metadata_cache.close()
        await remote.close()
        await bookies.close()

    await serve_until_signalled(server, health, on_stop=on_stop)


if __name__ == "__main__":
    run_service("gateway", main)
