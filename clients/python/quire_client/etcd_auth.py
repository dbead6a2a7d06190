"""etcd's authentication turned on for Quire, once and idempotently:
`quire cluster up --tls` and the production overlay's registry pods (`quire
etcd lock-down`) both come here.

Users: `root` (the root role; its password goes to the operator, never to a
service) and the registry's user, whose role may read and write only the
cluster's prefix. With client certificates required and authentication on,
etcd takes a certificate's common name as the user when a request carries no
password: no Quire certificate is named after a user.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass

REGISTRY_USER = "quire-registry"


class EtcdAuthError(RuntimeError):
    pass


def etcd_prefix(cluster: str) -> str:
    """The registry's keys for a cluster (quire_registry.keys.Keys.root)."""
    return f"/quire/{cluster}/"


@dataclass(frozen=True)
class EtcdctlAccess:
    """How etcdctl reaches etcd: URLs (https://host:port) and TLS files."""

    etcdctl: str
    endpoints: Sequence[str]
    ca: str = ""
    cert: str = ""
    key: str = ""

    def run(self, args: Sequence[str], user: str = "", stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        flags = [f"--endpoints={','.join(self.endpoints)}", "--dial-timeout=5s", "--command-timeout=10s"]
        flags += [
            f"--{name}={path}" for name, path in (("cacert", self.ca), ("cert", self.cert), ("key", self.key)) if path
        ]
        if user:
            flags.append(f"--user={user}")
        return subprocess.run(
            [self.etcdctl, *flags, *args],
            input=stdin,
            env={**os.environ, "ETCDCTL_API": "3"},
            capture_output=True,
            text=True,
            timeout=60,
        )


def lock_down(
    access: EtcdctlAccess,
    cluster: str,
    root_password: str,
    registry_password: str,
    registry_user: str = REGISTRY_USER,
    wait_seconds: float = 0.0,
) -> str:
    """Users, roles and `auth enable`, whatever of it is done already (a run
    interrupted half way, or one racing another); returns what was found."""
    deadline = time.monotonic() + wait_seconds
    root = f"root:{root_password}"
    while True:
        # Authentication on already (an earlier run): every step as root.
        as_root = access.run(["user", "get", "root"], user=root)
        if as_root.returncode == 0:
            user, state = root, "authentication was on"
            break
        open_check = access.run(["user", "list"])
        if open_check.returncode == 0:
            user, state = "", "authentication was off"
            break
        if time.monotonic() >= deadline:
            raise EtcdAuthError(
                "etcd answers neither as root (a wrong root password?) nor without a user: "
                f"{as_root.stderr.strip() or open_check.stderr.strip()}"
            )
        time.sleep(2.0)
    role, prefix = f"quire-registry-{cluster}", etcd_prefix(cluster)
    steps = [
        ["user", "add", f"root:{root_password}"],
        ["role", "add", "root"],
        ["user", "grant-role", "root", "root"],
        ["role", "add", role],
        ["role", "grant-permission", role, "readwrite", prefix, "--prefix=true"],
        ["user", "add", f"{registry_user}:{registry_password}"],
        # A rotated password in the Secret is set again.
        ["user", "passwd", registry_user, "--interactive=false"],
        ["user", "grant-role", registry_user, role],
        ["auth", "enable"],
    ]
    for step in steps:
        stdin = registry_password + "\n" if step[:2] == ["user", "passwd"] else None
        result = access.run(step, user=user, stdin=stdin)
        if result.returncode != 0 and "already" not in result.stderr:
            raise EtcdAuthError(f"`etcdctl {' '.join(step[:2])}` failed: {result.stderr.strip()}")
    return state
