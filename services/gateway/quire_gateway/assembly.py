"""The gateway's composition root: every part of a gateway process built from
its settings, wired together, started in order and stopped in the reverse
order (each part's stop is pushed on one exit stack as the part starts, so a
start that fails half way stops what it had started). The entry point
(`__main__.py`) only builds it, serves, and stops it."""

from __future__ import annotations

import asyncio
import logging
import socket
from dataclasses import dataclass
from typing import Any

import grpc

from quire_api.errors import QuireError
from quire_common.admin_http import start_admin_server
from quire_common.auth import AuthSettings
from quire_common.bookie_resolver import BookieDirectory
from quire_common.call_limits import CallsPerCaller
from quire_common.config import ConfigError
from quire_common.process import ServiceProcess
from quire_common.security import TlsSettings, certificate_not_after, tls_settings
from quire_common.server import create_server, mark_not_serving, mark_serving
from quire_common.tasks import cancel_and_wait
from quire_gateway import metrics
from quire_gateway.admin import AdminOperations
from quire_gateway.admin_servicer import AdminServicer
from quire_gateway.authn import GatewayAuthInterceptor
from quire_gateway.autorecovery.auditor import ROLE, Auditor
from quire_gateway.autorecovery.ledger_changes import LedgerChanges
from quire_gateway.blobs import BlobStore
from quire_gateway.cluster_calls import ClusterCalls
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
from quire_gateway.ledgers import LedgerOperations
from quire_gateway.metadata_cache import LedgerMetadataCache
from quire_gateway.metadata_store import LedgerMetadataStore, RegistryMetadata
from quire_gateway.ownership.forwarding import Forwarder
from quire_gateway.ownership.lease import GatewayLease
from quire_gateway.ownership.peers import GatewayPeers
from quire_gateway.ownership.router import WriteRouter
from quire_gateway.read.entry_cache import EntryCache, expire_idle_entries
from quire_gateway.roles import RoleHolder
from quire_gateway.servicer import (
    BLOB_SERVICE,
    LEDGER_SERVICE,
    ActiveStreams,
    BlobServicer,
    LedgerServicer,
    add_blob_servicer_to_server,
    add_ledger_servicer_to_server,
)
from quire_gateway.settings import GatewayEnv
from quire_proto.admin.v1 import admin_pb2, admin_pb2_grpc

log = logging.getLogger("quire_gateway")
SERVICE_NAMES = [
    LEDGER_SERVICE,
    BLOB_SERVICE,
    admin_pb2.DESCRIPTOR.services_by_name["AdminService"].full_name,
]


class GatewayProcess(ServiceProcess):
    """A gateway's parts, from its settings. `start()` builds and starts them
    and serves once the registry has answered; `stop()` (after the gRPC
    server has drained) stops them, last started first."""

    def __init__(self, env: GatewayEnv) -> None:
        super().__init__()
        self.env = env

    async def _start(self) -> None:
        warn_of_unsafe_settings(self.env)
        parts = self._build()
        self.server, port, self.health = create_server(
            self.env.address,
            parts.register,
            internal=False,
            require_client_cert=self.env.tls_client_auth == "require",
            auth_interceptors=[client_auth(self.env, parts.tls)],
            address_setting="QUIRE_GATEWAY_ADDRESS",
            connection_limits=connection_limits(self.env.call_limits),
            settings=self.env.common.server,
        )
        await mark_not_serving(self.health, SERVICE_NAMES)  # until the registry answers
        metrics.active_stream_counts = parts.streams.snapshot
        # The admin endpoint first: a port it cannot use stops the start before gRPC serves anything.
        admin = await start_admin_server(
            "QUIRE_GATEWAY_HTTP_PORT",
            self.env.address,
            self.env.http_port,
            parts.status,
            self.env.common,
        )
        await self.server.start()
        if not parts.bookies.view.complete:
            log.info("waiting for the registry at %s before serving (health NOT_SERVING)", self.env.registry_target)
            await parts.bookies.wait_synced()
        await mark_serving(self.health, SERVICE_NAMES)
        log.info(
            "gateway serving on port %d (registry %s, placement %s)",
            port,
            self.env.registry_target,
            self.env.placement_target,
        )
        self._start_background(parts)
        if admin is not None:
            self._stops.push_async_callback(admin.stop)

    def _build(self) -> _Parts:
        """Every part, wired; those that run on their own are started, and
        their stops pushed."""
        env, stops = self.env, self._stops
        bookies = BookieDirectory(env.registry_target, resolver_enabled=env.resolver_enabled)
        bookies.start()
        stops.push_async_callback(bookies.close)
        remote = ClusterCalls(env.registry_target, env.placement_target, bookies)
        stops.push_async_callback(remote.close)
        remote.start_health_checks(env.dependency_check_seconds)
        # Every ledger metadata call of the domain goes through this layer: the cache, in
        # front of ClusterCalls' calls, or ClusterCalls' calls alone.
        metadata_cache = None
        metadata_store: LedgerMetadataStore = RegistryMetadata(remote)
        if env.metadata_cache_ledgers > 0:
            metadata_cache = metadata_store = LedgerMetadataCache(remote, env.metadata_cache_ledgers)
            metadata_cache.start()
            stops.push_async_callback(metadata_cache.close)
        entry_cache = EntryCache(env.entry_cache_bytes, env.entry_cache_idle_seconds)
        metrics.metadata_cache_stats = metadata_cache.stats if metadata_cache is not None else None
        metrics.entry_cache_stats = entry_cache.status
        name = gateway_name(env)
        address = advertised_address(env.address, env.advertised_address)
        lease = GatewayLease(
            remote,
            name,
            address,
            env.session_seconds,
            trust_owners=env.fault_unsafe_ignore_owner_session,
            wait_for_previous_lease=env.fault_wait_for_previous_session,
        )
        forwarder = Forwarder(GatewayPeers(name, env.peer_tls_name))
        stops.push_async_callback(forwarder.close)
        ledgers = LedgerOperations(
            remote,
            write_settings(env),
            recovery_settings(env),
            read_settings(env),
            metadata_store,
            entry_cache,
            lease,
            forwarder.last_add_confirmed,
        )
        bookies.on_joined(lambda bookie_id, _address: ledgers.quarantine.lift(bookie_id, "it registered again"))
        auditor_config = auditor_settings(env.auditor)
        role = RoleHolder(remote, ROLE, name, auditor_config.lease_seconds)
        changes = LedgerChanges(metadata_cache) if metadata_cache is not None else None  # the cache's watch
        auditor = Auditor(remote, metadata_store, bookies, auditor_config, role, changes)
        metrics.auditor_figures = lambda: {**auditor.state.figures(), "active": int(role.holds())}
        tls = tls_settings()
        admin_operations = AdminOperations(
            remote, address, lambda: certificate_expiry(tls), gateway_name=name, peer_tls_name=env.peer_tls_name
        )
        return _Parts(
            env=env,
            bookies=bookies,
            remote=remote,
            metadata_cache=metadata_cache,
            entry_cache=entry_cache,
            lease=lease,
            forwarder=forwarder,
            ledgers=ledgers,
            blobs=BlobStore(ledgers, blob_settings(env)),
            role=role,
            auditor=auditor,
            auditing=auditor_config.interval_seconds > 0,
            streams=ActiveStreams(),
            tls=tls,
            admin_operations=admin_operations,
        )

    def _start_background(self, parts: _Parts) -> None:
        """The lease, the auditor, the blob roll-over and the entry cache's
        expiry. Their stops are pushed now, so that they run first: the
        lease ends once its ledgers are closed, and nothing new is audited
        or rolled over while they are."""
        stops = self._stops
        holding_lease = asyncio.create_task(parts.lease.run())
        stops.push_async_callback(parts.lease.end)  # its ledgers are closed: let it go now, not at lease expiry
        stops.push_async_callback(cancel_and_wait, holding_lease)
        stops.push_async_callback(parts.ledgers.close_all)
        auditing = asyncio.create_task(parts.auditor.run()) if parts.auditing else None
        stops.push_async_callback(cancel_and_wait, auditing)
        roller = asyncio.create_task(roll_over_blob_ledgers(parts.blobs))
        stops.push_async_callback(cancel_and_wait, roller)
        expiring = asyncio.create_task(expire_idle_entries(parts.entry_cache))
        stops.push_async_callback(cancel_and_wait, expiring)


@dataclass(frozen=True)
class _Parts:
    env: GatewayEnv
    bookies: BookieDirectory
    remote: ClusterCalls
    metadata_cache: LedgerMetadataCache | None
    entry_cache: EntryCache
    lease: GatewayLease
    forwarder: Forwarder
    ledgers: LedgerOperations
    blobs: BlobStore
    role: RoleHolder
    auditor: Auditor
    auditing: bool
    streams: ActiveStreams
    tls: TlsSettings
    admin_operations: AdminOperations

    def register(self, server: grpc.aio.Server) -> list[str]:
        add_ledger_servicer_to_server(
            LedgerServicer(self.ledgers, WriteRouter(self.ledgers, self.forwarder), self.streams), server
        )
        add_blob_servicer_to_server(BlobServicer(self.blobs, self.streams), server)
        admin_pb2_grpc.add_AdminServiceServicer_to_server(AdminServicer(self.admin_operations), server)
        return SERVICE_NAMES

    def status(self) -> dict[str, Any]:
        """The admin endpoint's /status."""
        metadata_cache, role = self.metadata_cache, self.role
        return {
            "service": "gateway",
            "registry": self.env.registry_target,
            "placement": self.env.placement_target,
            "dependencies": self.remote.dependencies(),
            "active_streams": self.streams.snapshot(),
            "open_write_handles": len(self.ledgers.handles),
            "entry_cache": self.entry_cache.status(),
            "metadata_cache": metadata_cache.status() if metadata_cache is not None else {"capacity": 0},
            "bookie_add_streams": self.remote.add_stream_stats(),
            "asyncio_tasks": len(asyncio.all_tasks()),
            "session": self.lease.status(),
            "auditor": {**role.status(), **(self.auditor.state.figures() if role.holds() else {})},
        }


async def roll_over_blob_ledgers(blobs: BlobStore) -> None:
    while True:
        await asyncio.sleep(min(60.0, blobs.settings.ledger_max_age_seconds / 4))
        try:
            await blobs.roll_over_idle()
        except QuireError as exc:  # the registry may be restarting: try again next round
            log.warning("rolling over idle blob ledgers failed: %s", exc)


def gateway_name(env: GatewayEnv) -> str:
    """Who this gateway is: in its registry lease, as the owner of the
    ledgers it creates, and when it campaigns for the auditor role. Unique
    per process."""
    name = env.name or f"{socket.gethostname()}:{env.address.rsplit(':', 1)[-1]}"
    if not 0 < len(name) <= 253 or not name.isprintable():
        raise ConfigError(f"QUIRE_GATEWAY_NAME={name!r} is not 1 to 253 printable characters")
    return name


def warn_of_unsafe_settings(env: GatewayEnv) -> None:
    """Say so in the log when a test-only setting that weakens a guarantee is on."""
    if not write_settings(env).mark_replaced_copies:
        log.warning("QUIRE_GATEWAY_FAULT_UNSAFE_NO_REPAIR_MARKS is set: replaced bookies' copies are NOT restored")
    reads = read_settings(env)
    if not reads.verify_digests:
        log.warning("QUIRE_GATEWAY_FAULT_UNSAFE_SKIP_DIGEST_CHECK is set: reads are NOT verified; test use only")
    if not reads.read_your_writes:
        log.warning("QUIRE_GATEWAY_FAULT_UNSAFE_NO_READ_YOUR_WRITES is set: acknowledged entries may not be readable")
    if env.fault_unsafe_ignore_owner_session:
        log.warning("QUIRE_GATEWAY_FAULT_UNSAFE_IGNORE_OWNER_SESSION is set: a dead owner's ledgers are NEVER closed")


def client_auth(env: GatewayEnv, tls: TlsSettings) -> GatewayAuthInterceptor:
    """Who may call the gateway, and how long a call may wait for its messages."""
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
    return GatewayAuthInterceptor(
        auth,
        tls.enabled,
        idle=request_idle(env.call_limits),
        calls_per_caller=CallsPerCaller(env.call_limits.max_calls_per_caller),
        check_before_read=check_before_read,
        roles_by_common_name_only=unsafe_roles,
    )


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
