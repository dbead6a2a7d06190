"""Why the registry cannot talk to etcd, when the answer is a setting.

gRPC reports a refused certificate, a plaintext client at a TLS port and a
TLS client at a plaintext port as UNAVAILABLE, the same as an etcd that is
down, and its messages differ from version to version. So when connecting
fails, one TLS handshake is tried here with the same settings (Python's ssl
module, which names the failure). A setting that is wrong is a ConfigError;
anything else (refused, reset, timed out) is left to the caller's retries.
"""

from __future__ import annotations

import socket
import ssl
import tempfile
from pathlib import Path

from quire_common.config import ConfigError

_PROBE_SECONDS = 3.0
# etcd tells a client whose certificate it refuses with a TLS alert, read
# after the handshake under TLS 1.3.
_REFUSED_CLIENT_CERT = ("BAD_CERTIFICATE", "CERTIFICATE_REQUIRED", "UNKNOWN_CA", "CERTIFICATE_UNKNOWN")


def _context(ca: bytes | None, cert: bytes | None, key: bytes | None) -> ssl.SSLContext:
    context = ssl.create_default_context()
    if ca is None:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    context.load_verify_locations(cadata=ca.decode())
    if cert is not None and key is not None:
        with tempfile.TemporaryDirectory() as directory:
            cert_file, key_file = Path(directory) / "cert.pem", Path(directory) / "key.pem"
            cert_file.write_bytes(cert)
            key_file.touch(mode=0o600)
            key_file.write_bytes(key)
            context.load_cert_chain(cert_file, key_file)
    return context


def check_tls_settings(
    address: str, server_name: str | None, ca: bytes | None, cert: bytes | None, key: bytes | None
) -> None:
    """Raise ConfigError when etcd at `address` (host:port) refuses these TLS
    settings; return when it accepts them or cannot be reached at all."""
    host, _, port = address.rpartition(":")
    try:
        raw = socket.create_connection((host, int(port)), timeout=_PROBE_SECONDS)
    except OSError:
        return  # down or unreachable: a matter for retries
    context = _context(ca, cert, key)
    try:
        with context.wrap_socket(raw, server_hostname=server_name or host) as tls:
            if ca is None:
                raise ConfigError(
                    f"etcd at {address} speaks TLS but QUIRE_ETCD_CA is not set: give the CA that signed "
                    "etcd's certificate (and QUIRE_ETCD_CERT/QUIRE_ETCD_KEY if etcd requires client certificates)"
                )
            tls.settimeout(1.0)
            try:
                tls.recv(1)
            except ssl.SSLError as exc:
                if any(alert in str(exc).upper() for alert in _REFUSED_CLIENT_CERT):
                    which = (
                        "QUIRE_ETCD_CERT/QUIRE_ETCD_KEY are not set"
                        if cert is None
                        else ("it refused the certificate in QUIRE_ETCD_CERT")
                    )
                    raise ConfigError(
                        f"etcd at {address} requires a client certificate from its CA and {which}: {exc.reason}"
                    ) from None
            except OSError:
                pass  # a timeout: the certificate was accepted
    except ssl.SSLCertVerificationError as exc:
        raise ConfigError(
            f"etcd at {address}: its certificate does not verify ({exc.verify_message}); check QUIRE_ETCD_CA "
            "(the CA that signed etcd's certificate) and QUIRE_ETCD_SERVER_NAME (a name the certificate carries)"
        ) from None
    except (ssl.SSLError, ConnectionError) as exc:
        if ca is not None and any(alert in str(exc).upper() for alert in _REFUSED_CLIENT_CERT):
            raise ConfigError(
                f"etcd at {address} refused the client certificate (QUIRE_ETCD_CERT, QUIRE_ETCD_KEY): {exc}"
            ) from None
        # etcd's plaintext port hangs up on a TLS hello: ask it in plain HTTP whether it is there.
        if ca is not None and _answers_plain_http(host, int(port)):
            raise ConfigError(
                f"etcd at {address} does not speak TLS but QUIRE_ETCD_CA is set: unset it, or give etcd's "
                "TLS client port"
            ) from None
    except OSError:
        return
    finally:
        raw.close()


def _answers_plain_http(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=_PROBE_SECONDS) as plain:
            plain.sendall(b"GET /version HTTP/1.0\r\n\r\n")
            return plain.recv(5) == b"HTTP/"
    except OSError:
        return False
