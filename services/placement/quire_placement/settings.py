"""Placement's settings (QUIRE_PLACEMENT_*, QUIRE_REGISTRY_TARGET,
QUIRE_RESOLVER_ENABLED), declared once: read at start, rendered into
docs/configuration.md."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from quire_common.config import setting
from quire_common.settings import CommonEnv, registry_target_setting, resolver_enabled_setting
from quire_placement.placement_policies import POLICIES

PLACEMENT = "placement"
SECTION = "Placement"


@dataclass(frozen=True)
class PlacementEnv:
    address: str = setting(
        "QUIRE_PLACEMENT_ADDRESS", "127.0.0.1:7002", "listen address", services=PLACEMENT, section=SECTION
    )
    http_port: int = setting(
        "QUIRE_PLACEMENT_HTTP_PORT",
        8002,
        "admin HTTP port (`/status`, `/metrics`); 0 turns it off",
        services=PLACEMENT,
        section=SECTION,
        minimum=0,
        maximum=65535,
    )
    registry_target: str = registry_target_setting()
    resolver_enabled: bool = resolver_enabled_setting()
    policy: str = setting(
        "QUIRE_PLACEMENT_POLICY",
        "default",
        "`default`, `rack-aware` or `region-aware`; a ledger's custom metadata `placement.policy` overrides it",
        services=PLACEMENT,
        section=SECTION,
        choices=POLICIES,
    )
    min_racks_per_write_quorum: int = setting(
        "QUIRE_PLACEMENT_MIN_RACKS_PER_WRITE_QUORUM",
        2,
        "racks every write quorum spans (capped by W and by the racks there are)",
        services=PLACEMENT,
        section=SECTION,
        minimum=1,
    )
    enforce_min_racks: bool = setting(
        "QUIRE_PLACEMENT_ENFORCE_MIN_RACKS",
        False,
        "refuse (UNAVAILABLE) instead of falling back when the rack rule cannot be met",
        services=PLACEMENT,
        section=SECTION,
    )
    regions: tuple[str, ...] = setting(
        "QUIRE_PLACEMENT_REGIONS",
        (),
        "comma-separated region order; unset: the regions the bookies name",
        services=PLACEMENT,
        section=SECTION,
    )
    local_region: str = setting(
        "QUIRE_PLACEMENT_LOCAL_REGION",
        "",
        "the region placed first (it gets the larger share)",
        services=PLACEMENT,
        section=SECTION,
    )
    min_regions_for_durability: int = setting(
        "QUIRE_PLACEMENT_MIN_REGIONS_FOR_DURABILITY",
        2,
        "regions a write quorum must span, checked against W and A",
        services=PLACEMENT,
        section=SECTION,
        minimum=1,
    )
    enforce_durability: bool = setting(
        "QUIRE_PLACEMENT_ENFORCE_DURABILITY",
        False,
        "refuse instead of falling back when the region rule cannot be met",
        services=PLACEMENT,
        section=SECTION,
    )
    disk_weight_enabled: bool = setting(
        "QUIRE_PLACEMENT_DISK_WEIGHT_ENABLED",
        False,
        "BP-2 `disk_weight_placement_enabled`: draw bookies in proportion to free space",
        services=PLACEMENT,
        section=SECTION,
    )
    bookie_info_interval_seconds: float = setting(
        "QUIRE_PLACEMENT_BOOKIE_INFO_INTERVAL_SECONDS",
        60.0,
        "BP-2 `bookie_info_interval_s`: how often every writable bookie's GetBookieInfo is polled",
        services=PLACEMENT,
        section=SECTION,
        unit="seconds",
        minimum=0.1,
    )
    bookie_info_retry_interval_seconds: float = setting(
        "QUIRE_PLACEMENT_BOOKIE_INFO_RETRY_INTERVAL_SECONDS",
        10.0,
        "BP-2 `bookie_info_retry_interval_s`: retry interval for a bookie whose info could not be read",
        services=PLACEMENT,
        section=SECTION,
        unit="seconds",
        minimum=0.1,
    )
    bookie_info_timeout_seconds: float = setting(
        "QUIRE_PLACEMENT_BOOKIE_INFO_TIMEOUT_SECONDS",
        5.0,
        "BP-2 `bookie_info_timeout_s`: deadline of one GetBookieInfo",
        services=PLACEMENT,
        section=SECTION,
        unit="seconds",
        minimum=0.1,
    )
    bookie_max_weight_multiple: float = setting(
        "QUIRE_PLACEMENT_BOOKIE_MAX_WEIGHT_MULTIPLE",
        3.0,
        "BP-2 `bookie_max_weight_multiple`: cap at this multiple of the median weight; `<= 0` no cap",
        services=PLACEMENT,
        section=SECTION,
    )
    load_factor_max_age_seconds: float = setting(
        "QUIRE_PLACEMENT_LOAD_FACTOR_MAX_AGE_SECONDS",
        900.0,
        "a telemetry load factor older than this counts as 1",
        services=PLACEMENT,
        section=SECTION,
        unit="seconds",
        minimum=1.0,
    )
    common: CommonEnv = dataclasses.field(default_factory=CommonEnv)
