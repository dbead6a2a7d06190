"""Entry point: python -m quire_gateway"""

from __future__ import annotations

import asyncio
import logging
import socket

from quire.admin.v1 import admin_pb2, admin_pb2_grpc
from quire.gateway.v1 import blob_pb2, blob_pb2_grpc, ledger_pb2, ledger_pb2_grpc
from quire_api.errors import QuireError
from quire_common.admin_http import start_admin_server
from quire_common.auth import AuthSettings
from quire_common.bookie_resolver import BookieDirectory
from quire_common.call_limits import CallsPerCaller
from quire_common.config import ConfigError
from quire_common.security import TlsSettings, certificate_not_after, tls_settings
from quire_common.server import create_server, mark_not_serving, mark_serving, serve_until_signalled
from quire_common.service import run_service
from quire_common.tasks import cancel_and_wait
from quire_gateway import metrics
from quire_gateway.admin import AdminOperations
from quire_gateway.admin_servicer import AdminServicer
from quire_gateway.auditor import ROLE, Auditor
from quire_gateway.authn import GatewayAuthInterceptor
from quire_gateway.blobs import BlobStore
from quire_gateway.config import (
    advertised_address,
    auditor_settings,
    blob_settings,
    connection_limits,
    read_settings,
    recovery_settings,
    request_idle,
    write_settings,
)
from quire_gateway.forwarding import Forwarder
from quire_gateway.leadership import RoleHolder
from quire_gateway.ledgers import LedgerManager
from quire_gateway.metadata_cache import LedgerMetadataCache
from quire_gateway.peers import GatewayPeers
from quire_gateway.read.entry_cache import EntryCache
from quire_gateway.remote import Remote
from quire_gateway.servicer import ActiveStreams, BlobServicer, LedgerServicer
from quire_gateway.sessions import GatewaySession
from quire_gateway.settings import GatewayEnv

log = logging.getLogger("quire_gateway")
SERVICE_NAMES = [
    ledger_pb2.DESCRIPTOR.services_by_name["LedgerService"].full_name,
    blob_pb2.DESCRIPTOR.services_by_name["BlobService"].full_name,
    admin_pb2.DESCRIPTOR.services_by_name["AdminService"].full_name,
]


async def main(env: GatewayEnv) -> None:
    address = env.address
    registry_target = env.registry_target
    placement_target = env.placement_target
    settings = write_settings(env)
    if not settings.mark_replaced_copies:
        log.warning("QUIRE_GATEWAY_FAULT_UNSAFE_NO_REPAIR_MARKS is set: replaced bookies' copies are NOT restored")
    recovery = recovery_settings(env)
    reads = read_settings(env)
    if not reads.verify_digests:
        log.warning("QUIRE_GATEWAY_FAULT_UNSAFE_SKIP_DIGEST_CHECK is set: reads are NOT verified; test use only")
    if not reads.read_your_writes:
        log.warning("QUIRE_GATEWAY_FAULT_UNSAFE_NO_READ_YOUR_WRITES is set: acknowledged entries may not be readable")
    bookies = BookieDirectory(registry_target, resolver_enabled=env.resolver_enabled)
    bookies.start()
    remote = Remote(registry_target, placement_target, bookies)
    remote.start_health_checks(env.dependency_check_seconds)
    cache_ledgers = env.metadata_cache_ledgers
    metadata_cache = LedgerMetadataCache(remote, cache_ledgers) if cache_ledgers > 0 else None
    if metadata_cache is not None:
        remote.metadata_observer = metadata_cache
        metrics.metadata_cache_stats = metadata_cache.stats
        metadata_cache.start()
    entry_cache = EntryCache(env.entry_cache_bytes)
    metrics.entry_cache_stats = entry_cache.status
    # Who this gateway is: in its registry session, as the owner of the ledgers it creates,
    # and when it campaigns for the auditor role. Unique per process.
    name = env.name or f"{socket.gethostname()}:{address.rsplit(':', 1)[-1]}"
    if not 0 < len(name) <= 253 or not name.isprintable():
        raise ConfigError(f"QUIRE_GATEWAY_NAME={name!r} is not 1 to 253 printable characters")
    session = GatewaySession(
        remote,
        name,
        advertised_address(address, env.advertised_address),
        env.session_seconds,
        trust_owners=env.fault_unsafe_ignore_owner_session,
        wait_for_previous_session=env.fault_wait_for_previous_session,
    )
    if session.trust_owners:
        log.warning("QUIRE_GATEWAY_FAULT_UNSAFE_IGNORE_OWNER_SESSION is set: a dead owner's ledgers are NEVER closed")
    forwarder = Forwarder(GatewayPeers(name, env.peer_tls_name))
    manager = LedgerManager(
        remote, settings, recovery, reads, metadata_cache, entry_cache, session, forwarder.last_add_confirmed
    )
    bookies.on_joined(lambda bookie_id, _address: manager.quarantine.lift(bookie_id, "it registered again"))
    blobs = BlobStore(
        manager,
        blob_settings(env),
    )

    auditor_config = auditor_settings(env.auditor)
    role = RoleHolder(remote, ROLE, name, auditor_config.lease_seconds)
    auditor = Auditor(remote, bookies, auditor_config, role)
    metrics.auditor_figures = lambda: {**auditor.state.figures(), "active": int(role.holds())}

    streams = ActiveStreams()
    tls = tls_settings()
    admin_operations = AdminOperations(
        remote,
        advertised_address(address, env.advertised_address),
        lambda: certificate_expiry(tls),
        gateway_name=name,
        peer_tls_name=env.peer_tls_name,
    )

    def register(server):  # type: ignore[no-untyped-def]
        ledger_pb2_grpc.add_LedgerServiceServicer_to_server(LedgerServicer(manager, streams, forwarder), server)
        blob_pb2_grpc.add_BlobServiceServicer_to_server(BlobServicer(blobs, streams), server)
        admin_pb2_grpc.add_AdminServiceServicer_to_server(AdminServicer(admin_operations), server)
        return SERVICE_NAMES

    unsafe_roles = env.fault_unsafe_roles_by_common_name
    auth = AuthSettings.from_settings(env.common.auth, tls.enabled, service_names_allowed=unsafe_roles)
    if unsafe_roles:
        log.warning(
            "QUIRE_GATEWAY_FAULT_UNSAFE_ROLES_BY_COMMON_NAME is set: any certificate's common name gets roles, "
            "whichever CA issued it"
        )
    elif auth.enabled and auth.cert_roles and tls.client_ca_path is None:
        raise ConfigError(
            "QUIRE_AUTH_CLIENT_CERT_ROLES needs QUIRE_TLS_CLIENT_CA: only the client CA vouches for client "
            "certificates (docs/security.md)"
        )
    if tls.enabled and not auth.enabled:
        log.warning("QUIRE_AUTH_ENABLED=false: any client that completes the TLS handshake may do anything")
    check_before_read = not env.fault_unsafe_auth_after_read
    if not check_before_read:
        log.warning("QUIRE_GATEWAY_FAULT_UNSAFE_AUTH_AFTER_READ is set: refused callers' messages are read first")
    interceptor = GatewayAuthInterceptor(
        auth,
        tls.enabled,
        idle=request_idle(env.call_limits),
        calls_per_caller=CallsPerCaller(env.call_limits.max_calls_per_caller),
        check_before_read=check_before_read,
        roles_by_common_name_only=unsafe_roles,
    )
    server, port, health = create_server(
        address,
        register,
        internal=False,
        require_client_cert=env.tls_client_auth == "require",
        auth_interceptors=[interceptor],
        address_setting="QUIRE_GATEWAY_ADDRESS",
        connection_limits=connection_limits(env.call_limits),
        settings=env.common.server,
    )
    await mark_not_serving(health, SERVICE_NAMES)  # until the registry answers
    # The admin endpoint first: a port it cannot use stops the start before gRPC serves anything.
    admin = await start_admin_server(
        "QUIRE_GATEWAY_HTTP_PORT",
        address,
        env.http_port,
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
        env.common,
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
    auditing = asyncio.create_task(auditor.run()) if auditor_config.interval_seconds > 0 else None

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


def certificate_expiry(tls: TlsSettings) -> list[tuple[str, float]]:
    """(role, notAfter) of the TLS files this gateway serves with, read now
    (a renewed file shows at once); [] without TLS. An unreadable file is
    left out: the quire.tls.certificate.not_after gauge and its log say why."""
    if not tls.enabled:
        return []
    files = [("service", tls.cert_path), ("ca", tls.ca_path), ("client_ca", tls.client_ca_path)]
    found = []
    for role, path in files:
        if path is None:
            continue
        try:
            found.append((role, certificate_not_after(path.read_bytes())))
        except (OSError, ValueError):
            continue
    return found


if __name__ == "__main__":
    run_service("gateway", GatewayEnv, main)
