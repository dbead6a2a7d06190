"""The placement service's composition root: its parts built from its
settings, started in order, and stopped in the reverse order once the gRPC
server has drained (each part's stop pushed on one exit stack as it starts)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

import grpc
from opentelemetry import metrics

from quire_common.admin_http import start_admin_server
from quire_common.bookie_resolver import BookieDirectory
from quire_common.process import ServiceProcess
from quire_common.server import create_server, mark_not_serving, mark_serving
from quire_common.tasks import cancel_and_wait
from quire_placement.config import PlacementConfig
from quire_placement.placement import Placer
from quire_placement.servicer import PlacementServicer
from quire_placement.settings import PlacementEnv
from quire_placement.tracker import WeightTracker
from quire_placement.tracker_sources import BookieInfoClient, RegistryLoadFactors
from quire_proto.placement.v1 import placement_pb2, placement_pb2_grpc
from quire_proto.registry.v1 import registry_pb2

log = logging.getLogger("quire_placement")
SERVICE_NAME = placement_pb2.DESCRIPTOR.services_by_name["PlacementService"].full_name
_poll_failures = metrics.get_meter("quire.placement").create_counter(
    "quire.placement.info_poll_failures", unit="{poll}", description="GetBookieInfo polls that failed"
)


class PlacementProcess(ServiceProcess):
    def __init__(self, settings: PlacementEnv) -> None:
        super().__init__()
        self.settings = settings
        self.config = PlacementConfig.from_settings(settings)

    async def _start(self) -> None:
        config, stops = self.config, self._stops
        # The live view of the registered bookies, fed by the registry's watch.
        directory = BookieDirectory(config.registry_target, resolver_enabled=config.resolver_enabled)
        directory.start()
        stops.push_async_callback(directory.close)
        loads = RegistryLoadFactors(config.registry_target)
        stops.push_async_callback(loads.close)
        info = BookieInfoClient(directory)
        stops.push_async_callback(info.close)
        tracker = WeightTracker(
            config.weights,
            info,
            loads,
            on_poll_failure=lambda bookie_id: _poll_failures.add(1, {"bookie_id": bookie_id}),
        )
        directory.on_change(tracker.wake)  # a joined bookie is polled at once

        async def writable() -> list[tuple[str, Mapping[str, str]]]:
            records = await directory.records(registry_pb2.BOOKIE_STATE_WRITABLE)
            return [(r.bookie_id, r.service_info.properties) for r in records]

        async def writable_ids() -> list[str]:
            return [bookie_id for bookie_id, _ in await writable()]

        placer = Placer(config.policy, tracker, writable)
        polling = asyncio.create_task(tracker.run(writable_ids), name="bookie-info-polling")
        stops.push_async_callback(cancel_and_wait, polling)

        def register(server: grpc.aio.Server) -> list[str]:
            placement_pb2_grpc.add_PlacementServiceServicer_to_server(PlacementServicer(placer), server)
            return [SERVICE_NAME]

        self.server, port, self.health = create_server(
            config.address, register, address_setting="QUIRE_PLACEMENT_ADDRESS", settings=self.settings.common.server
        )
        await mark_not_serving(self.health, [SERVICE_NAME])  # until the registry answers
        # The admin endpoint first: a port it cannot use stops the start before gRPC serves anything.
        admin = await start_admin_server(
            "QUIRE_PLACEMENT_HTTP_PORT",
            config.address,
            config.http_port,
            lambda: {
                "service": "placement",
                "policy": config.policy.policy,
                "disk_weight_placement_enabled": config.weights.enabled,
                "writable_bookies": sorted(directory.view.writable()),
                "unknown_bookie_ids": tracker.unknown(),
            },
            common=self.settings.common,
        )
        if admin is not None:
            stops.push_async_callback(admin.stop)
        await self.server.start()
        if not directory.view.complete:
            log.info("waiting for the registry at %s before serving (health NOT_SERVING)", config.registry_target)
            await directory.wait_synced()
        await mark_serving(self.health, [SERVICE_NAME])
        log.info(
            "placement serving on port %d (admin http %s), registry %s, policy %s, disk weights %s",
            port,
            admin.port if admin else "off",
            config.registry_target,
            config.policy.policy,
            "on" if config.weights.enabled else "off",
        )
