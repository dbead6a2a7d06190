"""Disk space and the read-only decision.

Usage is the fraction of the bookie's space in use: with a configured
capacity, the bookie's own data against that capacity (so a test can fill a
bookie by writing a few MB); without one, the filesystem's, counted as `df`
counts it: blocks reserved for another user (root's 5 % on ext4, or a host's
reservation) are neither used nor free, so usage reaches 100 % exactly when
the bookie can write no more. The bookie turns
read-only at `read_only_usage` and writable again only below the lower
`writable_usage`, so it does not flap around one threshold.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class DiskUsage:
    total_bytes: int
    free_bytes: int
    used_bytes: int  # what the bookie's own data takes

    @property
    def usage(self) -> float:
        if self.total_bytes <= 0:
            return 1.0
        return (self.total_bytes - self.free_bytes) / self.total_bytes


def directory_bytes(path: Path) -> int:
    """Bytes of every file under `path`; files vanishing meanwhile (RocksDB
    compaction) are skipped."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.stat(os.path.join(root, name)).st_size
            except FileNotFoundError:
                continue
    return total


def measure(data_dir: Path, capacity_bytes: int = 0) -> DiskUsage:
    """Total, free and used bytes of the data directory, capped by
    `capacity_bytes` when it is set (0 = the filesystem's usable size)."""
    filesystem = shutil.disk_usage(data_dir)
    return usage_of(filesystem.used, filesystem.free, directory_bytes(data_dir), capacity_bytes)


def usage_of(filesystem_used: int, filesystem_free: int, bookie_bytes: int, capacity_bytes: int) -> DiskUsage:
    """The bookie's disk from its filesystem's used bytes and the bytes free
    to it. The filesystem's total also counts reserved blocks the bookie
    cannot write, so it is left out."""
    usable = filesystem_used + filesystem_free
    if capacity_bytes <= 0:
        return DiskUsage(usable, filesystem_free, bookie_bytes)
    total = min(capacity_bytes, usable)
    free = max(0, min(total - bookie_bytes, filesystem_free))
    return DiskUsage(total, free, bookie_bytes)


FORCED_REASON = "read-only by configuration (QUIRE_BOOKIE_FORCE_READ_ONLY)"


@dataclass(frozen=True)
class ReadOnlyPolicy:
    read_only_usage: float = 0.95
    writable_usage: float = 0.90
    forced: bool = False

    def __post_init__(self) -> None:
        if not 0 < self.writable_usage <= self.read_only_usage <= 1:
            raise ValueError(
                f"need 0 < writable usage ({self.writable_usage}) <= read-only usage ({self.read_only_usage}) <= 1"
            )

    def decide(self, reason: str, disk: DiskUsage) -> str:
        """Why the bookie should be read-only now ("" = writable), given why
        it is read-only at present ("" = writable) and its disk."""
        if self.forced:
            return FORCED_REASON
        if disk.usage >= self.read_only_usage:
            return (
                f"disk usage {disk.usage:.1%} reached the read-only threshold {self.read_only_usage:.0%} "
                f"({disk.free_bytes} of {disk.total_bytes} bytes free)"
            )
        if reason and reason != FORCED_REASON and disk.usage >= self.writable_usage:
            return reason  # between the watermarks: stay as we are
        return ""
