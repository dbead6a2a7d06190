"""Each service's admin HTTP endpoint: `GET /status` (JSON) and `GET /metrics`
(Prometheus text format 0.0.4), plus whatever routes a service adds.

A small asyncio HTTP/1.0-style server from the standard library: a few
read-only GET routes do not justify a web framework dependency.

Exposure (docs/security.md): QUIRE_ADMIN_HTTP_ENABLED=false turns every
admin endpoint off, QUIRE_METRICS_ENABLED=false only /metrics. With TLS on
(not QUIRE_INSECURE_PLAINTEXT_DEV) the endpoint speaks HTTPS with the
service's certificate and every request needs `Authorization: Bearer <JWT>`
with the admin role on "*" (QUIRE_AUTH_JWT_KEY_FILE); in development mode it
is open unless a token key is configured.
`/status` always carries the build's version and revision
(quire_common.build_info); `/metrics` always carries the process's OpenTelemetry metrics
(quire_common.telemetry.prometheus_text), and nothing else: a service's
own figures are OpenTelemetry instruments too.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
from collections.abc import Callable
from typing import Any

from quire_api.errors import PermissionDenied, Unauthenticated
from quire_common.auth import ADMIN, AuthSettings
from quire_common.build_info import status_fields
from quire_common.config import ConfigError
from quire_common.security import tls_settings
from quire_common.settings import CommonEnv, common_settings
from quire_common.telemetry import prometheus_text

log = logging.getLogger(__name__)

MAX_REQUEST_LINE_BYTES = 8192
PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
}
MAX_HEADERS = 100


class AdminServer:
    def __init__(
        self,
        setting: str,
        host: str,
        port: int,
        status: Callable[[], dict[str, Any]],
        common: CommonEnv | None = None,
    ) -> None:
        """`setting` names the variable that chose the port, for the message
        when it cannot be used; `common` defaults to the process's settings."""
        common = common_settings() if common is None else common
        self._setting = setting
        self._host, self._port = host, port
        self._status = status
        self._server: asyncio.Server | None = None
        self._watcher: asyncio.Task[None] | None = None
        self.port = 0
        self.enabled = common.admin.enabled
        self.metrics_enabled = common.admin.metrics_enabled
        tls = tls_settings()
        self._ssl: ssl.SSLContext | None = None
        if tls.enabled:
            assert tls.cert_path and tls.key_path
            self._ssl = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            self._ssl.load_cert_chain(tls.cert_path, tls.key_path)
        # Only the token part of the auth settings applies here: certificates
        # are not asked for on this endpoint.
        auth = AuthSettings.from_settings(common.auth, tls.enabled, require_credentials=False)
        self._verifier = auth.verifier
        self._auth_required = tls.enabled or auth.verifier is not None
        if self.enabled and self._auth_required and self._verifier is None:
            log.warning(
                "%s: admin HTTP needs an admin bearer token but QUIRE_AUTH_JWT_KEY_FILE is not set; every "
                "request will be refused (set the key, or QUIRE_ADMIN_HTTP_ENABLED=false)",
                setting,
            )

    async def start(self) -> None:
        if not self.enabled:
            log.info("%s: admin HTTP turned off by QUIRE_ADMIN_HTTP_ENABLED", self._setting)
            return
        try:
            self._server = await asyncio.start_server(self._handle, self._host, self._port, ssl=self._ssl)
        except OSError as exc:
            raise ConfigError(
                f"{self._setting}: cannot listen on {self._host}:{self._port} ({exc.strerror or exc}); "
                "choose another port, or 0 to turn the admin endpoint off"
            ) from None
        self.port = self._server.sockets[0].getsockname()[1]
        if self._ssl is not None:
            self._watcher = asyncio.create_task(self._reload_certificate())

    async def _reload_certificate(self, interval_seconds: float = 1.0) -> None:
        """Load the certificate again when its files change: the context is
        shared, so new connections get the new one (no restart)."""
        tls = tls_settings()
        assert self._ssl is not None and tls.cert_path and tls.key_path
        seen = tls.mtimes()
        while True:
            await asyncio.sleep(interval_seconds)
            try:
                now = tls.mtimes()
                if now != seen:
                    self._ssl.load_cert_chain(tls.cert_path, tls.key_path)
                    seen = now
                    log.info("%s: admin HTTPS certificate reloaded", self._setting)
            except (OSError, ssl.SSLError) as exc:
                log.warning("%s: TLS files unreadable, keeping the current certificate: %s", self._setting, exc)

    async def stop(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def metrics(self) -> bytes:
        return prometheus_text()

    def _refusal(self, authorization: str | None) -> tuple[int, str, bytes] | None:
        """None when the request may proceed, else the 401/403 answer."""
        if not self._auth_required:
            return None
        try:
            if self._verifier is None:
                raise Unauthenticated("no token key configured (QUIRE_AUTH_JWT_KEY_FILE)")
            if not authorization:
                raise Unauthenticated("send 'Authorization: Bearer <token>' with the admin role")
            principal = AuthSettings(True, self._verifier, {}).authenticate(authorization, None)
            principal.require(ADMIN, None, "the admin HTTP endpoint")
        except Unauthenticated as exc:
            return 401, "text/plain", f"unauthenticated: {exc.message}\n".encode()
        except PermissionDenied as exc:
            return 403, "text/plain", f"permission denied: {exc.message}\n".encode()
        return None

    def _route(self, method: str, path: str, authorization: str | None = None) -> tuple[int, str, bytes]:
        if method != "GET":
            return 405, "text/plain", b"only GET\n"
        refusal = self._refusal(authorization)
        if refusal is not None:
            return refusal
        path = path.split("?", 1)[0]
        if path == "/status":
            status = {**self._status(), **status_fields()}
            return 200, "application/json", (json.dumps(status, indent=2) + "\n").encode()
        if path == "/metrics" and self.metrics_enabled:
            return 200, PROMETHEUS_CONTENT_TYPE, self.metrics()
        return 404, "text/plain", b"not found; try /status or /metrics\n"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            authorization = None
            try:
                request_line = await asyncio.wait_for(reader.readline(), 10)
                for _ in range(MAX_HEADERS):
                    header = await asyncio.wait_for(reader.readline(), 10)
                    if header in (b"\r\n", b"\n", b""):
                        break
                    name, _, value = header.decode("latin-1").partition(":")
                    if name.strip().lower() == "authorization":
                        authorization = value.strip()
            except ValueError:  # a line longer than the reader's limit (64 KiB)
                request_line = b""
            parts = request_line.decode("latin-1").split()
            if len(parts) < 2 or len(request_line) > MAX_REQUEST_LINE_BYTES:
                code, kind, body = 400, "text/plain", b"bad request\n"
            else:
                code, kind, body = self._route(parts[0], parts[1], authorization)
            writer.write(
                f"HTTP/1.1 {code} {_REASONS[code]}\r\nContent-Type: {kind}\r\nContent-Length: {len(body)}\r\n"
                "Connection: close\r\n\r\n".encode()
                + body
            )
            await writer.drain()
        except (TimeoutError, ConnectionError, ssl.SSLError) as exc:
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
    common: CommonEnv | None = None,
) -> AdminServer | None:
    """The admin endpoint on the gRPC listener's host, or None when `port` is
    0 (turned off)."""
    if not port:
        return None
    server = AdminServer(setting, grpc_address.rsplit(":", 1)[0], port, status, common)
    if not server.enabled:
        return None
    await server.start()
    return server
