"""The Node.js client (clients/node) against real clusters: plaintext, then
mutual TLS with a bearer token, two gateways (a read and a tail whose gateway
dies) and three behind HAProxy (a write session whose gateway dies). Skipped
only when node or npm is missing (and the HAProxy one when haproxy is)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from quire_client.cluster import LocalCluster
from quire_client.devcerts import CertBundle, write_dev_certs
from tests.e2e.conftest import HAPROXY_INSTALLED, NO_HAPROXY, running_cluster
from tests.node_suite import PACKAGE, build_node_client, run_node_tests

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]


def test_unit_files_need_no_cluster() -> None:
    unit_files = [
        "ids.test.js",
        "errors.test.js",
        "enums.test.js",
        "resume.test.js",
        "backpressure.test.js",
        "writer.test.js",
        "calls.test.js",
    ]
    output = run_node_tests(unit_files, {})
    assert "# fail 0" in output and "# skipped 0" in output


def test_node_client_against_a_cluster(cluster: LocalCluster) -> None:
    output = run_node_tests(["cluster.test.js"], {"QUIRE_GATEWAY": cluster.gateway_target})
    assert "# skipped 0" in output, output


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, CertBundle]]:
    bundle = write_dev_certs(tmp_path_factory.mktemp("certs"))
    with running_cluster(tmp_path_factory.mktemp("tls-cluster"), tls=bundle) as local:
        yield local, bundle


def test_node_client_over_mutual_tls_with_a_token(tls_cluster: tuple[LocalCluster, CertBundle]) -> None:
    local, bundle = tls_cluster
    env = {
        "QUIRE_TLS_GATEWAY": local.gateway_target,
        "QUIRE_TLS_CA": str(bundle.ca),
        "QUIRE_TLS_CERT": str(bundle.cert("client-reader")),
        "QUIRE_TLS_KEY": str(bundle.key("client-reader")),
        "QUIRE_TLS_TOKEN": bundle.token("node-writer", {"7": ["writer"]}),
    }
    output = run_node_tests(["tls.test.js"], env)
    assert "# skipped 0" in output, output


def test_node_reads_and_tails_resume_when_their_gateway_dies(tmp_path_factory: pytest.TempPathFactory) -> None:
    with running_cluster(tmp_path_factory.mktemp("two-gateways"), gateways=2) as local:
        pid = local.pid("gateway-2")
        assert pid is not None
        env = {"QUIRE_GATEWAYS": ",".join(local.gateway_targets), "QUIRE_KILL_GATEWAY_PID": str(pid)}
        output = run_node_tests(["failover.test.js"], env)
        assert "# skipped 0" in output, output
        assert local.pid("gateway-2") is None  # the suite killed it mid-read


@pytest.mark.skipif(not HAPROXY_INSTALLED, reason=NO_HAPROXY)
def test_node_write_session_resumes_when_its_gateway_dies_behind_a_balancer(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    with running_cluster(tmp_path_factory.mktemp("balanced-node"), gateways=3, balancer=True) as local:
        pids = {name: local.pid(name) for name in local.gateway_names}
        targets = dict(zip(local.gateway_names, local.gateway_targets, strict=True))
        env = {
            "QUIRE_BALANCER": local.gateway_target,
            "QUIRE_GATEWAY_PIDS": ",".join(f"{targets[name]}={pid}" for name, pid in pids.items()),
        }
        output = run_node_tests(["balanced.test.js"], env)
        assert "# skipped 0" in output, output
        print(output)  # the writer's resumptions, in pytest's captured output
        dead = [name for name in local.gateway_names if local.pid(name) is None]
        assert len(dead) == 1, f"the suite should have killed exactly one gateway: {dead}"


def test_the_packed_tarball_installs_into_an_empty_folder_and_works(cluster: LocalCluster, tmp_path: Path) -> None:
    """What a user gets from the registry: `npm pack`'s tarball (the package's
    declared files only), installed by name into a folder of its own, writes
    and reads a ledger."""
    build_node_client()
    packed = subprocess.run(
        ["npm", "pack", "--pack-destination", str(tmp_path)],
        cwd=PACKAGE,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert packed.returncode == 0, packed.stderr
    tarball = tmp_path / packed.stdout.strip().splitlines()[-1]
    assert tarball.name == "quire-ledger-client-0.1.0.tgz", tarball
    app = tmp_path / "app"
    app.mkdir()
    (app / "package.json").write_text('{"name": "app", "private": true}\n')
    installed = subprocess.run(
        ["npm", "install", "--no-audit", "--no-fund", "--prefer-offline", str(tarball)],
        cwd=app,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert installed.returncode == 0, installed.stderr
    (app / "app.js").write_text(
        """
const { QuireClient } = require("@quire-ledger/client");
(async () => {
  const quire = new QuireClient(process.env.QUIRE_GATEWAY);
  const { ledgerId } = await quire.createLedger({ ensembleSize: 3, writeQuorumSize: 2, ackQuorumSize: 2 });
  const last = await quire.appendAll(ledgerId, ["from", "the", "tarball"]);
  await quire.closeLedger(ledgerId);
  const read = [];
  for await (const entry of quire.read(ledgerId)) read.push(Buffer.from(entry.payload).toString());
  quire.close();
  console.log(JSON.stringify({ last, read }));
})().catch((error) => { console.error(error); process.exit(1); });
"""
    )
    ran = subprocess.run(
        ["node", "app.js"],
        cwd=app,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "QUIRE_GATEWAY": cluster.gateway_target},
    )
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout.strip().splitlines()[-1]) == {"last": 2, "read": ["from", "the", "tarball"]}
