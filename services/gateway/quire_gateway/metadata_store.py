"""Ledger metadata as the gateway's domain reads, changes and follows it: the
interfaces, and the store used when there is no metadata cache.

ClusterCalls (cluster_calls.py) makes the registry's calls. The metadata cache
(metadata_cache.py) is a layer in front of them with the same interface:
what goes through it, it keeps. The write handles, recovery, readers, the
auditor and the ledger operations (ledgers.py) are handed one
`LedgerMetadataStore` (the cache, or `RegistryMetadata` when it is off), so
nothing tells the cache behind a caller's back.
"""

from __future__ import annotations

import enum
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Protocol

from quire_api.ids import LedgerId
from quire_proto.common.v1 import common_pb2


class MetadataStore(Protocol):
    """Reading and compare-and-swapping a ledger's record in the registry:
    what the update loop (metadata_updates.py) needs."""

    async def get_ledger_metadata(self, ledger_id: LedgerId) -> tuple[common_pb2.LedgerMetadata, int]:
        """The registry's record and version, read now."""
        ...

    async def update_ledger_metadata(
        self, ledger_id: LedgerId, metadata: common_pb2.LedgerMetadata, expected_version: int
    ) -> int:
        """Compare-and-swap: the new version, or Aborted on a conflict."""
        ...


class LedgerMetadataStore(MetadataStore, Protocol):
    """Every ledger metadata call of the gateway's domain but creates and
    listings (which no cache keeps)."""

    async def delete_ledger_metadata(self, ledger_id: LedgerId) -> None: ...

    async def recent_ledger_metadata(self, ledger_id: LedgerId) -> tuple[common_pb2.LedgerMetadata, int]:
        """The record and version from a cache when it can be trusted
        (metadata_cache.py says when), else the registry's. Writers
        compare-and-swap against what they read and re-read on a conflict, so
        a cached version costs them at most one retry. The object may be
        shared: copy it before changing it."""
        ...

    def cached_ledger_metadata(self, ledger_id: LedgerId) -> tuple[common_pb2.LedgerMetadata, int] | None:
        """What recent_ledger_metadata answers when a cache holds it and it
        can be trusted now; None when that answer would need the registry.
        For readers that answer at once when everything is at hand."""
        ...


class ChangeKind(enum.Enum):
    STARTED = "started"  # the stream resumes (or starts from now) after `revision`
    PUT = "put"  # a ledger's record at version `revision`
    DELETED = "deleted"  # a ledger's record was deleted at `revision`
    RESET = "reset"  # changes up to `revision` may have been missed
    PROGRESS = "progress"  # nothing to report; every change up to `revision` was sent


@dataclass(frozen=True, slots=True)
class MetadataChange:
    """One message of the registry's ledger metadata watch."""

    kind: ChangeKind
    revision: int
    ledger_id: LedgerId | None = None
    metadata: common_pb2.LedgerMetadata | None = None  # PUT only; None for a record that does not parse


class MetadataSource(MetadataStore, Protocol):
    """The registry's ledger metadata calls and its watch (ClusterCalls): what a
    metadata store stands in front of."""

    async def delete_ledger_metadata(self, ledger_id: LedgerId) -> None: ...

    def watch_ledger_metadata(
        self, start_revision: int, heartbeat_seconds: float
    ) -> AsyncGenerator[MetadataChange, None]: ...


class RegistryMetadata:
    """No cache (QUIRE_GATEWAY_METADATA_CACHE_LEDGERS=0): every call is the registry's."""

    def __init__(self, source: MetadataSource) -> None:
        self._source = source

    async def get_ledger_metadata(self, ledger_id: LedgerId) -> tuple[common_pb2.LedgerMetadata, int]:
        return await self._source.get_ledger_metadata(ledger_id)

    async def update_ledger_metadata(
        self, ledger_id: LedgerId, metadata: common_pb2.LedgerMetadata, expected_version: int
    ) -> int:
        return await self._source.update_ledger_metadata(ledger_id, metadata, expected_version)

    async def delete_ledger_metadata(self, ledger_id: LedgerId) -> None:
        await self._source.delete_ledger_metadata(ledger_id)

    async def recent_ledger_metadata(self, ledger_id: LedgerId) -> tuple[common_pb2.LedgerMetadata, int]:
        return await self._source.get_ledger_metadata(ledger_id)

    def cached_ledger_metadata(self, ledger_id: LedgerId) -> tuple[common_pb2.LedgerMetadata, int] | None:
        return None
