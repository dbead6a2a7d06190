"""The bookie's admin HTTP endpoint (the `http` endpoint it advertises):
`GET /status` (JSON) and `GET /metrics` (Prometheus text format 0.0.4).

A small asyncio HTTP/1.0-style server from the standard library: two
read-only GET routes do not justify a web framework dependency. Every metric
the bookie exports is defined in `render_metrics`, in one place.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from quire_bookie.bookie import Bookie
from quire_common.config import ConfigError

log = logging.getLogger(__name__)

MAX_REQUEST_LINE_BYTES = 8192


def status(bookie: Bookie, bookie_id: str) -> dict[str, Any]:
    info = bookie.info()
    return {
        "bookie_id": bookie_id,
        "read_only": info.read_only,
        "read_only_reason": info.read_only_reason,
        "sync": "disabled (unsafe: acknowledged adds may be lost)" if info.sync_disabled else "fsync per group commit",
        "disk": {
            "total_bytes": info.total_disk_bytes,
            "free_bytes": info.free_disk_bytes,
            "used_bytes": info.used_bytes,
        },
        "load": {
            "adds_per_second": info.adds_per_second,
            "add_bytes_per_second": info.add_bytes_per_second,
            "sync_latency_ms": info.sync_latency_ms,
            "sync_latency_p50_ms": info.sync_latency_p50_ms,
            "sync_latency_p99_ms": info.sync_latency_p99_ms,
        },
        "ledgers": len(bookie.ledger_ids()),
    }


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def render_metrics(bookie: Bookie, bookie_id: str) -> str:
    info = bookie.info()
    counters = bookie.counters
    labels = f'{{bookie_id="{_label(bookie_id)}"}}'
    rows: list[tuple[str, str, str, float]] = [
        ("quire_bookie_adds_total", "counter", "Entries stored (acknowledged after a synced write).", counters.adds),
        ("quire_bookie_add_bytes_total", "counter", "Bytes of entries stored.", counters.add_bytes),
        ("quire_bookie_rejected_adds_total", "counter", "Add requests refused before storage.", counters.rejected_adds),
        ("quire_bookie_reads_total", "counter", "Read requests served.", counters.reads),
        ("quire_bookie_syncs_total", "counter", "Synced WriteBatches (group commits).", counters.flushes),
        ("quire_bookie_sync_seconds_total", "counter", "Time spent in synced writes.", counters.sync_seconds),
        ("quire_bookie_sync_latency_p50_seconds", "gauge", "Median synced write, last minute.",
         info.sync_latency_p50_ms / 1000),
        ("quire_bookie_sync_latency_p99_seconds", "gauge", "99th percentile synced write, last minute.",
         info.sync_latency_p99_ms / 1000),
        ("quire_bookie_disk_total_bytes", "gauge", "Capacity of the data directories.", info.total_disk_bytes),
        ("quire_bookie_disk_free_bytes", "gauge", "Free bytes of the data directories.", info.free_disk_bytes),
        ("quire_bookie_disk_used_bytes", "gauge", "Bytes the bookie's data takes.", info.used_bytes),
        ("quire_bookie_read_only", "gauge", "1 while the bookie refuses adds.", float(info.read_only)),
        ("quire_bookie_sync_disabled", "gauge", "1 when adds are acknowledged without fsync (unsafe).",
         float(info.sync_disabled)),
        ("quire_bookie_ledgers", "gauge", "Ledgers with state on this bookie.", len(bookie.ledger_ids())),
    ]  # fmt: skip
    lines = []
    for name, kind, text, value in rows:
        lines += [f"# HELP {name} {text}", f"# TYPE {name} {kind}", f"{name}{labels} {float(value)!r}"]
    return "\n".join(lines) + "\n"


class AdminServer:
    def __init__(self, bookie: Bookie, bookie_id: str, host: str, port: int) -> None:
        self._bookie = bookie
        self._bookie_id = bookie_id
        self._host = host
        self._port = port
        self._server: asyncio.Server | None = None
        self.port = 0

    async def start(self) -> None:
        try:
            self._server = await asyncio.start_server(self._handle, self._host, self._port)
        except OSError as exc:
            raise ConfigError(
                f"QUIRE_BOOKIE_HTTP_PORT: cannot listen on {self._host}:{self._port} ({exc.strerror or exc}); "
                "choose another port, or 0 to turn the admin endpoint off"
            ) from None
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def _route(self, method: str, path: str) -> tuple[int, str, bytes]:
        if method != "GET":
            return 405, "text/plain", b"only GET\n"
        path = path.split("?", 1)[0]
        if path == "/status":
            body = json.dumps(status(self._bookie, self._bookie_id), indent=2) + "\n"
            return 200, "application/json", body.encode()
        if path == "/metrics":
            return (
                200,
                "text/plain; version=0.0.4; charset=utf-8",
                render_metrics(self._bookie, self._bookie_id).encode(),
            )
        return 404, "text/plain", b"not found; try /status or /metrics\n"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request_line = await asyncio.wait_for(reader.readline(), 10)
            while (await asyncio.wait_for(reader.readline(), 10)) not in (b"\r\n", b"\n", b""):
                pass  # headers are not needed
            parts = request_line.decode("latin-1").split()
            if len(parts) < 2 or len(request_line) > MAX_REQUEST_LINE_BYTES:
                code, kind, body = 400, "text/plain", b"bad request\n"
            else:
                code, kind, body = self._route(parts[0], parts[1])
            reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed"}[code]
            writer.write(
                f"HTTP/1.1 {code} {reason}\r\nContent-Type: {kind}\r\nContent-Length: {len(body)}\r\n"
                "Connection: close\r\n\r\n".encode()
                + body
            )
            await writer.drain()
        except (TimeoutError, ConnectionError) as exc:
            log.debug("admin request failed: %s", exc)
        except Exception as exc:
            log.error("admin request failed", exc_info=exc)
        finally:
            writer.close()
