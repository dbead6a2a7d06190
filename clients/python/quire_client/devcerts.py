"""Throwaway certificates for local clusters and tests (`quire dev certs`).

A CA, one certificate per service with the common name
`quire-service:<name>` (server and client use, SANs localhost and
127.0.0.1), client certificates per role, the role mapping the gateway reads
for them, and an HS256 secret for bearer tokens. Never for production: the
CA key sits next to the certificates.

With a Kubernetes namespace, it also writes under `kubernetes/` one directory
per Secret the manifests in deploy/kubernetes mount (tls.crt, tls.key, ca.crt:
cert-manager's layout), with the identities and DNS names of
`kubernetes_identities`, plus `quire-auth/jwt.key`, a scraper's admin token
in `quire-metrics-token/token` and random etcd passwords in
`quire-etcd-root/password` and `quire-etcd-registry/password`: the manual way to the Secrets
components/cert-manager would otherwise issue (deploy/README.md).
"""

from __future__ import annotations

import datetime
import json
import secrets
import time
from dataclasses import dataclass
from ipaddress import IPv4Address
from pathlib import Path

import jwt
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

SERVICES = ("gateway", "registry", "placement", "bookie")
CLIENT_ROLES = ("reader", "writer", "admin")
_DAY = datetime.timedelta(days=1)


@dataclass(frozen=True)
class Authority:
    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate

    @classmethod
    def create(cls, name: str = "Quire development CA") -> Authority:
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _DAY)
            .not_valid_after(now + 3650 * _DAY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
            .sign(key, hashes.SHA256())
        )
        return cls(key, cert)

    def pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def issue(
        self,
        common_name: str,
        *,
        hosts: tuple[str, ...] = ("localhost", "127.0.0.1"),
        not_before: datetime.datetime | None = None,
        not_after: datetime.datetime | None = None,
    ) -> tuple[bytes, bytes]:
        """(certificate PEM, private key PEM) for server and client use."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        names: list[x509.GeneralName] = []
        for host in hosts:
            try:
                names.append(x509.IPAddress(IPv4Address(host)))
            except ValueError:
                names.append(x509.DNSName(host))
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(not_before or now - _DAY)
            .not_valid_after(not_after or now + 365 * _DAY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                critical=False,
            )
        )
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        key_pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        return cert.public_bytes(serialization.Encoding.PEM), key_pem


@dataclass(frozen=True)
class CertBundle:
    """Paths of a `quire dev certs` directory."""

    directory: Path

    @property
    def ca(self) -> Path:
        return self.directory / "ca.pem"

    def cert(self, name: str) -> Path:
        return self.directory / f"{name}.pem"

    def key(self, name: str) -> Path:
        return self.directory / f"{name}-key.pem"

    @property
    def etcd_ca(self) -> Path:
        """The CA etcd trusts for client and peer certificates, and whose
        certificate etcd presents: the service side's."""
        return self.ca

    @property
    def client_roles(self) -> Path:
        return self.directory / "client-roles.json"

    @property
    def jwt_secret(self) -> Path:
        return self.directory / "jwt-hs256.secret"

    def service_env(self, service: str) -> dict[str, str]:
        """The QUIRE_TLS_* settings for one service's process."""
        return {
            "QUIRE_TLS_CERT": str(self.cert(service)),
            "QUIRE_TLS_KEY": str(self.key(service)),
            "QUIRE_TLS_CA": str(self.ca),
        }

    def auth_env(self) -> dict[str, str]:
        return {
            "QUIRE_AUTH_JWT_KEY_FILE": str(self.jwt_secret),
            "QUIRE_AUTH_CLIENT_CERT_ROLES": str(self.client_roles),
        }

    def token(self, subject: str, roles: dict[str, list[str]], ttl_seconds: float = 3600) -> str:
        """An HS256 bearer token signed with this bundle's secret."""
        claims = {"sub": subject, "roles": roles, "exp": int(time.time() + ttl_seconds)}
        return jwt.encode(claims, self.jwt_secret.read_bytes().strip(), algorithm="HS256")


def write_file(path: Path, data: bytes, private: bool = False) -> None:
    path.write_bytes(data)
    if private:
        path.chmod(0o600)


def kubernetes_identities(namespace: str) -> dict[str, tuple[str, tuple[str, ...]]]:
    """Secret name -> (common name, DNS names) for a Quire cluster in `namespace`:
    the names clients dial (Services; per-pod names under the headless Services of
    bookies and etcd members). components/cert-manager asks for the same ones."""

    def service(name: str) -> tuple[str, ...]:
        return (name, f"{name}.{namespace}", f"{name}.{namespace}.svc", f"{name}.{namespace}.svc.cluster.local")

    def members(headless: str) -> tuple[str, ...]:
        return (f"*.{headless}.{namespace}.svc", f"*.{headless}.{namespace}.svc.cluster.local")

    return {
        "quire-registry-tls": ("quire-service:registry", service("quire-registry")),
        "quire-placement-tls": ("quire-service:placement", service("quire-placement")),
        "quire-gateway-tls": ("quire-service:gateway", service("quire-gateway")),
        "quire-bookie-tls": ("quire-service:bookie", service("quire-bookie") + members("quire-bookie")),
        "quire-operator-tls": ("quire-service:operator", ()),
        "quire-etcd-tls": ("quire-etcd", service("quire-etcd-client") + members("quire-etcd")),
        "quire-client-admin-tls": ("quire-client:admin", ()),
    }


def write_kubernetes_secrets(
    out: Path, namespace: str, authority: Authority, jwt_secret: bytes, token_ttl_seconds: float = 365 * 86400
) -> Path:
    """The Secrets' files for a cluster in `namespace`, one directory per Secret
    (`kubectl create secret generic NAME --from-file=DIRECTORY`)."""
    root = out / "kubernetes"
    for secret, (common_name, hosts) in kubernetes_identities(namespace).items():
        directory = root / secret
        directory.mkdir(parents=True, exist_ok=True)
        cert, key = authority.issue(common_name, hosts=hosts)
        write_file(directory / "tls.crt", cert)
        write_file(directory / "tls.key", key, private=True)
        write_file(directory / "ca.crt", authority.pem())
    (root / "quire-auth").mkdir(exist_ok=True)
    write_file(root / "quire-auth" / "jwt.key", jwt_secret, private=True)
    # etcd's root (the registry pods' lock-down step only) and the registry's etcd user.
    for secret in ("quire-etcd-root", "quire-etcd-registry"):
        (root / secret).mkdir(exist_ok=True)
        write_file(root / secret / "password", secrets.token_hex(24).encode() + b"\n", private=True)
    (root / "quire-metrics-token").mkdir(exist_ok=True)
    claims = {"sub": "prometheus", "roles": {"*": ["admin"]}, "exp": int(time.time() + token_ttl_seconds)}
    token = jwt.encode(claims, jwt_secret.strip(), algorithm="HS256")
    write_file(root / "quire-metrics-token" / "token", token.encode(), private=True)
    return root


def write_etcd_certs(bundle: CertBundle, authority: Authority) -> None:
    """etcd's own certificate (server and peer use, common name
    `quire-etcd`); the registry presents its service certificate to etcd.
    No certificate here is named `root`: with client certificates required,
    etcd takes a certificate's common name as the user when no password is
    given."""
    cert, key = authority.issue("quire-etcd")
    write_file(bundle.cert("etcd"), cert)
    write_file(bundle.key("etcd"), key, private=True)


def write_dev_certs(out: Path, kubernetes_namespace: str | None = None) -> CertBundle:
    out.mkdir(parents=True, exist_ok=True)
    bundle = CertBundle(out)
    authority = Authority.create()
    write_file(bundle.ca, authority.pem())
    write_file(out / "ca-key.pem", authority.key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ), private=True)  # fmt: skip
    for service in SERVICES:
        cert, key = authority.issue(f"quire-service:{service}")
        write_file(bundle.cert(service), cert)
        write_file(bundle.key(service), key, private=True)
    write_etcd_certs(bundle, authority)
    mapping: dict[str, dict[str, list[str]]] = {}
    for role in CLIENT_ROLES:
        name = f"client-{role}"
        cert, key = authority.issue(name, hosts=())
        write_file(bundle.cert(name), cert)
        write_file(bundle.key(name), key, private=True)
        mapping[name] = {"*": [role]}
    write_file(bundle.client_roles, (json.dumps(mapping, indent=2) + "\n").encode())
    write_file(bundle.jwt_secret, secrets.token_hex(32).encode() + b"\n", private=True)
    if kubernetes_namespace:
        write_kubernetes_secrets(out, kubernetes_namespace, authority, bundle.jwt_secret.read_bytes())
    return bundle
