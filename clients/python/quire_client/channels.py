"""The clients' gRPC channels: plaintext for development clusters, else TLS
(optionally mutual) with a bearer token on every call."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import grpc
import grpc.aio

# Entries go up to ~4 MiB and a read answer carries several: above gRPC's default 4 MiB.
CHANNEL_OPTIONS: list[tuple[str, int]] = [
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
]


@dataclass(frozen=True)
class ClientTls:
    """TLS for the client's channels: the CA that signed the services'
    certificates and, for mutual TLS, the client's certificate and key."""

    ca: Path
    cert: Path | None = None
    key: Path | None = None

    def credentials(self, token: str | None = None) -> grpc.ChannelCredentials:
        credentials = grpc.ssl_channel_credentials(
            root_certificates=self.ca.read_bytes(),
            private_key=self.key.read_bytes() if self.key else None,
            certificate_chain=self.cert.read_bytes() if self.cert else None,
        )
        if token:
            # Sent as `authorization: Bearer <token>` on every call.
            credentials = grpc.composite_channel_credentials(credentials, grpc.access_token_call_credentials(token))
        return credentials


def _check_token(tls: ClientTls | None, token: str | None) -> None:
    if tls is None and token:
        raise ValueError("a bearer token needs TLS (grpc sends call credentials only over TLS)")


def open_client_channel(
    target: str, tls: ClientTls | None, token: str | None = None, options: list[tuple[str, int]] | None = None
) -> grpc.Channel:
    """A plaintext channel without `tls` (development clusters), else TLS,
    with the bearer token on every call when one is given."""
    _check_token(tls, token)
    if tls is None:
        return grpc.insecure_channel(target, options=options)
    return grpc.secure_channel(target, tls.credentials(token), options=options)


def open_aio_channel(
    target: str, tls: ClientTls | None, token: str | None = None, options: list[tuple[str, int]] | None = None
) -> grpc.aio.Channel:
    """open_client_channel for asyncio (grpc.aio)."""
    _check_token(tls, token)
    if tls is None:
        return grpc.aio.insecure_channel(target, options=options)
    return grpc.aio.secure_channel(target, tls.credentials(token), options=options)
