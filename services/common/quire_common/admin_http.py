"""Each service's admin HTTP endpoint: `GET /status` (JSON) and `GET /metrics`
(Prometheus text format 0.0.4), plus whatever routes a service adds.

A small asyncio HTTP/1.0-style server from the standard library: a few
read-only GET routes do not justify a web framework dependency.
`/metrics` always carries the process's OpenTelemetry metrics
(quire_common.telemetry.prometheus_text); a service may put its own lines
before them.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import Any

from quire_common.config import ConfigError
from quire_common.telemetry import prometheus_text

log = logging.getLogger(__name__)

MAX_REQUEST_LINE_BYTES = 8192
PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed"}


class AdminServer:
    def __init__(
        self,
        setting: str,
        host: str,
        port: int,
        status: Callable[[], dict[str, Any]],
        extra_metrics: Callable[[], str] | None = None,
    ) -> None:
        """`setting` names the variable that chose the port, for the message
        when it cannot be used."""
        self._setting = setting
        self._host, self._port = host, port
        self._status = status
        self._extra_metrics = extra_metrics
        self._server: asyncio.Server | None = None
        self.port = 0

    async def start(self) -> None:
        try:
            self._server = await asyncio.start_server(self._handle, self._host, self._port)
        except OSError as exc:
            raise ConfigError(
                f"{self._setting}: cannot listen on {self._host}:{self._port} ({exc.strerror or exc}); "
                "choose another port, or 0 to turn the admin endpoint off"
            ) from None
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def metrics(self) -> bytes:
        own = self._extra_metrics() if self._extra_metrics is not None else ""
        return own.encode() + prometheus_text()

    def _route(self, method: str, path: str) -> tuple[int, str, bytes]:
        if method != "GET":
            return 405, "text/plain", b"only GET\n"
        path = path.split("?", 1)[0]
        if path == "/status":
            return 200, "application/json", (json.dumps(self._status(), indent=2) + "\n").encode()
        if path == "/metrics":
            return 200, PROMETHEUS_CONTENT_TYPE, self.metrics()
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
            writer.write(
                f"HTTP/1.1 {code} {_REASONS[code]}\r\nContent-Type: {kind}\r\nContent-Length: {len(body)}\r\n"
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


async def start_admin_server(
    setting: str,
    grpc_address: str,
    port: int,
    status: Callable[[], dict[str, Any]],
    extra_metrics: Callable[[], str] | None = None,
) -> AdminServer | None:
    """The admin endpoint on the gRPC listener's host, or None when `port` is
    0 (turned off)."""
    if not port:
        return None
    server = AdminServer(setting, grpc_address.rsplit(":", 1)[0], port, status, extra_metrics)
    await server.start()
    return server
