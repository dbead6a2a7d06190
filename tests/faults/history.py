"""A Jepsen-style history of client operations, and self-checking payloads.

Every operation is recorded as invoke, then ok, fail or unknown (a deadline
or a broken stream is *unknown*: the write may or may not have been stored).
Payloads carry (writer, ledger, index, nonce) and a SHA-256 prefix over all
of it, so any read can be validated on its own.
"""

from __future__ import annotations

import hashlib
import random
import struct
import threading
import time
from dataclasses import dataclass, field
from typing import Any

MAGIC = b"QFP1"
# magic | writer id | scope | ledger | index | nonce | filler ... | sha256[:16]
_HEADER = struct.Struct(">4sIQQQQ")
_CHECK_BYTES = 16


def make_payload(rng: random.Random, writer: int, scope: int, ledger: int, index: int, size_bytes: int = 1024) -> bytes:
    head = _HEADER.pack(MAGIC, writer, scope, ledger, index, rng.getrandbits(64))
    filler = rng.randbytes(max(0, size_bytes - len(head) - _CHECK_BYTES))
    body = head + filler
    return body + hashlib.sha256(body).digest()[:_CHECK_BYTES]


@dataclass(frozen=True)
class PayloadFacts:
    writer: int
    scope: int
    ledger: int
    index: int


def check_payload(data: bytes) -> PayloadFacts | None:
    """The facts a payload carries, or None when its bytes are wrong."""
    if len(data) < _HEADER.size + _CHECK_BYTES:
        return None
    body, check = data[:-_CHECK_BYTES], data[-_CHECK_BYTES:]
    if hashlib.sha256(body).digest()[:_CHECK_BYTES] != check:
        return None
    magic, writer, scope, ledger, index, _ = _HEADER.unpack_from(body)
    if magic != MAGIC:
        return None
    return PayloadFacts(writer, scope, ledger, index)


@dataclass
class Event:
    kind: str  # "add", "read", "lac", "meta", "fence"
    phase: str  # "invoke", "ok", "fail", "unknown"
    ledger: str
    time: float
    process: int = 0
    value: dict[str, Any] = field(default_factory=dict)


class History:
    """Thread-safe, append-only list of events."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.events: list[Event] = []

    def record(self, kind: str, phase: str, ledger: str, process: int = 0, **value: Any) -> Event:
        event = Event(kind, phase, ledger, time.monotonic(), process, value)
        with self._lock:
            self.events.append(event)
        return event

    def of(self, kind: str, phase: str | None = None) -> list[Event]:
        with self._lock:
            return [e for e in self.events if e.kind == kind and (phase is None or e.phase == phase)]
