"""Bookie settings (QUIRE_BOOKIE_*, QUIRE_REGISTRY_TARGET)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from quire_common.config import ConfigError, env_bool, env_int, env_str
from quire_common.errors import InvalidArgument
from quire_common.ids import validate_bookie_id

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BookieConfig:
    listen_address: str
    advertised_host: str
    port: int
    bookie_id: str
    data_dir: Path
    registry_target: str
    max_entry_bytes: int
    group_commit_max_bytes: int
    registration_ttl_seconds: int
    rack: str
    region: str
    unsafe_no_sync: bool

    @classmethod
    def from_env(cls) -> BookieConfig:
        port = env_int("QUIRE_BOOKIE_PORT", 3181, minimum=1, maximum=65535)
        advertised_host = env_str("QUIRE_BOOKIE_ADVERTISED_HOST", "127.0.0.1")
        bookie_id = env_str("QUIRE_BOOKIE_ID", "") or f"{advertised_host}:{port}"
        try:
            validate_bookie_id(bookie_id)
        except InvalidArgument as exc:
            raise ConfigError(f"QUIRE_BOOKIE_ID: {exc}") from None
        unsafe_no_sync = env_bool("QUIRE_BOOKIE_UNSAFE_NO_SYNC_LOSES_DATA", False)
        return cls(
            listen_address=f"{env_str('QUIRE_BOOKIE_LISTEN_HOST', '127.0.0.1')}:{port}",
            advertised_host=advertised_host,
            port=port,
            bookie_id=bookie_id,
            data_dir=Path(env_str("QUIRE_BOOKIE_DATA_DIR", f"data/bookie-{port}")).resolve(),
            registry_target=env_str("QUIRE_REGISTRY_TARGET", "127.0.0.1:7001"),
            max_entry_bytes=env_int("QUIRE_BOOKIE_MAX_ENTRY_BYTES", 5 * 1024 * 1024, minimum=1024),
            group_commit_max_bytes=env_int("QUIRE_BOOKIE_GROUP_COMMIT_MAX_BYTES", 4 * 1024 * 1024, minimum=4096),
            registration_ttl_seconds=env_int("QUIRE_BOOKIE_TTL_SECONDS", 10, minimum=2, maximum=300),
            rack=env_str("QUIRE_BOOKIE_RACK", ""),
            region=env_str("QUIRE_BOOKIE_REGION", ""),
            unsafe_no_sync=unsafe_no_sync,
        )
