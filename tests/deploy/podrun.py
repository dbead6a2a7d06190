"""Run a rendered pod spec as local processes, as near to the kubelet as one
machine without Kubernetes allows (tests/deploy/test_local_start.py).

Each pod gets its own loopback address (127.0.10.N) to stand for its pod IP,
so pods keep the ports their spec gives them and none collide. Each process
runs in its own mount namespace (`unshare --mount`) with a hosts file
bind-mounted on /etc/hosts that maps the Service names and the per-pod names
of headless Services (`quire-bookie-0.quire-bookie.quire.svc`) to those
addresses: the services dial exactly the names the ConfigMap gives them and
TLS checks the certificates against those names.

What a pod gets, from its spec:
- the image's environment (deploy/image/Dockerfile's ENV, PATH pointing at this
  checkout's virtualenv), then the container's `env` and `envFrom` resolved from
  the rendered ConfigMaps and the given Secrets, fieldRefs (pod name, namespace,
  pod IP) and `$(VAR)` references, as the kubelet resolves them;
- its volumes as files under the pod's root directory: Secrets and ConfigMaps
  (projected too) written out, emptyDirs and claims as directories, subPathExpr
  expanded;
- `command`/`args`, or the image's entry point (deploy/image/quire-image-entrypoint)
  with `args`, as the container runtime would;
- its init containers, run to completion one after the other before it starts.

The only rewrites, all in `PodProcess.localize`: an absolute path inside a
mount (`/etc/quire/tls/tls.crt`) becomes that path under the pod's root, and
`0.0.0.0` (every address of the pod) becomes the pod's address. One concession
in the hosts file: connections leave from 127.0.0.1, not from the pod's
address, so 127.0.0.1 also carries a name under each headless Service
(`Cluster.write_hosts` says why).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.deploy.kustomize import Manifest

ROOT = Path(__file__).resolve().parents[2]
ENTRYPOINT = ROOT / "deploy" / "image" / "quire-image-entrypoint"
VENV_BIN = Path(sys.executable).parent
# deploy/image/Dockerfile's ENV for the final image (PATH: the image's /opt/quire/bin).
IMAGE_ENV = {
    "PATH": f"{VENV_BIN}:/usr/local/bin:/usr/bin:/bin",
    "PYTHONUNBUFFERED": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
}
_VARIABLE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


class PodError(RuntimeError):
    pass


def expand(text: str, variables: dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion: defined variables are replaced, others
    left as written, `$$` is a literal `$`."""

    def one(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        return variables.get(match.group(1), match.group(0))

    return _VARIABLE.sub(one, text)


def mount_namespaces_work() -> str | None:
    """None when this machine can give a process its own /etc/hosts, else why not."""
    if shutil.which("unshare") is None:
        return "unshare (util-linux) is not installed"
    probe = subprocess.run(
        [*_unshare(), "sh", "-c", "mount --bind /etc/hostname /etc/hosts && true"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    if probe.returncode != 0:
        return f"no mount namespace with a private /etc/hosts: {probe.stderr.strip()}"
    return None


def with_cluster_names(hosts_file: Path, command: list[str]) -> list[str]:
    """`command` in its own mount namespace where /etc/hosts is `hosts_file`.
    unshare and sh exec, so the process keeps the PID it is started with."""
    return [*_unshare(), "sh", "-c", 'mount --bind "$0" /etc/hosts && exec "$@"', str(hosts_file), *command]


def _unshare() -> list[str]:
    # As root a mount namespace; otherwise a user namespace maps us to root in it.
    return ["unshare", "--mount"] if os.geteuid() == 0 else ["unshare", "--user", "--map-root-user", "--mount"]


@dataclass
class Cluster:
    """The rendered objects, the Secrets standing in for the cluster's, and
    where pods live. Every process started is stopped by `stop_all`."""

    manifests: list[Manifest]
    secrets: dict[str, dict[str, bytes]]
    root: Path
    namespace: str
    pods: dict[str, PodProcess] = field(default_factory=dict)
    _next_address: int = 1

    def __post_init__(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.hosts_file = self.root / "hosts"
        self.config_maps = {
            m["metadata"]["name"]: {**m.get("data", {})} for m in self.manifests if m["kind"] == "ConfigMap"
        }

    def pod(self, workload: Manifest, pod_name: str, container: str | None = None) -> PodProcess:
        address = f"127.0.10.{self._next_address}"
        self._next_address += 1
        pod = PodProcess(self, workload, pod_name, address, container)
        self.pods[pod_name] = pod
        self.write_hosts()
        return pod

    def write_hosts(self) -> None:
        """Service names resolve to the (only) pod they select, as a ClusterIP
        would route there; headless Services' per-pod names to each pod."""
        names: dict[str, list[str]] = {"127.0.0.1": ["localhost"], **{pod.address: [] for pod in self.pods.values()}}
        suffixes = (f".{self.namespace}", f".{self.namespace}.svc", f".{self.namespace}.svc.cluster.local")
        for service in (m for m in self.manifests if m["kind"] == "Service"):
            name, selector = service["metadata"]["name"], service["spec"]["selector"]
            selected = [pod for pod in self.pods.values() if _selects(selector, pod.labels)]
            if service["spec"].get("clusterIP") == "None":
                # Every local connection leaves from 127.0.0.1, whichever pod opens it; on
                # Kubernetes it leaves from the pod's IP, whose reverse name is its per-pod
                # name (etcd checks a peer's certificate against that). So 127.0.0.1 reads
                # as a member of each headless Service.
                names["127.0.0.1"] += [f"local-source.{name}{suffix}" for suffix in suffixes[1:]]
            for pod in selected:
                if service["spec"].get("clusterIP") == "None":
                    per_pod = f"{pod.name}.{name}"
                    names[pod.address] += [per_pod + suffix for suffix in reversed(suffixes)]
            if selected and service["spec"].get("clusterIP") != "None":
                names[selected[0].address] += [name + suffix for suffix in suffixes] + [name]
        lines = [f"{address} {' '.join(n)}" for address, n in names.items() if n]
        # Rewritten in place (same inode): pods already running, which have this file
        # bind-mounted, see the names of pods started after them, as with cluster DNS.
        self.hosts_file.write_text("\n".join(lines) + "\n")

    def stop_all(self) -> None:
        for pod in reversed(list(self.pods.values())):
            pod.stop()


def containers_of(spec: Manifest) -> list[Manifest]:
    return [*spec.get("initContainers", []), *spec["containers"]]


def _selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


class PodProcess:
    def __init__(self, cluster: Cluster, workload: Manifest, name: str, address: str, container: str | None) -> None:
        self.cluster, self.workload, self.name, self.address = cluster, workload, name, address
        template = workload["spec"]["template"]
        self.labels: dict[str, str] = template["metadata"].get("labels", {})
        self.spec: Manifest = template["spec"]
        candidates = self.spec["containers"] if container is None else containers_of(self.spec)
        (self.container,) = [c for c in candidates if container in (None, c["name"])]
        self.root = cluster.root / "pods" / name
        self.log = cluster.root / "logs" / f"{name}.log"
        self.popen: subprocess.Popen[bytes] | None = None
        self.mounts = sorted((m["mountPath"] for m in self.container.get("volumeMounts", [])), key=len, reverse=True)
        self.env = self._environment()

    # -- what the kubelet would give the container -----------------------------

    def localize(self, value: str) -> str:
        """The one place values are rewritten for this machine: absolute paths
        inside a mount move under the pod's root, 0.0.0.0 becomes the pod's address."""
        value = value.replace("0.0.0.0", self.address)

        def path(match: re.Match[str]) -> str:
            candidate = match.group(2)
            for mount in self.mounts:
                if candidate == mount or candidate.startswith(mount.rstrip("/") + "/"):
                    return match.group(1) + str(self.root) + candidate
            return match.group(0)

        return re.sub(r"(^|=)(/[^,\s:]*)", path, value)

    def _field(self, path: str) -> str:
        return {"metadata.name": self.name, "metadata.namespace": self.cluster.namespace, "status.podIP": self.address}[
            path
        ]

    def _environment(self) -> dict[str, str]:
        env: dict[str, str] = {}
        for source in self.container.get("envFrom", []):
            if "configMapRef" in source:
                env.update(self.cluster.config_maps[source["configMapRef"]["name"]])
        for entry in self.container.get("env", []):
            name = entry["name"]
            if "value" in entry:
                env[name] = expand(entry["value"], env)
                continue
            source = entry["valueFrom"]
            if "configMapKeyRef" in source:
                ref = source["configMapKeyRef"]
                env[name] = self.cluster.config_maps[ref["name"]][ref["key"]]
            elif "secretKeyRef" in source:
                ref = source["secretKeyRef"]
                env[name] = self.cluster.secrets[ref["name"]][ref["key"]].decode()
            elif "fieldRef" in source:
                env[name] = self._field(source["fieldRef"]["fieldPath"])
            else:
                raise PodError(f"{self.name}: env {name}: unsupported source {source}")
        return {key: self.localize(value) for key, value in env.items()}

    def _write_volumes(self) -> None:
        volumes = {v["name"]: v for v in self.spec.get("volumes", [])}
        claims = {t["metadata"]["name"] for t in self.workload["spec"].get("volumeClaimTemplates", [])}
        for mount in self.container.get("volumeMounts", []):
            target = self.root / mount["mountPath"].lstrip("/")
            if mount["name"] in claims:
                target.mkdir(parents=True, exist_ok=True)  # the pod's own persistent volume
                continue
            volume = volumes[mount["name"]]
            sources: list[Manifest] = []
            if "secret" in volume:
                sources = [{"secret": {"name": volume["secret"]["secretName"], **volume["secret"]}}]
            elif "configMap" in volume:
                sources = [{"configMap": volume["configMap"]}]
            elif "projected" in volume:
                sources = volume["projected"]["sources"]
            elif "persistentVolumeClaim" in volume:
                # A claim shared by pods: one directory for all, the pod's subpath linked in.
                claim = self.cluster.root / "claims" / volume["persistentVolumeClaim"]["claimName"]
                shared = claim / expand(mount.get("subPathExpr", mount.get("subPath", "")), self.env)
                shared.mkdir(parents=True, exist_ok=True)
                target.parent.mkdir(parents=True, exist_ok=True)
                if not target.exists():
                    target.symlink_to(shared, target_is_directory=True)
                continue
            elif "emptyDir" in volume:
                target.mkdir(parents=True, exist_ok=True)
                continue
            else:
                raise PodError(f"{self.name}: volume {volume['name']}: unsupported kind")
            target.mkdir(parents=True, exist_ok=True)
            for source in sources:
                kind = "secret" if "secret" in source else "configMap"
                ref = source[kind]
                store = self.cluster.secrets if kind == "secret" else self.cluster.config_maps
                files = store.get(ref["name"])
                if files is None:
                    if ref.get("optional"):
                        continue
                    raise PodError(f"{self.name}: {kind} {ref['name']} does not exist (the pod would not start)")
                # `items` mounts the listed keys alone, each at its path.
                paths = {item["key"]: item["path"] for item in ref.get("items", [])} or {key: key for key in files}
                for key, path in paths.items():
                    content = files[key]
                    (target / path).write_bytes(content if isinstance(content, bytes) else content.encode())

    def command(self) -> list[str]:
        args = [self.localize(expand(arg, self.env)) for arg in self.container.get("args", [])]
        if "command" in self.container:
            return [*(expand(c, self.env) for c in self.container["command"]), *args]
        return ["sh", str(ENTRYPOINT), *args]

    # -- running it ---------------------------------------------------------------

    def start(self) -> None:
        if self.container in self.spec["containers"]:
            self._run_init_containers()
        self._write_volumes()
        self.log.parent.mkdir(parents=True, exist_ok=True)
        wrapped = with_cluster_names(self.cluster.hosts_file, self.command())
        env = {**IMAGE_ENV, "HOME": str(self.root), **self.env}
        with self.log.open("ab") as log:
            self.popen = subprocess.Popen(
                wrapped, env=env, cwd=self.root, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )

    def _run_init_containers(self, timeout: float = 300.0) -> None:
        """Each init container to completion, in order, before the pod's
        container starts (as the kubelet does; it would retry a failed one)."""
        for init in self.spec.get("initContainers", []):
            step = PodProcess(self.cluster, self.workload, self.name, self.address, init["name"])
            step.start()
            assert step.popen is not None
            try:
                code = step.popen.wait(timeout)
            finally:
                step.stop()
            if code != 0:
                raise PodError(f"{self.name}: init container {init['name']} exited with {code}:\n{step.log_tail()}")

    def exited(self) -> int | None:
        assert self.popen is not None
        return self.popen.poll()

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def ready(self) -> bool:
        """The container's readinessProbe, run as the kubelet runs it (plaintext,
        against the pod's address)."""
        probe = self.container["readinessProbe"]
        if "grpc" in probe:
            target = f"{self.address}:{probe['grpc']['port']}"
            try:
                with grpc.insecure_channel(target) as channel:
                    answer = health_pb2_grpc.HealthStub(channel).Check(
                        health_pb2.HealthCheckRequest(service=probe["grpc"].get("service", "")), timeout=2
                    )
                return answer.status == health_pb2.HealthCheckResponse.SERVING
            except grpc.RpcError:
                return False
        if "httpGet" in probe:
            url = f"http://{self.address}:{probe['httpGet']['port']}{probe['httpGet'].get('path', '/')}"
            try:
                with urllib.request.urlopen(url, timeout=2) as response:
                    return 200 <= response.status < 400
            except OSError:
                return False
        if "tcpSocket" in probe:
            with socket.socket() as sock:
                sock.settimeout(2)
                return sock.connect_ex((self.address, int(probe["tcpSocket"]["port"]))) == 0
        raise PodError(f"{self.name}: unsupported probe {probe}")

    def stop(self, grace_seconds: float = 20.0) -> None:
        if self.popen is None or self.popen.poll() is not None:
            return
        os.kill(self.popen.pid, signal.SIGTERM)
        try:
            self.popen.wait(grace_seconds)
        except subprocess.TimeoutExpired:
            os.kill(self.popen.pid, signal.SIGKILL)
            self.popen.wait(30)
