"""Who a caller is and what its roles allow: bearer tokens (JWT), client
certificate role mappings, and the role -> permission table. No grpc here;
the gateway's interceptor and the admin HTTP endpoints use it.

Roles are granted per scope: `{"7": ["writer"], "*": ["reader"]}` makes the
caller a writer in scope 7 and a reader everywhere. The roles nest: a writer
may also read, an admin may do everything.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jwt

from quire_api.errors import PermissionDenied, Reason, Unauthenticated
from quire_common.allowlist import SERVICE_IDENTITY_PREFIX
from quire_common.config import ConfigError
from quire_common.settings import AuthEnv

log = logging.getLogger(__name__)

READ, WRITE, ADMIN = "read", "write", "admin"
ROLE_PERMISSIONS: dict[str, frozenset[str]] = {
    "reader": frozenset({READ}),
    "writer": frozenset({READ, WRITE}),
    "admin": frozenset({READ, WRITE, ADMIN}),
}
ALL_SCOPES = "*"
TOKEN_ALGORITHMS = ("HS256", "RS256", "ES256")
MAX_TOKEN_BYTES = 8192


@dataclass(frozen=True)
class Principal:
    subject: str
    # scope ("*" or a decimal scope id) -> role names
    roles: Mapping[str, frozenset[str]] = field(default_factory=dict)
    via: str = "token"  # or "certificate"

    def permissions(self, scope: int | None) -> frozenset[str]:
        """Permissions on `scope`; None (a request spanning every scope) counts only "*"."""
        names = set(self.roles.get(ALL_SCOPES, frozenset()))
        if scope is not None:
            names |= self.roles.get(str(scope), frozenset())
        return frozenset().union(*(ROLE_PERMISSIONS.get(name, frozenset()) for name in names))

    def require(self, permission: str, scope: int | None, operation: str) -> None:
        if permission in self.permissions(scope):
            return
        where = "every scope (*)" if scope is None else f"scope {scope}"
        raise PermissionDenied(
            f"{operation} needs permission {permission!r} on {where}; {self.subject!r} ({self.via}) "
            f"has roles {_describe(self.roles)}",
            Reason.PERMISSION_DENIED_ROLE,
            permission=permission,
            scope=ALL_SCOPES if scope is None else str(scope),
        )


def roles_table(mapping: Mapping[str, Mapping[str, Any]]) -> str:
    """A client certificate role mapping (QUIRE_AUTH_CLIENT_CERT_ROLES's
    form) as docs/security.md shows it."""
    lines = ["| client certificate common name (client CA) | roles |", "|---|---|"]
    for name, roles in mapping.items():
        granted = "; ".join(f"{', '.join(sorted(names))} on `{scope}`" for scope, names in sorted(roles.items()))
        lines.append(f"| `{name}` | {granted} |")
    return "\n".join(lines) + "\n"


def _describe(roles: Mapping[str, frozenset[str]]) -> str:
    if not roles:
        return "none"
    return ", ".join(f"{scope}: {'/'.join(sorted(names))}" for scope, names in sorted(roles.items()))


def parse_roles(raw: Any, where: str) -> dict[str, frozenset[str]]:
    """`{"<scope>|*": ["reader", ...]}` checked strictly: unknown roles or
    malformed scopes are refused, not ignored."""
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: roles must be an object of scope -> list of roles")
    roles: dict[str, frozenset[str]] = {}
    for scope, names in raw.items():
        if scope != ALL_SCOPES and not (isinstance(scope, str) and scope.isdigit() and int(scope) < 2**64):
            raise ValueError(f"{where}: scope {scope!r} is neither '*' nor a decimal scope id")
        if not isinstance(names, list) or not all(isinstance(n, str) and n in ROLE_PERMISSIONS for n in names):
            raise ValueError(f"{where}: roles of scope {scope} must be a list of {sorted(ROLE_PERMISSIONS)}")
        roles[str(int(scope)) if scope != ALL_SCOPES else scope] = frozenset(names)
    return roles


class TokenVerifier:
    """Verifies `Authorization: Bearer <JWT>`: signature with the configured
    key and algorithm, `exp` required, `sub` and `roles` claims."""

    def __init__(self, key: str | bytes, algorithm: str, audience: str = "") -> None:
        if algorithm not in TOKEN_ALGORITHMS:
            raise ConfigError(f"QUIRE_AUTH_JWT_ALGORITHM={algorithm!r}: use one of {', '.join(TOKEN_ALGORITHMS)}")
        self._key = key
        self._algorithm = algorithm
        self._audience = audience or None

    def verify(self, token: str) -> Principal:
        if len(token) > MAX_TOKEN_BYTES:
            raise Unauthenticated("bearer token too long")
        try:
            claims = jwt.decode(
                token,
                self._key,
                algorithms=[self._algorithm],
                audience=self._audience,
                options={"require": ["exp", "sub"]},
            )
        except jwt.ExpiredSignatureError:
            raise Unauthenticated("bearer token expired") from None
        except jwt.InvalidTokenError as exc:
            raise Unauthenticated(f"bearer token invalid: {exc}") from None
        try:
            roles = parse_roles(claims.get("roles", {}), "token")
        except ValueError as exc:
            raise Unauthenticated(f"bearer token invalid: {exc}") from None
        return Principal(str(claims["sub"]), roles, "token")


def bearer_token(header: str | None) -> str | None:
    if not header:
        return None
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthenticated("the authorization header must be 'Bearer <token>'")
    return token.strip()


@dataclass(frozen=True)
class AuthSettings:
    """QUIRE_AUTH_*: how callers are authenticated."""

    enabled: bool
    verifier: TokenVerifier | None
    # client certificate common name -> roles (QUIRE_AUTH_CLIENT_CERT_ROLES)
    cert_roles: Mapping[str, Mapping[str, frozenset[str]]]

    @classmethod
    def from_settings(
        cls, env: AuthEnv, tls_enabled: bool, require_credentials: bool = True, *, service_names_allowed: bool = False
    ) -> AuthSettings:
        """`service_names_allowed` lets the role mapping name service
        identities (a positive control's setting only)."""
        enabled = tls_enabled if env.enabled is None else env.enabled
        key_path = env.jwt_key_file
        algorithm = env.jwt_algorithm
        verifier = None
        if key_path:
            try:
                key: str | bytes = Path(key_path).read_bytes()
            except OSError as exc:
                raise ConfigError(f"QUIRE_AUTH_JWT_KEY_FILE={key_path!r}: {exc.strerror or exc}") from None
            if algorithm == "HS256":
                key = key.strip()
                if len(key) < 32:
                    raise ConfigError("QUIRE_AUTH_JWT_KEY_FILE: an HS256 secret needs at least 32 bytes")
            verifier = TokenVerifier(key, algorithm, env.jwt_audience)
        cert_roles = load_cert_roles(env.client_cert_roles, service_names_allowed) if require_credentials else {}
        if require_credentials and enabled and verifier is None and not cert_roles:
            raise ConfigError(
                "QUIRE_AUTH_ENABLED is on but no credentials can be accepted: set QUIRE_AUTH_JWT_KEY_FILE "
                "and/or QUIRE_AUTH_CLIENT_CERT_ROLES (or QUIRE_AUTH_ENABLED=false)"
            )
        return cls(enabled, verifier, cert_roles)

    def authenticate(self, authorization: str | None, common_name: str | None) -> Principal:
        """A bearer token wins over a client certificate when both are given.
        `common_name`: of a certificate the client CA vouches for (the
        interceptor refuses any other before it asks)."""
        token = bearer_token(authorization)
        if token is not None:
            if self.verifier is None:
                raise Unauthenticated("bearer tokens are not accepted here (no QUIRE_AUTH_JWT_KEY_FILE)")
            return self.verifier.verify(token)
        if common_name is not None and common_name in self.cert_roles:
            return Principal(common_name, self.cert_roles[common_name], "certificate")
        if common_name is not None:
            raise Unauthenticated(f"client certificate {common_name!r} is not mapped to any roles")
        raise Unauthenticated("no credentials: send 'authorization: Bearer <token>' or a client certificate")


def load_cert_roles(path: str, service_names_allowed: bool = False) -> dict[str, dict[str, frozenset[str]]]:
    """QUIRE_AUTH_CLIENT_CERT_ROLES: a JSON file `{"<common name>": {"<scope>|*": [roles]}}`
    of client names. A service identity's name is refused: services hold no
    roles at the gateway, and a client CA that issued that name would hand
    them to whoever asked for it."""
    if not path:
        return {}
    try:
        raw = json.loads(Path(path).read_text())
        if not isinstance(raw, dict):
            raise ValueError("must be an object of common name -> roles")
        services = sorted(name for name in raw if str(name).startswith(SERVICE_IDENTITY_PREFIX))
        if services and not service_names_allowed:
            raise ValueError(
                f"{', '.join(map(repr, services))}: a service identity's name holds no roles at the gateway; "
                f"map the client's own name instead (for the operator's command line, 'quire-client:operator'; "
                "docs/security.md)"
            )
        return {str(name): parse_roles(roles, f"common name {name!r}") for name, roles in raw.items()}
    except OSError as exc:
        raise ConfigError(f"QUIRE_AUTH_CLIENT_CERT_ROLES={path!r}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ConfigError(f"QUIRE_AUTH_CLIENT_CERT_ROLES={path!r}: {exc}") from None
