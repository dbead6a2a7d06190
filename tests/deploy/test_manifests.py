"""The Kubernetes manifests in deploy/kubernetes/, rendered per overlay and checked
offline: against the Kubernetes schemas (`kubernetes-validate --strict`) and for
the references between objects that no schema can see."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from quire_client.devcerts import KUBERNETES_CLIENT_SECRETS, kubernetes_identities
from quire_proto.bookie.v1 import bookie_pb2
from quire_proto.gateway.v1 import ledger_pb2
from quire_proto.placement.v1 import placement_pb2
from quire_proto.registry.v1 import registry_pb2
from tests.deploy.kustomize import KustomizeError, Manifest, pod_spec, render
from tests.telemetry.standalone import documented_submit_command

pytestmark = pytest.mark.deploy

ROOT = Path(__file__).resolve().parents[2]
KUBERNETES = ROOT / "deploy" / "kubernetes"
OVERLAYS = sorted(path.name for path in (KUBERNETES / "overlays").iterdir() if path.is_dir())
# A Kubernetes release kubernetes-validate bundles schemas for, and one a
# cluster is likely to run; native gRPC probes are GA since 1.27.
KUBERNETES_VERSION = "1.33.0"
# Read only by the init Job's own script; every other setting must be documented.
PENDING_OR_LOCAL_SETTINGS = {"QUIRE_INIT_MIN_BOOKIES"}
CUSTOM_API_VERSIONS = {"cert-manager.io/v1", "monitoring.coreos.com/v1"}
GRPC_SERVICES = {
    descriptor.services_by_name[name].full_name
    for descriptor, name in [
        (bookie_pb2.DESCRIPTOR, "BookieService"),
        (ledger_pb2.DESCRIPTOR, "LedgerService"),
        (placement_pb2.DESCRIPTOR, "PlacementService"),
        (registry_pb2.DESCRIPTOR, "RegistryService"),
    ]
}

ALERT_RULES = (Path(__file__).resolve().parents[2] / "deploy" / "monitoring" / "alerts.yaml").read_text()


@pytest.fixture(scope="module", params=OVERLAYS)
def rendered(request: pytest.FixtureRequest) -> list[Manifest]:
    return render(KUBERNETES / "overlays" / request.param)


def workloads(manifests: list[Manifest]) -> Iterator[tuple[Manifest, Manifest]]:
    for manifest in manifests:
        spec = pod_spec(manifest)
        if spec is not None:
            yield manifest, spec


def template_labels(manifest: Manifest) -> dict[str, str]:
    if manifest["kind"] == "CronJob":
        return dict(manifest["spec"]["jobTemplate"]["spec"]["template"]["metadata"].get("labels", {}))
    return dict(manifest["spec"]["template"]["metadata"].get("labels", {}))


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


def of_kind(manifests: list[Manifest], kind: str) -> list[Manifest]:
    return [m for m in manifests if m["kind"] == kind]


def named(manifests: list[Manifest], kind: str, name: str) -> Manifest:
    """The object `name` of `kind`; a generated ConfigMap by its name before the hash suffix."""
    matches = [m for m in of_kind(manifests, kind) if m["metadata"]["name"] == name]
    if kind == "ConfigMap" and not matches:
        matches = [
            m for m in of_kind(manifests, kind) if re.fullmatch(rf"{name}-[a-z0-9]{{10}}", m["metadata"]["name"])
        ]
    assert len(matches) == 1, f"{kind}/{name}: {len(matches)} objects"
    return matches[0]


def containers(spec: Manifest) -> list[Manifest]:
    return [*spec.get("initContainers", []), *spec.get("containers", [])]


def env_value(container: Manifest, name: str) -> Manifest:
    matches = [entry for entry in container.get("env", []) if entry["name"] == name]
    assert len(matches) == 1, f"{container['name']}: {name} set {len(matches)} times"
    return matches[0]


# -- schemas ---------------------------------------------------------------------


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_rendered_manifest_passes_strict_schema_validation(overlay: str, tmp_path: Path) -> None:
    # Custom resources (cert-manager, Prometheus Operator) have no schema there:
    # test_custom_resources_have_the_fields_their_operators_need checks them.
    manifests = [m for m in render(KUBERNETES / "overlays" / overlay) if m["apiVersion"] not in CUSTOM_API_VERSIONS]
    output = tmp_path / f"{overlay}.yaml"
    output.write_text(yaml.safe_dump_all(manifests, sort_keys=False))
    result = subprocess.run(
        [
            str(Path(sys.executable).parent / "kubernetes-validate"),
            "--strict",
            "--kubernetes-version",
            KUBERNETES_VERSION,
            "--quiet",
            str(output),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_strict_validation_rejects_an_unknown_field(tmp_path: Path) -> None:
    # The check above can fail: a misspelt field is caught.
    manifests = render(KUBERNETES / "overlays" / OVERLAYS[0])
    _, spec = next(workloads(manifests))
    spec["containers"][0]["livenesProbe"] = {"tcpSocket": {"port": 1}}
    output = tmp_path / "broken.yaml"
    output.write_text(yaml.safe_dump_all(manifests))
    result = subprocess.run(
        [str(Path(sys.executable).parent / "kubernetes-validate"), "--strict", "-k", KUBERNETES_VERSION, str(output)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert "livenesProbe" in result.stdout + result.stderr


def test_the_renderer_refuses_kustomize_features_it_does_not_implement(tmp_path: Path) -> None:
    (tmp_path / "kustomization.yaml").write_text("resources: []\ncommonLabels: {team: x}\n")
    with pytest.raises(KustomizeError, match="commonLabels"):
        render(tmp_path)


# -- references between objects --------------------------------------------------


def test_every_service_selects_pods_that_exist_and_targets_declared_ports(rendered: list[Manifest]) -> None:
    for service in of_kind(rendered, "Service"):
        selector = service["spec"]["selector"]
        pods = [(m, spec) for m, spec in workloads(rendered) if selects(selector, template_labels(m))]
        assert pods, f"Service {service['metadata']['name']} selects no pods"
        for port in service["spec"]["ports"]:
            target = port.get("targetPort", port["port"])
            for workload, spec in pods:
                declared = {p.get("name") for c in spec["containers"] for p in c.get("ports", [])} | {
                    p["containerPort"] for c in spec["containers"] for p in c.get("ports", [])
                }
                assert target in declared, (
                    f"Service {service['metadata']['name']} targets port {target!r}, "
                    f"not declared by {workload['kind']}/{workload['metadata']['name']}"
                )


def test_workload_and_disruption_budget_selectors_match_pods(rendered: list[Manifest]) -> None:
    for workload, _ in workloads(rendered):
        if workload["kind"] in ("Deployment", "StatefulSet"):
            assert selects(workload["spec"]["selector"]["matchLabels"], template_labels(workload))
    budgets = of_kind(rendered, "PodDisruptionBudget")
    assert {b["metadata"]["name"] for b in budgets} >= {
        "quire-etcd",
        "quire-bookie",
        "quire-registry",
        "quire-placement",
        "quire-gateway",
    }
    for budget in budgets:
        selector = budget["spec"]["selector"]["matchLabels"]
        assert any(selects(selector, template_labels(m)) for m, _ in workloads(rendered)), budget["metadata"]["name"]


def test_every_probe_port_is_a_declared_container_port(rendered: list[Manifest]) -> None:
    probes_seen = 0
    for workload, spec in workloads(rendered):
        for container in containers(spec):
            declared = {p["containerPort"] for p in container.get("ports", [])} | {
                p["name"] for p in container.get("ports", []) if "name" in p
            }
            for kind in ("livenessProbe", "readinessProbe", "startupProbe"):
                probe = container.get(kind)
                if probe is None:
                    continue
                probes_seen += 1
                handler = probe.get("grpc") or probe.get("httpGet") or probe.get("tcpSocket")
                assert handler is not None, f"{workload['metadata']['name']}/{container['name']} {kind}"
                assert handler["port"] in declared, (
                    f"{workload['metadata']['name']}/{container['name']} {kind} uses port {handler['port']}, "
                    f"not one of {sorted(map(str, declared))}"
                )
                if "grpc" in probe and "service" in probe["grpc"]:
                    assert probe["grpc"]["service"] in GRPC_SERVICES
    assert probes_seen >= 10


def test_every_configmap_key_used_exists(rendered: list[Manifest]) -> None:
    maps = {m["metadata"]["name"]: m.get("data", {}) for m in of_kind(rendered, "ConfigMap")}
    used = 0
    for workload, spec in workloads(rendered):
        for container in containers(spec):
            for source in container.get("envFrom", []):
                if "configMapRef" in source:
                    assert source["configMapRef"]["name"] in maps
            for entry in container.get("env", []):
                ref = entry.get("valueFrom", {}).get("configMapKeyRef")
                if ref is None:
                    continue
                used += 1
                where = f"{workload['metadata']['name']}/{container['name']} {entry['name']}"
                assert ref["name"] in maps, f"{where}: no ConfigMap {ref['name']}"
                assert ref["key"] in maps[ref["name"]], f"{where}: ConfigMap {ref['name']} has no key {ref['key']}"
    assert used > 0


def test_every_volume_claim_and_mount_resolves(rendered: list[Manifest]) -> None:
    claims = {m["metadata"]["name"] for m in of_kind(rendered, "PersistentVolumeClaim")}
    for workload, spec in workloads(rendered):
        volumes = {v["name"] for v in spec.get("volumes", [])}
        if workload["kind"] == "StatefulSet":
            volumes |= {t["metadata"]["name"] for t in workload["spec"].get("volumeClaimTemplates", [])}
        for volume in spec.get("volumes", []):
            if "persistentVolumeClaim" in volume:
                assert volume["persistentVolumeClaim"]["claimName"] in claims
        for container in containers(spec):
            for mount in container.get("volumeMounts", []):
                assert mount["name"] in volumes, f"{workload['metadata']['name']}: no volume {mount['name']}"


def test_every_quire_setting_used_is_a_documented_one(rendered: list[Manifest]) -> None:
    documented = set(re.findall(r"`(QUIRE_[A-Z0-9_]+)`", (ROOT / "docs" / "configuration.md").read_text()))
    for workload, spec in workloads(rendered):
        for container in containers(spec):
            for entry in container.get("env", []):
                name = entry["name"]
                if name.startswith("QUIRE_"):
                    assert name in documented | PENDING_OR_LOCAL_SETTINGS, (
                        f"{workload['metadata']['name']}: {name} is not in docs/configuration.md"
                    )
    for key in named(rendered, "ConfigMap", "quire-config").get("data", {}):
        assert key in documented | PENDING_OR_LOCAL_SETTINGS, f"ConfigMap key {key} is not documented"


def test_every_container_runs_an_entrypoint_mode_of_the_image(rendered: list[Manifest]) -> None:
    entrypoint = (ROOT / "deploy" / "image" / "quire-image-entrypoint").read_text()
    modes = set(re.findall(r"^\s+([a-z]+)\)", entrypoint, re.MULTILINE))
    assert {"registry", "bookie", "placement", "gateway", "etcd", "standalone", "telemetry", "quire"} <= modes
    for workload, spec in workloads(rendered):
        for container in containers(spec):
            if "command" in container:  # bypasses the entry point on purpose (the init Job's script)
                continue
            assert container["args"][0] in modes, f"{workload['metadata']['name']}: {container['args'][0]}"


# -- the shape the issue asks for -------------------------------------------------


def test_etcd_is_a_statefulset_of_three_with_volumes_and_a_headless_service(rendered: list[Manifest]) -> None:
    etcd = named(rendered, "StatefulSet", "quire-etcd")
    assert etcd["spec"]["replicas"] == 3
    assert [t["metadata"]["name"] for t in etcd["spec"]["volumeClaimTemplates"]] == ["data"]
    headless = named(rendered, "Service", etcd["spec"]["serviceName"])
    assert headless["spec"]["clusterIP"] == "None"
    args = etcd["spec"]["template"]["spec"]["containers"][0]["args"]
    cluster = next(a for a in args if a.startswith("--initial-cluster="))
    members = cluster.removeprefix("--initial-cluster=").split(",")
    assert [member.split("=")[0] for member in members] == [f"quire-etcd-{i}" for i in range(3)]


def test_bookies_use_the_pod_name_as_bookie_id_and_its_dns_name_as_address(rendered: list[Manifest]) -> None:
    bookies = named(rendered, "StatefulSet", "quire-bookie")
    service = named(rendered, "Service", bookies["spec"]["serviceName"])
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["publishNotReadyAddresses"] is True
    spec = bookies["spec"]["template"]["spec"]
    bookie = spec["containers"][0]
    assert env_value(bookie, "QUIRE_BOOKIE_ID")["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert env_value(bookie, "POD_NAME")["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    advertised = env_value(bookie, "QUIRE_BOOKIE_ADVERTISED_HOST")["value"]
    assert advertised == f"$(POD_NAME).{service['metadata']['name']}.$(POD_NAMESPACE).svc"
    assert env_value(bookie, "QUIRE_BOOKIE_LISTEN_HOST")["value"] == "0.0.0.0"
    # The data directory lives on the pod's own persistent volume.
    data_dir = env_value(bookie, "QUIRE_BOOKIE_DATA_DIR")["value"]
    claim_names = {t["metadata"]["name"] for t in bookies["spec"]["volumeClaimTemplates"]}
    mounts = [m for m in bookie["volumeMounts"] if m["name"] in claim_names]
    assert any(data_dir.startswith(m["mountPath"] + "/") for m in mounts)
    # A read-only bookie stays live: liveness asks only about the process.
    assert "service" not in bookie["livenessProbe"]["grpc"]
    assert bookie["readinessProbe"]["grpc"]["service"] == "quire.bookie.v1.BookieService"
    # Probes use the plaintext health-only port: Kubernetes' gRPC probes cannot speak TLS.
    config = named(rendered, "ConfigMap", "quire-config")["data"]
    assert bookie["livenessProbe"]["grpc"]["port"] == int(config["QUIRE_HEALTH_PROBE_PORT"])


def test_quire_services_mount_their_tls_secret_and_dev_runs_plaintext(rendered: list[Manifest]) -> None:
    config = named(rendered, "ConfigMap", "quire-config")["data"]
    dev = rendered[0]["metadata"]["name"] == "quire-dev"
    assert config["QUIRE_INSECURE_PLAINTEXT_DEV"] == ("true" if dev else "false")
    for kind, name in (
        ("StatefulSet", "quire-bookie"),
        ("Deployment", "quire-registry"),
        ("Deployment", "quire-placement"),
        ("Deployment", "quire-gateway"),
    ):
        spec = named(rendered, kind, name)["spec"]["template"]["spec"]
        secrets = {v["secret"]["secretName"] for v in spec["volumes"] if "secret" in v}
        # The gateway also trusts the client CA (its certificate only); internal services do not.
        # Production's registry also has its etcd password, and root's for its lock-down step only.
        client_ca = {"quire-client-ca"} if name == "quire-gateway" else set()
        etcd_auth = {"quire-etcd-root", "quire-etcd-registry"} if name == "quire-registry" and not dev else set()
        assert secrets == {f"{name}-tls"} | client_ca | etcd_auth, name
        (container,) = spec["containers"]
        assert any(m["mountPath"] == "/etc/quire/tls" for m in container["volumeMounts"]), name
        assert env_value(container, "QUIRE_TLS_CERT")["valueFrom"]["configMapKeyRef"]["key"] == "QUIRE_TLS_CERT"


@pytest.mark.parametrize(
    ("kind", "name", "setting"),
    [
        ("StatefulSet", "quire-bookie", "QUIRE_BOOKIE_HTTP_PORT"),
        ("Deployment", "quire-registry", "QUIRE_REGISTRY_HTTP_PORT"),
        ("Deployment", "quire-placement", "QUIRE_PLACEMENT_HTTP_PORT"),
        ("Deployment", "quire-gateway", "QUIRE_GATEWAY_HTTP_PORT"),
    ],
)
def test_prometheus_scrapes_each_service_admin_port_as_it_is_served(
    rendered: list[Manifest], kind: str, name: str, setting: str
) -> None:
    """Plaintext (dev): the scrape annotations, plain HTTP. TLS: no annotations (they
    cannot carry a CA or a token) but a PodMonitor with https, the CA, the Service
    name the certificate carries and the admin token."""
    workload = named(rendered, kind, name)
    container = workload["spec"]["template"]["spec"]["containers"][0]
    http_port = int(env_value(container, setting)["value"])
    assert http_port in {p["containerPort"] for p in container["ports"] if p.get("name") == "http"}
    annotations = workload["spec"]["template"]["metadata"].get("annotations", {})
    plaintext = named(rendered, "ConfigMap", "quire-config")["data"]["QUIRE_INSECURE_PLAINTEXT_DEV"] == "true"
    if plaintext:
        assert annotations["prometheus.io/scrape"] == "true"
        assert annotations["prometheus.io/scheme"] == "http"
        assert annotations["prometheus.io/path"] == "/metrics"
        assert int(annotations["prometheus.io/port"]) == http_port
        assert not of_kind(rendered, "PodMonitor")
        return
    assert not any(key.startswith("prometheus.io/") for key in annotations)
    monitor = named(rendered, "PodMonitor", name)
    assert selects(monitor["spec"]["selector"]["matchLabels"], template_labels(workload))
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    assert (endpoint["port"], endpoint["path"], endpoint["scheme"]) == ("http", "/metrics", "https")
    assert endpoint["tlsConfig"]["ca"]["secret"]["key"] == "ca.crt"
    certificate = named(rendered, "Certificate", f"{name}-tls")
    assert endpoint["tlsConfig"]["serverName"] in certificate["spec"]["dnsNames"]
    assert endpoint["authorization"]["type"] == "Bearer"
    assert endpoint["authorization"]["credentials"]["name"] == "quire-metrics-token"
    # The alert rules select by job; the PodMonitor names it after the Service.
    (job,) = [r for r in endpoint.get("relabelings", []) if r.get("targetLabel") == "job"]
    assert (job["action"], job["replacement"]) == ("replace", name)


def test_every_job_the_alert_rules_select_is_one_a_pod_monitor_names() -> None:
    production = render(KUBERNETES / "overlays" / "production")
    jobs = {
        relabeling["replacement"]
        for monitor in of_kind(production, "PodMonitor")
        for endpoint in monitor["spec"]["podMetricsEndpoints"]
        for relabeling in endpoint.get("relabelings", [])
        if relabeling.get("targetLabel") == "job"
    }
    selected = set(re.findall(r'job="([^"]+)"', ALERT_RULES))
    assert selected and selected <= jobs, (selected, jobs)


def test_stateless_services_run_two_or_more_replicas_behind_services(rendered: list[Manifest]) -> None:
    for name in ("quire-registry", "quire-placement", "quire-gateway"):
        deployment = named(rendered, "Deployment", name)
        assert deployment["spec"]["replicas"] >= 2
        named(rendered, "Service", name)
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        assert "grpc" in container["livenessProbe"] and "grpc" in container["readinessProbe"]


def test_pods_are_non_root_bounded_and_given_time_to_drain(rendered: list[Manifest]) -> None:
    for workload, spec in workloads(rendered):
        name = workload["metadata"]["name"]
        assert spec["securityContext"]["runAsNonRoot"] is True, name
        assert spec["securityContext"]["runAsUser"] != 0, name
        for container in containers(spec):
            assert container["securityContext"]["allowPrivilegeEscalation"] is False, name
            assert container["securityContext"]["capabilities"]["drop"] == ["ALL"], name
            resources = container["resources"]
            assert {"cpu", "memory"} <= set(resources["requests"]) and {"cpu", "memory"} <= set(resources["limits"])
    bookies = named(rendered, "StatefulSet", "quire-bookie")["spec"]["template"]["spec"]
    assert bookies["terminationGracePeriodSeconds"] >= 30


def test_bookies_and_etcd_spread_over_nodes(rendered: list[Manifest]) -> None:
    for name in ("quire-bookie", "quire-etcd"):
        anti: dict[str, Any] = named(rendered, "StatefulSet", name)["spec"]["template"]["spec"]["affinity"][
            "podAntiAffinity"
        ]
        terms = [t["podAffinityTerm"] for t in anti.get("preferredDuringSchedulingIgnoredDuringExecution", [])]
        terms += anti.get("requiredDuringSchedulingIgnoredDuringExecution", [])
        assert any(t["topologyKey"] == "kubernetes.io/hostname" for t in terms), name


def test_init_job_and_telemetry_cronjob_exist(rendered: list[Manifest]) -> None:
    init = named(rendered, "Job", "quire-init")
    script = init["spec"]["template"]["spec"]["containers"][0]["args"][0]
    assert "quire --direct bookie list" in script  # the registry itself, with the operator identity
    if not of_kind(rendered, "CronJob"):
        return  # components/shared-telemetry not included
    cron = named(rendered, "CronJob", "quire-telemetry")
    args = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args == ["telemetry", "analyze", "--input", "/telemetry", "--output", "/reports", "--publish"]


def test_the_spark_cronjob_runs_the_documented_spark_submit() -> None:
    manifests = render(KUBERNETES / "overlays" / "dev-spark")
    spec = pod_spec(named(manifests, "CronJob", "quire-telemetry-spark"))
    assert spec is not None
    (container,) = spec["containers"]
    shell, flag, script = container["command"]
    assert (shell, flag) == ("/bin/sh", "-c") and "args" not in container
    # What tests/telemetry/test_standalone.py runs against a real standalone cluster.
    assert documented_submit_command() in script
    env = {entry["name"]: entry for entry in container["env"]}
    assert {"SPARK_MASTER", "TELEMETRY", "REPORTS", "REGISTRY", "SPARK_LOCAL_IP"} <= set(env)
    mounts = {mount["mountPath"]: mount["name"] for mount in container["volumeMounts"]}
    assert {env["TELEMETRY"]["value"], env["REPORTS"]["value"], env["SPARK_CONF_DIR"]["value"]} <= set(mounts)
    # The executors reach the driver on the ports spark-defaults.conf fixes, which the pod declares.
    spark_conf = named(manifests, "ConfigMap", "quire-spark")["data"]["spark-defaults.conf"]
    fixed = {
        int(value)
        for key, value in (line.split() for line in spark_conf.splitlines() if line and not line.startswith("#"))
        if key.endswith(".port")
    }
    assert fixed == {port["containerPort"] for port in container["ports"]}
    # One stage publishes: the local-mode CronJob stays, suspended.
    assert named(manifests, "CronJob", "quire-telemetry")["spec"]["suspend"] is True


def test_production_overlay_requires_spreading_and_uses_its_registry() -> None:
    manifests = render(KUBERNETES / "overlays" / "production")
    for name in ("quire-bookie", "quire-etcd"):
        anti = named(manifests, "StatefulSet", name)["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
        assert anti["requiredDuringSchedulingIgnoredDuringExecution"]
    for _, spec in workloads(manifests):
        for container in containers(spec):
            assert container["image"].startswith(
                ("registry.example.com/quire:", "registry.example.com/quire-telemetry:")
            )
    assert {m["metadata"].get("namespace") for m in manifests if m["kind"] != "Namespace"} == {"quire"}


# -- what a production cluster needs to start (issue 16) ------------------------


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_renderer_agrees_with_kubectl_kustomize(overlay: str) -> None:
    result = subprocess.run(
        ["kubectl", "kustomize", str(KUBERNETES / "overlays" / overlay)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    theirs = {identity(m): m for m in yaml.safe_load_all(result.stdout) if m}
    ours = {identity(m): m for m in render(KUBERNETES / "overlays" / overlay)}
    assert sorted(ours) == sorted(theirs)
    for key, manifest in ours.items():
        assert manifest == theirs[key], key


def identity(manifest: Manifest) -> tuple[str, str, str]:
    return manifest["kind"], manifest["metadata"].get("namespace", ""), manifest["metadata"]["name"]


def test_a_changed_setting_changes_every_pod_template_that_reads_it(tmp_path: Path) -> None:
    """quire-config is generated with a content hash in its name: editing a value
    renames it, so every workload reading it gets a new template and rolls."""
    tree = tmp_path / "kubernetes"
    shutil.copytree(KUBERNETES, tree)
    before = render(tree / "overlays" / "production")
    kustomization = tree / "overlays" / "production" / "kustomization.yaml"
    kustomization.write_text(
        kustomization.read_text().replace(
            "      - QUIRE_ETCD_CA=", "      - QUIRE_LOG_LEVEL=DEBUG\n      - QUIRE_ETCD_CA="
        )
    )
    after = render(tree / "overlays" / "production")
    old, new = (named(m, "ConfigMap", "quire-config")["metadata"]["name"] for m in (before, after))
    assert old != new
    readers = 0
    for workload, spec in workloads(after):
        names = {
            entry["valueFrom"]["configMapKeyRef"]["name"]
            for container in containers(spec)
            for entry in container.get("env", [])
            if "configMapKeyRef" in entry.get("valueFrom", {})
        }
        assert old not in names, workload["metadata"]["name"]
        readers += new in names
    assert readers >= 5  # the four services and the init Job


def test_the_renderer_refuses_a_kustomization_among_components(tmp_path: Path) -> None:
    (tmp_path / "part").mkdir()
    (tmp_path / "part" / "kustomization.yaml").write_text("kind: Kustomization\nresources: []\n")
    (tmp_path / "kustomization.yaml").write_text("components: [part]\n")
    with pytest.raises(KustomizeError, match="Component"):
        render(tmp_path)


def test_no_claim_needs_read_write_many_unless_shared_telemetry_is_chosen(rendered: list[Manifest]) -> None:
    shared_telemetry = any(m["kind"] == "CronJob" for m in rendered)
    modes = {mode for claim in of_kind(rendered, "PersistentVolumeClaim") for mode in claim["spec"]["accessModes"]}
    for workload, _ in workloads(rendered):
        for template in workload["spec"].get("volumeClaimTemplates", []):
            modes |= set(template["spec"]["accessModes"])
    # dev shares a ReadWriteOnce claim on its single node; production has no shared claim at all.
    assert "ReadWriteMany" not in modes
    if not shared_telemetry:
        assert not of_kind(rendered, "PersistentVolumeClaim")
        for _, spec in workloads(rendered):
            assert not any("persistentVolumeClaim" in volume for volume in spec.get("volumes", []))


def certificate_covers(certificate: Manifest, host: str) -> bool:
    for name in certificate["spec"].get("dnsNames", []):
        if name == host or (name.startswith("*.") and host.partition(".")[2] == name[2:]):
            return True
    return False


def test_production_credentials_tls_secrets_and_etcd_tls_are_all_provided() -> None:
    manifests = render(KUBERNETES / "overlays" / "production")
    namespace = "quire"
    config = named(manifests, "ConfigMap", "quire-config")["data"]
    assert config["QUIRE_INSECURE_PLAINTEXT_DEV"] == "false"
    # The gateway has credential sources: the token key (Secret quire-auth) and the certificate roles.
    gateway = named(manifests, "Deployment", "quire-gateway")["spec"]["template"]["spec"]
    assert config["QUIRE_AUTH_JWT_KEY_FILE"].startswith("/etc/quire/auth/")
    assert config["QUIRE_AUTH_CLIENT_CERT_ROLES"].startswith("/etc/quire/auth/")
    (auth,) = [v for v in gateway["volumes"] if v["name"] == "auth"]
    sources = auth["projected"]["sources"]
    assert {"name": "quire-auth", "optional": True} in [s["secret"] for s in sources if "secret" in s]
    roles_map = named(manifests, "ConfigMap", "quire-client-roles")
    assert [s["configMap"]["name"] for s in sources if "configMap" in s] == [roles_map["metadata"]["name"]]
    roles = json.loads(roles_map["data"]["client-roles.json"])
    # Every TLS Secret a pod mounts is issued by a Certificate with the identity and names it needs.
    issued = {c["spec"]["secretName"]: c for c in of_kind(manifests, "Certificate")}
    for workload, spec in workloads(manifests):
        for volume in spec.get("volumes", []):
            if "secret" in volume and volume["secret"]["secretName"].endswith("-tls"):
                assert volume["secret"]["secretName"] in issued, workload["metadata"]["name"]
    for component in ("registry", "placement", "gateway", "bookie"):
        certificate = issued[f"quire-{component}-tls"]
        assert certificate["spec"]["commonName"] == f"quire-service:{component}"
        assert {"server auth", "client auth"} <= set(certificate["spec"]["usages"])
    for target in (config["QUIRE_REGISTRY_TARGET"], config["QUIRE_PLACEMENT_TARGET"], config["QUIRE_GATEWAY"]):
        host = target.rpartition(":")[0]
        assert certificate_covers(issued[f"{host}-tls"], host), host
    for i in range(5):
        assert certificate_covers(issued["quire-bookie-tls"], f"quire-bookie-{i}.quire-bookie.{namespace}.svc")
    # The gateway alone trusts the client CA: its certificate only, never its key.
    (client_ca,) = [v for v in gateway["volumes"] if v.get("secret", {}).get("secretName") == "quire-client-ca"]
    assert client_ca["secret"]["items"] == [{"key": "ca.crt", "path": "ca.crt"}]
    (mount,) = [m for m in gateway["containers"][0]["volumeMounts"] if m["name"] == client_ca["name"]]
    assert config["QUIRE_TLS_CLIENT_CA"] == mount["mountPath"] + "/ca.crt"
    assert named(manifests, "Certificate", "quire-client-ca")["spec"]["isCA"]
    for workload, spec in workloads(manifests):
        if workload["metadata"]["name"] != "quire-gateway":
            assert client_ca not in spec.get("volumes", []), workload["metadata"]["name"]
    operator = issued["quire-operator-tls"]
    assert operator["spec"]["commonName"].startswith("quire-service:")
    # No service identity holds roles at the gateway; the init Job lists ledgers as the operator's client.
    assert not [name for name in roles if name.startswith("quire-service:")]
    client_operator = issued["quire-client-operator-tls"]
    assert client_operator["spec"]["issuerRef"]["name"] == "quire-client-ca"
    assert roles[client_operator["spec"]["commonName"]] == {"*": ["reader"]}
    init = named(manifests, "Job", "quire-init")["spec"]["template"]["spec"]
    (client_tls,) = [v for v in init["volumes"] if v["secret"]["secretName"] == "quire-client-operator-tls"]
    (mount,) = [m for m in init["containers"][0]["volumeMounts"] if m["name"] == client_tls["name"]]
    assert f"QUIRE_CLIENT_TLS_CERT={mount['mountPath']}/tls.crt" in init["containers"][0]["args"][0]
    # etcd: TLS for clients and peers, client certificates required; the registry uses them.
    etcd = named(manifests, "StatefulSet", "quire-etcd")["spec"]["template"]["spec"]["containers"][0]
    args = etcd["args"]
    assert "--client-cert-auth" in args and "--peer-client-cert-auth" in args
    assert not [a for a in args if "http://" in a and not a.startswith("--listen-metrics-urls=")]
    assert certificate_covers(issued["quire-etcd-tls"], config["QUIRE_ETCD_ENDPOINTS"].rpartition(":")[0])
    assert certificate_covers(issued["quire-etcd-tls"], f"quire-etcd-2.quire-etcd.{namespace}.svc")
    assert etcd["readinessProbe"]["httpGet"]["port"] == 2381
    assert config["QUIRE_ETCD_CA"] and config["QUIRE_ETCD_CERT"] and config["QUIRE_ETCD_KEY"]


def test_production_etcd_has_authentication_and_root_stays_out_of_the_registry() -> None:
    manifests = render(KUBERNETES / "overlays" / "production")
    config = named(manifests, "ConfigMap", "quire-config")["data"]
    assert config["QUIRE_ETCD_USER"] == "quire-registry"
    spec = named(manifests, "Deployment", "quire-registry")["spec"]["template"]["spec"]
    (lock_down,) = spec["initContainers"]
    assert lock_down["command"] == ["quire", "etcd", "lock-down"]
    volumes = {v["name"]: v["secret"]["secretName"] for v in spec["volumes"] if "secret" in v}
    mounted = {c["name"]: {volumes.get(m["name"]) for m in c["volumeMounts"]} for c in containers(spec)}
    assert "quire-etcd-root" in mounted["etcd-auth"]
    assert "quire-etcd-root" not in mounted["registry"]
    (registry_password,) = [
        m["mountPath"] for m in spec["containers"][0]["volumeMounts"] if volumes.get(m["name"]) == "quire-etcd-registry"
    ]
    assert config["QUIRE_ETCD_PASSWORD_FILE"].startswith(registry_password + "/")
    # Both run by the registry pods only: the lock-down step and the registry find etcd through the Service.
    args = lock_down["args"]
    assert f"--endpoints=https://{config['QUIRE_ETCD_ENDPOINTS']}" in args
    assert f"--registry-password-file={config['QUIRE_ETCD_PASSWORD_FILE']}" in args


def test_only_the_registry_and_etcd_members_reach_etcd(rendered: list[Manifest]) -> None:
    policy = named(rendered, "NetworkPolicy", "quire-etcd")["spec"]
    etcd = named(rendered, "StatefulSet", "quire-etcd")
    assert policy["podSelector"]["matchLabels"] == etcd["spec"]["selector"]["matchLabels"]
    assert policy["policyTypes"] == ["Ingress"]
    client_port = {2379}
    allowed: dict[str, set[int]] = {}
    for rule in policy["ingress"]:
        ports = {p["port"] for p in rule["ports"]}
        if "from" not in rule:
            assert ports == {2381}, "only the metrics/health listener is open to every pod"
            continue
        for source in rule["from"]:
            component = source["podSelector"]["matchLabels"]["app.kubernetes.io/component"]
            allowed[component] = allowed.get(component, set()) | ports
    assert allowed == {"registry": client_port, "etcd": {2379, 2380}}
    # Every other workload (gateway, bookies, placement, jobs) is outside them.
    for workload, _ in workloads(rendered):
        component = template_labels(workload).get("app.kubernetes.io/component")
        if component not in ("registry", "etcd"):
            assert component not in allowed, workload["metadata"]["name"]


def test_custom_resources_have_the_fields_their_operators_need() -> None:
    manifests = render(KUBERNETES / "overlays" / "production")
    issuers = {m["metadata"]["name"]: m for m in of_kind(manifests, "Issuer")}
    for certificate in of_kind(manifests, "Certificate"):
        spec = certificate["spec"]
        assert spec["issuerRef"]["kind"] == "Issuer" and spec["issuerRef"]["name"] in issuers
        assert spec["secretName"] and spec["commonName"]
        assert set(spec.get("usages", [])) <= {"server auth", "client auth", "digital signature", "key encipherment"}
    # Two CAs: services (and etcd) from one, applications' client certificates from the other.
    for ca in ("quire-service-ca", "quire-client-ca"):
        certificate = named(manifests, "Certificate", ca)
        assert certificate["spec"]["isCA"] and certificate["spec"]["issuerRef"]["name"] == "quire-selfsigned"
        assert issuers[ca]["spec"]["ca"]["secretName"] == certificate["spec"]["secretName"] == ca
    for monitor in of_kind(manifests, "PodMonitor"):
        assert monitor["metadata"]["namespace"] == "quire"


def test_cert_manager_and_quire_dev_certs_issue_the_same_identities() -> None:
    """The two documented ways to the TLS Secrets agree (the local start uses the second)."""
    manifests = render(KUBERNETES / "overlays" / "production")
    issued = {
        c["spec"]["secretName"]: (c["spec"]["commonName"], sorted(c["spec"].get("dnsNames", [])))
        for c in of_kind(manifests, "Certificate")
        if not c["spec"].get("isCA")
    }
    expected = {name: (cn, sorted(hosts)) for name, (cn, hosts) in kubernetes_identities("quire").items()}
    assert issued == expected
    # The client CA issues exactly the client Secrets in both ways, the service CA the rest.
    issuers = {
        c["spec"]["secretName"]: c["spec"]["issuerRef"]["name"]
        for c in of_kind(manifests, "Certificate")
        if not c["spec"].get("isCA")
    }
    assert issuers == {
        name: "quire-client-ca" if name in KUBERNETES_CLIENT_SECRETS else "quire-service-ca" for name in expected
    }
