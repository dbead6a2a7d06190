"""Placement's configuration: its settings (quire_placement.settings) turned
into what the placement code takes."""

from __future__ import annotations

from dataclasses import dataclass

from quire_placement.placement_policies import PolicySettings
from quire_placement.settings import PlacementEnv
from quire_placement.tracker import WeightSettings


@dataclass(frozen=True)
class PlacementConfig:
    address: str
    http_port: int  # 0: no admin HTTP endpoint
    registry_target: str
    resolver_enabled: bool
    policy: PolicySettings
    weights: WeightSettings

    @classmethod
    def from_settings(cls, env: PlacementEnv) -> PlacementConfig:
        return cls(
            address=env.address,
            http_port=env.http_port,
            registry_target=env.registry_target,
            resolver_enabled=env.resolver_enabled,
            policy=PolicySettings(
                policy=env.policy,
                min_racks_per_write_quorum=env.min_racks_per_write_quorum,
                enforce_min_racks=env.enforce_min_racks,
                regions=env.regions,
                local_region=env.local_region,
                min_regions_for_durability=env.min_regions_for_durability,
                enforce_durability=env.enforce_durability,
            ),
            weights=WeightSettings(
                enabled=env.disk_weight_enabled,
                info_interval_seconds=env.bookie_info_interval_seconds,
                info_retry_interval_seconds=env.bookie_info_retry_interval_seconds,
                info_timeout_seconds=env.bookie_info_timeout_seconds,
                max_weight_multiple=env.bookie_max_weight_multiple,
                load_factor_max_age_seconds=env.load_factor_max_age_seconds,
            ),
        )
