"""Placement settings (QUIRE_PLACEMENT_*, QUIRE_REGISTRY_TARGET, QUIRE_RESOLVER_ENABLED)."""

from __future__ import annotations

from dataclasses import dataclass

from quire_common.config import ConfigError, env_bool, env_float, env_int, env_list, env_str
from quire_placement.placement_policies import POLICIES, PolicySettings
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
    def from_env(cls) -> PlacementConfig:
        policy = env_str("QUIRE_PLACEMENT_POLICY", "default")
        if policy not in POLICIES:
            raise ConfigError(f"QUIRE_PLACEMENT_POLICY={policy!r} is not one of {', '.join(POLICIES)}")
        return cls(
            address=env_str("QUIRE_PLACEMENT_ADDRESS", "127.0.0.1:7002"),
            http_port=env_int("QUIRE_PLACEMENT_HTTP_PORT", 8002, minimum=0, maximum=65535),
            registry_target=env_str("QUIRE_REGISTRY_TARGET", "127.0.0.1:7001"),
            resolver_enabled=env_bool("QUIRE_RESOLVER_ENABLED", True),
            policy=PolicySettings(
                policy=policy,
                min_racks_per_write_quorum=env_int("QUIRE_PLACEMENT_MIN_RACKS_PER_WRITE_QUORUM", 2, minimum=1),
                enforce_min_racks=env_bool("QUIRE_PLACEMENT_ENFORCE_MIN_RACKS", False),
                regions=tuple(env_list("QUIRE_PLACEMENT_REGIONS", [])),
                local_region=env_str("QUIRE_PLACEMENT_LOCAL_REGION", ""),
                min_regions_for_durability=env_int("QUIRE_PLACEMENT_MIN_REGIONS_FOR_DURABILITY", 2, minimum=1),
                enforce_durability=env_bool("QUIRE_PLACEMENT_ENFORCE_DURABILITY", False),
            ),
            weights=WeightSettings(
                enabled=env_bool("QUIRE_PLACEMENT_DISK_WEIGHT_ENABLED", False),
                info_interval_seconds=env_float("QUIRE_PLACEMENT_BOOKIE_INFO_INTERVAL_SECONDS", 60.0, minimum=0.1),
                info_retry_interval_seconds=env_float(
                    "QUIRE_PLACEMENT_BOOKIE_INFO_RETRY_INTERVAL_SECONDS", 10.0, minimum=0.1
                ),
                info_timeout_seconds=env_float("QUIRE_PLACEMENT_BOOKIE_INFO_TIMEOUT_SECONDS", 5.0, minimum=0.1),
                max_weight_multiple=env_float("QUIRE_PLACEMENT_BOOKIE_MAX_WEIGHT_MULTIPLE", 3.0),
                load_factor_max_age_seconds=env_float(
                    "QUIRE_PLACEMENT_LOAD_FACTOR_MAX_AGE_SECONDS", 900.0, minimum=1.0
                ),
            ),
        )
