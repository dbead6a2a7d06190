"""LocalQuireCluster: the Docker-free twin of QuireContainer.

A thin adapter over `quire_client.cluster.LocalCluster` (what `quire cluster
up` and `make run` use): etcd and every service as processes on loopback, on
free ports, data in a temporary directory removed at stop.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Self

from quire_client.cluster import LocalCluster, Ports


class LocalQuireCluster:
    def __init__(
        self,
        data_dir: Path | None = None,
        *,
        bookies: int = 3,
        extra_env: dict[str, str] | None = None,
        startup_timeout_seconds: float = 60.0,
    ) -> None:
        self._data_dir = data_dir
        self._bookies = bookies
        self._extra_env = dict(extra_env or {})
        self._startup_timeout_seconds = startup_timeout_seconds
        self._own_data_dir = False
        self._cluster: LocalCluster | None = None

    def with_bookies(self, count: int) -> Self:
        if not 1 <= count <= 32:
            raise ValueError(f"bookies must be between 1 and 32, not {count}")
        self._require_stopped()
        self._bookies = count
        return self

    def with_env(self, name: str, value: str) -> Self:
        """A QUIRE_* setting for every service (docs/configuration.md)."""
        self._require_stopped()
        self._extra_env[name] = value
        return self

    def _require_stopped(self) -> None:
        if self._cluster is not None:
            raise RuntimeError("configure the cluster before start()")

    @property
    def cluster(self) -> LocalCluster:
        """The underlying LocalCluster, for kill(name), restart(name), log_path(name)."""
        if self._cluster is None:
            raise RuntimeError("the cluster is not started")
        return self._cluster

    def start(self) -> Self:
        self._require_stopped()
        if self._data_dir is None:
            self._data_dir = Path(tempfile.mkdtemp(prefix="quire-local-"))
            self._own_data_dir = True
        cluster = LocalCluster(self._data_dir, Ports.free(self._bookies), extra_env=self._extra_env)
        cluster.start(self._startup_timeout_seconds)  # waits for health; stops what it started on failure
        self._cluster = cluster
        return self

    def stop(self) -> None:
        if self._cluster is not None:
            self._cluster.stop()
            self._cluster = None
        if self._own_data_dir and self._data_dir is not None:
            shutil.rmtree(self._data_dir, ignore_errors=True)
            self._data_dir = None
            self._own_data_dir = False

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def get_gateway_target(self) -> str:
        return self.cluster.gateway_target

    def get_registry_target(self) -> str:
        return self.cluster.registry_target

    def get_placement_target(self) -> str:
        return self.cluster.placement_target

    def get_etcd_endpoint(self) -> str:
        return f"127.0.0.1:{self.cluster.ports.etcd}"

    def get_bookie_count(self) -> int:
        return self._bookies
