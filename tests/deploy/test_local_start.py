"""Each overlay, started: every service runs locally with the
environment, arguments and files its rendered pod spec gives it
(tests/deploy/podrun.py says how near that is to a kubelet), becomes ready by
its own readiness probe, the init Job completes, and a ledger round-trips
through the gateway with the credential source the overlay configures
(production: a client certificate mapped to roles; dev: plaintext, no
authentication), while the metrics endpoint answers a scraper configured as
the overlay says (production: the PodMonitor; dev: the scrape annotations).

The Secrets are made the manual way deploy/README.md documents (`quire dev
certs --kubernetes-namespace`), whose names and identities test_manifests holds
equal to components/cert-manager's Certificates. Not exercised (no
API server): scheduling, claims binding, Services' virtual IPs and load
balancing (a Service name resolves to its one pod here), NetworkPolicy,
cert-manager itself, the Prometheus Operator itself."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.deploy.kustomize import render
from tests.deploy.podrun import Cluster, PodError, PodProcess, mount_namespaces_work, with_cluster_names
from tests.deploy.test_manifests import KUBERNETES, named, of_kind

pytestmark = pytest.mark.deploy

NAMESPACES = {"dev": "quire-dev", "production": "quire"}
# Fewer replicas than production asks for: one machine, two cores. etcd keeps its
# three members (the peer TLS path); bookies three, the smallest ensemble.
PODS = [
    ("StatefulSet", "quire-etcd", ["quire-etcd-0", "quire-etcd-1", "quire-etcd-2"]),
    ("Deployment", "quire-registry", ["quire-registry-0"]),
    ("Deployment", "quire-placement", ["quire-placement-0"]),
    ("StatefulSet", "quire-bookie", ["quire-bookie-0", "quire-bookie-1", "quire-bookie-2"]),
    ("Deployment", "quire-gateway", ["quire-gateway-0"]),
]
READY_SECONDS = 180.0


def secrets_from_dev_certs(directory: Path, namespace: str) -> dict[str, dict[str, bytes]]:
    """The manual way deploy/README.md gives: `quire dev certs --kubernetes-namespace`
    writes one directory per Secret (test_manifests checks that components/cert-manager
    asks for the same names and identities)."""
    quire = str(Path(sys.executable).parent / "quire")
    subprocess.run(
        [quire, "dev", "certs", "--out", str(directory), "--kubernetes-namespace", namespace],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return {
        secret.name: {item.name: item.read_bytes() for item in secret.iterdir()}
        for secret in (directory / "kubernetes").iterdir()
    }


def wait_ready(pods: list[PodProcess]) -> None:
    deadline = time.monotonic() + READY_SECONDS
    waiting = list(pods)
    while waiting:
        for pod in list(waiting):
            if pod.exited() is not None:
                raise PodError(f"{pod.name} exited with {pod.exited()}:\n{pod.log_tail()}")
            if pod.ready():
                waiting.remove(pod)
        if waiting and time.monotonic() > deadline:
            raise PodError("not ready: " + ", ".join(f"{p.name}:\n{p.log_tail(15)}" for p in waiting))
        time.sleep(0.5)


@pytest.fixture(scope="module", params=sorted(NAMESPACES))
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    why_not = mount_namespaces_work()
    if why_not:
        pytest.skip(why_not)
    overlay = request.param
    manifests = render(KUBERNETES / "overlays" / overlay)
    root = tmp_path_factory.mktemp(overlay)
    secrets = secrets_from_dev_certs(root / "certs", NAMESPACES[overlay])
    started = Cluster(manifests, secrets, root, NAMESPACES[overlay])
    try:
        for kind, name, pod_names in PODS:
            workload = named(manifests, kind, name)
            pods = [started.pod(workload, pod_name) for pod_name in pod_names]
            for pod in pods:
                pod.start()
            wait_ready(pods)
        yield started
    finally:
        started.stop_all()


def run_in_cluster(cluster: Cluster, script_and_args: list[str]) -> subprocess.CompletedProcess[str]:
    """A Python snippet with the cluster's names resolving (a client pod)."""
    return subprocess.run(
        with_cluster_names(cluster.hosts_file, [sys.executable, "-c", *script_and_args]),
        capture_output=True,
        text=True,
        timeout=180,
    )


def tls_on(cluster: Cluster) -> bool:
    return named(cluster.manifests, "ConfigMap", "quire-config")["data"]["QUIRE_INSECURE_PLAINTEXT_DEV"] == "false"


def test_every_service_becomes_ready_by_its_own_readiness_probe(cluster: Cluster) -> None:
    for name, pod in cluster.pods.items():
        assert pod.exited() is None, name
        assert pod.ready(), name
    if tls_on(cluster):
        # The registry is ready only once it reached etcd: over TLS, with its certificate.
        assert cluster.pods["quire-registry-0"].env["QUIRE_ETCD_CA"].endswith("/etc/quire/tls/ca.crt")
        assert "--client-cert-auth" in cluster.pods["quire-etcd-0"].command()


def test_the_init_job_completes(cluster: Cluster) -> None:
    job = cluster.pod(named(cluster.manifests, "Job", "quire-init"), "quire-init-local")
    job.start()
    assert job.popen is not None
    try:
        code = job.popen.wait(timeout=300)
    finally:
        job.stop()
    assert code == 0, job.log_tail()
    assert "writable bookies" in job.log.read_text()


CLIENT = """
import json, ssl, sys, urllib.request
from pathlib import Path
from quire_client.client import ClientTls, QuireClient
from quire_api.ids import ledger_id_from_proto
given = json.loads(sys.argv[1])
tls = context = None
if given["tls"]:
    d = Path(given["tls"])
    tls = ClientTls(d / "ca.crt", d / "tls.crt", d / "tls.key")
    context = ssl.create_default_context(cafile=str(d / "ca.crt"))
with QuireClient("quire-gateway:7000", tls=tls) as client:
    ledger = ledger_id_from_proto(client.create_ledger().ledger_id)
    client.append_all(ledger, [b"first", b"second"])
    client.close_ledger(ledger)
    payloads = [entry.payload.decode() for entry in client.read(ledger)]
# Scraped as the overlay says: with TLS as the PodMonitor (https, the cluster CA,
# the Service name, the admin token); in dev as the annotations (plain http).
url = given["metrics_url"]
headers = {"Authorization": "Bearer " + given["token"]} if given["token"] else {}
with urllib.request.urlopen(urllib.request.Request(url, headers=headers), context=context, timeout=10) as response:
    metrics = response.read().decode()
refused = None
try:
    urllib.request.urlopen(url, context=context, timeout=10)
except urllib.error.HTTPError as error:
    refused = error.code
print(json.dumps({"payloads": payloads, "metrics": len(metrics), "refused": refused}))
"""


def test_a_ledger_round_trips_through_the_gateway_and_metrics_are_scraped(cluster: Cluster) -> None:
    given: dict[str, str | None] = {"tls": None, "token": None}
    gateway = named(cluster.manifests, "Deployment", "quire-gateway")["spec"]["template"]
    if tls_on(cluster):
        # The overlay's credential source: a client certificate whose name client-roles.json maps to roles.
        directory = cluster.root / "client"
        directory.mkdir(exist_ok=True)
        for key, content in cluster.secrets["quire-client-admin-tls"].items():
            (directory / key).write_bytes(content)
        # Its ca.crt is the client CA; the gateway's certificate is the service CA's.
        (directory / "ca.crt").write_bytes(cluster.secrets["quire-gateway-tls"]["ca.crt"])
        monitor = named(cluster.manifests, "PodMonitor", "quire-gateway")["spec"]["podMetricsEndpoints"][0]
        (port,) = [
            p["containerPort"] for p in gateway["spec"]["containers"][0]["ports"] if p["name"] == monitor["port"]
        ]
        secret = monitor["authorization"]["credentials"]
        given |= {
            "tls": str(directory),
            "token": cluster.secrets[secret["name"]][secret["key"]].decode(),
            "metrics_url": f"{monitor['scheme']}://{monitor['tlsConfig']['serverName']}:{port}{monitor['path']}",
        }
    else:
        annotations = gateway["metadata"]["annotations"]
        given["metrics_url"] = (
            f"{annotations['prometheus.io/scheme']}://quire-gateway:{annotations['prometheus.io/port']}"
            f"{annotations['prometheus.io/path']}"
        )
    result = run_in_cluster(cluster, [CLIENT, json.dumps(given)])
    assert result.returncode == 0, result.stderr[-3000:] + "\n" + cluster.pods["quire-gateway-0"].log_tail()
    outcome = json.loads(result.stdout.strip().splitlines()[-1])
    assert outcome["payloads"] == ["first", "second"]
    assert outcome["metrics"] > 0
    # With TLS the admin endpoint refuses a scrape without the token; dev's is open.
    assert outcome["refused"] == (401 if tls_on(cluster) else None)


def etcdctl(cluster: Cluster, args: list[str], user: str = "", tls: bool = True) -> subprocess.CompletedProcess[str]:
    """etcdctl from a pod that is not the registry's, with the registry's certificate when `tls`."""
    endpoint = named(cluster.manifests, "ConfigMap", "quire-config")["data"]["QUIRE_ETCD_ENDPOINTS"]
    flags = [f"--endpoints={'https' if tls_on(cluster) else 'http'}://{endpoint}", "--dial-timeout=5s"]
    if tls:
        directory = cluster.root / "etcd-client"
        directory.mkdir(exist_ok=True)
        for key, content in cluster.secrets["quire-registry-tls"].items():
            (directory / key).write_bytes(content)
        flags += [
            f"--cacert={directory / 'ca.crt'}",
            f"--cert={directory / 'tls.crt'}",
            f"--key={directory / 'tls.key'}",
        ]
    if user:
        flags.append(f"--user={user}")
    etcdctl_binary = shutil.which("etcdctl") or "/usr/bin/etcdctl"
    return subprocess.run(
        with_cluster_names(cluster.hosts_file, ["env", "ETCDCTL_API=3", etcdctl_binary, *flags, *args]),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_etcd_answers_only_the_registry_user_in_production_and_anyone_in_dev(cluster: Cluster) -> None:
    """Production's etcd runs with TLS and authentication as rendered (the
    registry pod's lock-down step turned it on); dev's is the open control."""
    config = named(cluster.manifests, "ConfigMap", "quire-config")["data"]
    prefix = f"/quire/{config['QUIRE_CLUSTER']}/"
    if not tls_on(cluster):
        anonymous = etcdctl(cluster, ["get", prefix, "--prefix", "--keys-only"], tls=False)
        assert anonymous.returncode == 0 and prefix in anonymous.stdout, anonymous.stderr
        return
    assert etcdctl(cluster, ["get", prefix, "--prefix"], tls=False).returncode != 0
    certificate_only = etcdctl(cluster, ["get", prefix, "--prefix"])
    assert certificate_only.returncode != 0 and certificate_only.stdout == ""
    password = cluster.secrets["quire-etcd-registry"]["password"].decode().strip()
    user = f"{config['QUIRE_ETCD_USER']}:{password}"
    assert etcdctl(cluster, ["get", prefix, "--prefix", "--keys-only"], user=user).returncode == 0
    outside = etcdctl(cluster, ["get", "/", "--prefix", "--keys-only"], user=user)
    assert outside.returncode != 0 and "permission denied" in outside.stderr
    root = cluster.secrets["quire-etcd-root"]["password"].decode().strip()
    assert "quire-registry" in etcdctl(cluster, ["user", "list"], user=f"root:{root}").stdout


def test_control_without_a_credential_source_the_gateway_refuses_to_start(tmp_path: Path) -> None:
    """The check above can fail: with the overlay's credential settings taken out (as
    the production overlay once was), the gateway pod exits 2 naming what is missing."""
    why_not = mount_namespaces_work()
    if why_not:
        pytest.skip(why_not)
    tree = tmp_path / "kubernetes"
    shutil.copytree(KUBERNETES, tree)
    kustomization = tree / "overlays" / "production" / "kustomization.yaml"
    text = kustomization.read_text()
    for setting in ("QUIRE_AUTH_JWT_KEY_FILE", "QUIRE_AUTH_CLIENT_CERT_ROLES"):
        text = re.sub(rf"      - {setting}=.*\n", "", text)
    kustomization.write_text(text)
    manifests = render(tree / "overlays" / "production")
    cluster = Cluster(manifests, secrets_from_dev_certs(tmp_path / "certs", "quire"), tmp_path / "run", "quire")
    gateway = cluster.pod(named(manifests, "Deployment", "quire-gateway"), "quire-gateway-0")
    try:
        gateway.start()
        assert gateway.popen is not None
        code = gateway.popen.wait(timeout=120)
    finally:
        cluster.stop_all()
    assert code == 2, gateway.log_tail()
    assert "QUIRE_AUTH_JWT_KEY_FILE" in gateway.log.read_text()


def test_telemetry_files_land_per_pod_on_the_shared_claim_only_where_the_component_is(cluster: Cluster) -> None:
    claim = cluster.root / "claims" / "quire-telemetry"
    if not of_kind(cluster.manifests, "CronJob"):
        assert not claim.exists()  # production: no shared volume, no files
        return
    deadline = time.monotonic() + 60
    while not list((claim / "quire-gateway-0").glob("*.jsonl")):
        assert time.monotonic() < deadline, sorted(str(p) for p in claim.rglob("*"))
        time.sleep(0.5)
    assert {path.name for path in claim.iterdir()} >= {"quire-registry-0", "quire-gateway-0", "quire-bookie-0"}
