"""Throwaway certificates for local clusters and tests (`quire dev certs`).

Two CAs: the service CA (`ca.pem`) issues one certificate per service with
the common name `quire-service:<name>` (server and client use, SANs localhost
and 127.0.0.1) and the operator's client-only `quire-service:operator` for
internal RPCs; the client CA (`client-ca.pem`) issues the client
certificates of `CLIENT_IDENTITIES`, the operator's own for the gateway
(`client-operator`) among them. Every
process and client trusts the service CA for the servers it dials; only the
gateway's listener also trusts the client CA, and a certificate from the
client CA is never a service, whatever name it carries (docs/security.md).
Also the role mapping the gateway reads for client certificates, and an
HS256 secret for bearer tokens. Never for production: the CA keys sit next to
the certificates.

With a Kubernetes namespace, it also writes under `kubernetes/` one directory
per Secret the manifests in deploy/kubernetes mount (tls.crt, tls.key, ca.crt:
cert-manager's layout, ca.crt being the issuing CA), with the identities and
DNS names of `kubernetes_identities`, the client CA's certificate in
`quire-client-ca/ca.crt` (the gateway mounts that key alone), plus
`quire-auth/jwt.key`, a scraper's admin token in `quire-metrics-token/token`
and random etcd passwords in `quire-etcd-root/password` and
`quire-etcd-registry/password`: the manual way to the Secrets
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
# The service identity of tooling that calls internal RPCs (the command line's
# cluster commands, the cluster runner): client use only.
OPERATOR = "operator"
# The client certificates `quire dev certs` writes (file name = common name)
# and their roles at the gateway: one per role, and the operator's command line
# at the gateway (`quire ledger list`), which a service identity never is.
# docs/security.md shows this table; a unit test keeps the two the same.
CLIENT_IDENTITIES: dict[str, dict[str, list[str]]] = {
    "client-reader": {"*": ["reader"]},
    "client-writer": {"*": ["writer"]},
    "client-admin": {"*": ["admin"]},
    "client-operator": {"*": ["reader"]},
}
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
        uris: tuple[str, ...] = (),
        more_common_names: tuple[str, ...] = (),
    ) -> tuple[bytes, bytes]:
        """(certificate PEM, private key PEM) for server and client use.
        `uris` and `more_common_names`: further names (tests of certificates
        that carry several)."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        names: list[x509.GeneralName] = [x509.UniformResourceIdentifier(uri) for uri in uris]
        for host in hosts:
            try:
                names.append(x509.IPAddress(IPv4Address(host)))
            except ValueError:
                names.append(x509.DNSName(host))
        subject = [x509.NameAttribute(NameOID.COMMON_NAME, cn) for cn in (common_name, *more_common_names)]
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name(subject))
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
        """The service CA: what every process and client trusts for servers and services."""
        return self.directory / "ca.pem"

    @property
    def client_ca(self) -> Path:
        """The client CA: trusted by the gateway's listener only, never for a service identity."""
        return self.directory / "client-ca.pem"

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
        env = {
            "QUIRE_TLS_CERT": str(self.cert(service)),
            "QUIRE_TLS_KEY": str(self.key(service)),
            "QUIRE_TLS_CA": str(self.ca),
        }
        if service == "gateway":
            env["QUIRE_TLS_CLIENT_CA"] = str(self.client_ca)
        return env

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
        "quire-client-operator-tls": ("quire-client:operator", ()),
    }


# The Secrets of `kubernetes_identities` the client CA issues; the service CA issues the others.
KUBERNETES_CLIENT_SECRETS = frozenset({"quire-client-admin-tls", "quire-client-operator-tls"})


def write_kubernetes_secrets(
    out: Path,
    namespace: str,
    service_ca: Authority,
    client_ca: Authority,
    jwt_secret: bytes,
    token_ttl_seconds: float = 365 * 86400,
) -> Path:
    """The Secrets' files for a cluster in `namespace`, one directory per Secret
    (`kubectl create secret generic NAME --from-file=DIRECTORY`)."""
    root = out / "kubernetes"
    for secret, (common_name, hosts) in kubernetes_identities(namespace).items():
        authority = client_ca if secret in KUBERNETES_CLIENT_SECRETS else service_ca
        directory = root / secret
        directory.mkdir(parents=True, exist_ok=True)
        cert, key = authority.issue(common_name, hosts=hosts)
        write_file(directory / "tls.crt", cert)
        write_file(directory / "tls.key", key, private=True)
        write_file(directory / "ca.crt", authority.pem())
    # The gateway trusts client certificates through this key alone (the CA's key stays out of the cluster).
    (root / "quire-client-ca").mkdir(exist_ok=True)
    write_file(root / "quire-client-ca" / "ca.crt", client_ca.pem())
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


def write_authority(certificate: Path, key: Path, authority: Authority) -> None:
    write_file(certificate, authority.pem())
    write_file(key, authority.key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ), private=True)  # fmt: skip


def load_authority(certificate: Path, key: Path) -> Authority:
    """An Authority written by `write_authority` (tests issue more certificates from it)."""
    private_key = serialization.load_pem_private_key(key.read_bytes(), None)
    assert isinstance(private_key, ec.EllipticCurvePrivateKey)
    return Authority(private_key, x509.load_pem_x509_certificate(certificate.read_bytes()))


def write_etcd_certs(bundle: CertBundle, authority: Authority) -> None:
    """etcd's own certificate (server and peer use, common name
    `quire-etcd`, from the service CA); the registry presents its service
    certificate to etcd. No certificate here is named `root`: with client
    certificates required, etcd takes a certificate's common name as the user
    when no password is given."""
    cert, key = authority.issue("quire-etcd")
    write_file(bundle.cert("etcd"), cert)
    write_file(bundle.key("etcd"), key, private=True)


def write_dev_certs(out: Path, kubernetes_namespace: str | None = None) -> CertBundle:
    out.mkdir(parents=True, exist_ok=True)
    bundle = CertBundle(out)
    service_ca = Authority.create("Quire development service CA")
    client_ca = Authority.create("Quire development client CA")
    write_authority(bundle.ca, out / "ca-key.pem", service_ca)
    write_authority(bundle.client_ca, out / "client-ca-key.pem", client_ca)
    for service in SERVICES:
        cert, key = service_ca.issue(f"quire-service:{service}")
        write_file(bundle.cert(service), cert)
        write_file(bundle.key(service), key, private=True)
    cert, key = service_ca.issue(f"quire-service:{OPERATOR}", hosts=())
    write_file(bundle.cert(OPERATOR), cert)
    write_file(bundle.key(OPERATOR), key, private=True)
    write_etcd_certs(bundle, service_ca)
    for name in CLIENT_IDENTITIES:
        cert, key = client_ca.issue(name, hosts=())
        write_file(bundle.cert(name), cert)
        write_file(bundle.key(name), key, private=True)
    write_file(bundle.client_roles, (json.dumps(CLIENT_IDENTITIES, indent=2) + "\n").encode())
    write_file(bundle.jwt_secret, secrets.token_hex(32).encode() + b"\n", private=True)
    if kubernetes_namespace:
        write_kubernetes_secrets(out, kubernetes_namespace, service_ca, client_ca, bundle.jwt_secret.read_bytes())
    return bundle
