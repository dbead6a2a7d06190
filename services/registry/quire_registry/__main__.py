"""Entry point: python -m quire_registry"""

from __future__ import annotations

import asyncio
import logging
from contextlib import AsyncExitStack

import grpc

from quire_api.backoff import Backoff
from quire_api.errors import Unavailable
from quire_common.admin_http import start_admin_server
from quire_common.server import create_server, mark_serving, serve_until_signalled
from quire_common.service import run_service
from quire_proto.registry.v1 import registry_pb2, registry_pb2_grpc
from quire_registry.config import RegistryConfig
from quire_registry.keys import Keys
from quire_registry.registry import Registry
from quire_registry.servicer import RegistryServicer
from quire_registry.settings import RegistryEnv
from quire_registry.store import EtcdStore

log = logging.getLogger("quire_registry")
SERVICE_NAME = registry_pb2.DESCRIPTOR.services_by_name["RegistryService"].full_name


async def connect(config: RegistryConfig) -> EtcdStore:
    """A connected store, waiting as long as it takes for etcd to answer (a
    whole cluster may start in any order). A wrong setting (credentials, the
    prefix's permissions) is a ConfigError and ends the start at once."""
    pauses = Backoff(first_seconds=0.2, longest_seconds=5.0).pauses()
    while True:
        store = EtcdStore(
            config.etcd_endpoints,
            config.etcd_timeout_seconds,
            config.etcd_access,
            Keys(config.cluster).root,
            recognise_own_commits=not config.unsafe_no_commit_check,
        )
        try:
            await store.connect()
            return store
        except Unavailable as exc:
            await store.close()
            pause = next(pauses)
            log.warning("waiting for etcd (not serving until it answers); retry in %.1fs: %s", pause, exc)
            await asyncio.sleep(pause)


def warn_of_unsafe_settings(config: RegistryConfig) -> None:
    """Say so in the log when a setting that weakens a guarantee is on."""
    if config.unsafe_no_commit_check:
        log.warning(
            "QUIRE_REGISTRY_FAULT_UNSAFE_NO_COMMIT_CHECK is set: a metadata write whose answer was lost is NOT "
            "recognised as committed (duplicate or orphaned ledgers, false errors); fault-suite use only"
        )
    if config.keep_ledger_passwords:
        log.warning(
            "QUIRE_REGISTRY_KEEP_LEDGER_PASSWORDS is set: ledger records in etcd keep the plaintext password "
            "for gateways of the previous version; unset it once every gateway is upgraded"
        )


def serve_registry(server: grpc.aio.Server, registry: Registry) -> list[str]:
    registry_pb2_grpc.add_RegistryServiceServicer_to_server(RegistryServicer(registry), server)
    return [SERVICE_NAME]


def status(config: RegistryConfig) -> dict[str, object]:
    """The admin endpoint's /status."""
    return {"service": "registry", "cluster": config.cluster, "etcd": config.etcd_endpoints}


async def main(settings: RegistryEnv) -> None:
    config = RegistryConfig.from_settings(settings)
    warn_of_unsafe_settings(config)
    stops = AsyncExitStack()  # run once the server has drained, last started first
    store = await connect(config)
    stops.push_async_callback(store.close)
    registry = Registry(
        store,
        config.cluster,
        config.bookie_ttl_seconds,
        recognise_request_ids=not config.unsafe_no_commit_check,
        keep_ledger_passwords=config.keep_ledger_passwords,
    )
    server, port, health = create_server(
        config.address,
        lambda server: serve_registry(server, registry),
        address_setting="QUIRE_REGISTRY_ADDRESS",
        settings=settings.common.server,
    )
    # The admin endpoint first: a port it cannot use stops the start before gRPC serves anything.
    admin = await start_admin_server(
        "QUIRE_REGISTRY_HTTP_PORT",
        config.address,
        config.http_port,
        lambda: status(config),
        common=settings.common,
    )
    if admin is not None:
        stops.push_async_callback(admin.stop)
    await server.start()
    await mark_serving(health, [SERVICE_NAME])
    log.info(
        "registry serving on port %d (admin http %s), etcd %s, cluster %s",
        port,
        admin.port if admin else "off",
        ",".join(config.etcd_endpoints),
        config.cluster,
    )
    await serve_until_signalled(server, health, on_stop=stops.aclose, before_drain=registry.stopping)


if __name__ == "__main__":
    run_service("registry", RegistryEnv, main)
