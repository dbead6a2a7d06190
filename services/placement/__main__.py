"""Entry point: python -m quire_placement"""

from __future__ import annotations

import logging

from quire.placement.v1 import placement_pb2, placement_pb2_grpc
from quire_common.bookies import BookieDirectory
from quire_common.config import env_bool, env_str
from quire_common.server import create_server, mark_serving, serve_until_signalled
from quire_common.service import run_service
from quire_placement.servicer import PlacementServicer

log = logging.getLogger("quire_placement")
SERVICE_NAME = placement_pb2.DESCRIPTOR.services_by_name["PlacementService"].full_name


async def main() -> None:
    address = env_str("QUIRE_PLACEMENT_ADDRESS", "127.0.0.1:7002")
    registry_target = env_str("QUIRE_REGISTRY_TARGET", "127.0.0.1:7001")
    # The live view of the registered bookies, fed by the registry's watch.
    directory = BookieDirectory(registry_target, resolver_enabled=env_bool("QUIRE_RESOLVER_ENABLED", True))
    directory.start()

    def register(server):  # type: ignore[no-untyped-def]
        placement_pb2_grpc.add_PlacementServiceServicer_to_server(PlacementServicer(directory), server)
        return [SERVICE_NAME]

    server, port, health = create_server(address, register)
    await server.start()
    await mark_serving(health, [SERVICE_NAME])
    log.info("placement serving on port %d, registry %s", port, registry_target)
    await serve_until_signalled(server, health, on_stop=directory.close)


if __name__ == "__main__":
    run_service("placement", main)
