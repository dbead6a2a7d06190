"""Entry point: python -m quire_bookie"""

from __future__ import annotations

import logging

from quire.bookie.v1 import bookie_pb2, bookie_pb2_grpc
from quire.common.v1 import common_pb2
from quire_bookie.bookie import Bookie
from quire_bookie.config import BookieConfig
from quire_bookie.cookie import check_cookie
from quire_bookie.registration import RegistrationKeeper, RegistryCookies
from quire_bookie.servicer import BookieServicer
from quire_common.server import create_server, mark_serving, serve_until_signalled
from quire_common.service import run_service

log = logging.getLogger("quire_bookie")
SERVICE_NAME = bookie_pb2.DESCRIPTOR.services_by_name["BookieService"].full_name


def service_info(config: BookieConfig) -> common_pb2.BookieServiceInfo:
    """What this bookie advertises (BP-38)."""
    info = common_pb2.BookieServiceInfo()
    info.endpoints.add(id="rpc", host=config.advertised_host, port=config.port, protocol="bookie-rpc")
    if config.rack:
        info.properties["topology.rack"] = config.rack
    if config.region:
        info.properties["topology.region"] = config.region
    return info


async def main() -> None:
    config = BookieConfig.from_env()
    if config.unsafe_no_sync:
        log.warning(
            "QUIRE_BOOKIE_UNSAFE_NO_SYNC_LOSES_DATA is set: adds are acknowledged WITHOUT fsync; "
            "a crash or power loss will lose acknowledged entries"
        )
    # Identity first: never open, let alone serve, data that is not this bookie's.
    cookies = RegistryCookies(config.registry_target)
    try:
        await check_cookie(cookies, config.bookie_id, [config.data_dir])
    finally:
        await cookies.close()
    bookie = Bookie(
        config.data_dir,
        max_entry_bytes=config.max_entry_bytes,
        max_batch_bytes=config.group_commit_max_bytes,
        sync=not config.unsafe_no_sync,
    )
    await bookie.start()

    def register(server):  # type: ignore[no-untyped-def]
        bookie_pb2_grpc.add_BookieServiceServicer_to_server(BookieServicer(bookie), server)
        return [SERVICE_NAME]

    server, port, health = create_server(config.listen_address, register)
    await server.start()
    await mark_serving(health, [SERVICE_NAME])
    keeper = RegistrationKeeper(
        config.registry_target,
        config.bookie_id,
        service_info(config),
        config.registration_ttl_seconds,
        lambda: bookie.read_only,
    )
    keeper.start()
    log.info("bookie %s serving on port %d, data in %s", config.bookie_id, port, config.data_dir)

    async def on_stop() -> None:
        await keeper.stop()
        await bookie.close()

    await serve_until_signalled(server, health, on_stop=on_stop)


if __name__ == "__main__":
    run_service("bookie", main)
