"""An L4 load balancer in front of a cluster's gateways: HAProxy, round robin.

This is what a Kubernetes Service (or a cloud TCP load balancer) does to a
client: every new connection may land on a different gateway. A local cluster
started with several gateways puts HAProxy in front of them so that the same
thing happens on a developer's machine and in the end-to-end tests.

HAProxy runs in TCP mode, so TLS passes through untouched: the client's
handshake ends at a gateway, and the gateway's certificate must name the
balancer's address (`quire dev certs` certificates name 127.0.0.1 and
localhost)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import IO

HAPROXY_INSTALL_HINT = "install Debian's haproxy (apt-get install haproxy; make setup does)"


class BalancerError(RuntimeError):
    pass


def haproxy_config(
    listen: str, backends: dict[str, str], stats_socket: Path | None = None, health_interval_ms: int = 500
) -> str:
    """A TCP round-robin configuration: `listen` is host:port, `backends` maps a
    server name to its host:port; `stats_socket` is where HAProxy answers
    `show stat` (per-gateway connection counts).

    A connection that cannot reach its server is retried on another one
    (`redispatch`), and a server whose port stops answering is taken out after
    two failed checks, so killing a gateway costs its own connections only."""
    servers = "\n".join(
        f"  server {name} {target} check inter {health_interval_ms} fall 2 rise 1" for name, target in backends.items()
    )
    stats = f"  stats socket {stats_socket} mode 600 level admin\n" if stats_socket is not None else ""
    return f"""\
global
  maxconn 4096
{stats}
defaults
  mode tcp
  option redispatch
  retries 3
  timeout connect 2s
  # gRPC streams (tails, write sessions) may be quiet for a long time; HTTP/2
  # keepalives from the client keep an idle connection under this bound.
  timeout client 1h
  timeout server 1h

frontend quire-gateways
  bind {listen}
  default_backend gateways

backend gateways
  balance roundrobin
{servers}
"""


class HaproxyBalancer:
    """One HAProxy process, started and stopped by PID, its configuration and
    log in `directory`."""

    def __init__(self, directory: Path, listen: str, backends: dict[str, str], binary: str | None = None) -> None:
        self.directory = directory
        self.listen = listen
        self.backends = dict(backends)
        self.binary = binary or shutil.which("haproxy") or "/usr/sbin/haproxy"
        self._popen: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def config_path(self) -> Path:
        return self.directory / "haproxy.cfg"

    @property
    def log_path(self) -> Path:
        return self.directory / "haproxy.log"

    @property
    def stats_socket(self) -> Path:
        return self.directory / "haproxy.sock"

    @property
    def pid(self) -> int | None:
        return self._popen.pid if self._popen is not None else None

    def start(self, timeout: float = 30.0) -> None:
        if not Path(self.binary).exists():
            raise BalancerError(f"haproxy not found at {self.binary}; {HAPROXY_INSTALL_HINT}")
        self.directory.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(haproxy_config(self.listen, self.backends, self.stats_socket))
        check = subprocess.run([self.binary, "-c", "-q", "-f", str(self.config_path)], capture_output=True, text=True)
        if check.returncode != 0:
            raise BalancerError(f"haproxy rejected {self.config_path}: {check.stderr.strip() or check.stdout.strip()}")
        self._log = self.log_path.open("ab")
        # -db: stay in the foreground, so the PID we hold is HAProxy's own.
        self._popen = subprocess.Popen(
            [self.binary, "-db", "-f", str(self.config_path)], stdout=self._log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + timeout
        while not self._listening():
            if self._popen.poll() is not None:
                raise BalancerError(f"haproxy exited with status {self._popen.returncode}; see {self.log_path}")
            if time.monotonic() > deadline:
                self.stop()
                raise BalancerError(f"haproxy did not listen on {self.listen} within {timeout:.0f} s")
            time.sleep(0.05)

    def _listening(self) -> bool:
        """Whether the frontend is bound, asked on the runtime socket. A test
        connection to the frontend would do as well, but HAProxy sends it on
        to a backend, sometimes after the first clients' connections: it took
        one of their round-robin turns."""
        try:
            rows = self._stat_rows()
        except OSError:  # the socket is not there, or not answering, yet
            return False
        return any(row.get("svname") == "FRONTEND" and row.get("status") == "OPEN" for row in rows)

    def _command(self, command: str) -> str:
        """One command on HAProxy's runtime socket; its answer."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.settimeout(10)
            client.connect(str(self.stats_socket))
            client.sendall(command.encode() + b"\n")
            chunks = []
            while chunk := client.recv(65536):
                chunks.append(chunk)
        return b"".join(chunks).decode()

    def cut(self, server: str) -> None:
        """Cut the network between clients and one backend while it runs on:
        no new connection goes to it, and every open one through it is closed."""
        for command in (f"disable server gateways/{server}", f"shutdown sessions server gateways/{server}"):
            answer = self._command(command).strip()
            if answer:
                raise BalancerError(f"haproxy refused {command!r}: {answer}")

    def heal(self, server: str) -> None:
        """Undo `cut`: the backend takes new connections again."""
        answer = self._command(f"enable server gateways/{server}").strip()
        if answer:
            raise BalancerError(f"haproxy refused enabling {server}: {answer}")

    def connections_per_backend(self) -> dict[str, int]:
        """How many connections HAProxy has sent to each backend so far (its
        `stot` counter), from the stats socket."""
        return {row["svname"]: int(row["stot"] or 0) for row in self._stat_rows() if row["svname"] in self.backends}

    def _stat_rows(self) -> list[dict[str, str]]:
        """`show stat`: a row per frontend, backend and server, by column name."""
        lines = self._command("show stat").splitlines()
        if not lines:
            return []
        header = lines[0].lstrip("# ").split(",")
        return [dict(zip(header, line.split(","), strict=False)) for line in lines[1:] if line]

    def running(self) -> bool:
        return self._popen is not None and self._popen.poll() is None

    def stop(self, timeout: float = 10.0) -> None:
        if self._popen is not None:
            if self._popen.poll() is None:
                # SIGTERM is HAProxy's hard stop: it closes every connection at once.
                self._popen.terminate()
                try:
                    self._popen.wait(timeout)
                except subprocess.TimeoutExpired:
                    self._popen.kill()
                    self._popen.wait()
            self._popen = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> HaproxyBalancer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
