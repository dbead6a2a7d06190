"""QuireContainer on any Docker engine: the engine on its local socket, and the
same engine reached over DOCKER_HOST=tcp://127.0.0.1:<port> (the relay of
docker_tcp.py), as a remote engine is, and over tcp://<this machine's name>:<port>,
as docker:dind's tcp://docker:2375 is (a name the container must resolve too). Each way the container is
on a bridge network, clients reach it through the ports the engine published,
and every address the services tell a client about (the gateway owning a
ledger, each bookie's endpoints, etcd's client URL) answers from outside."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from quire_api.bookie_addresses import HTTP_PROTOCOL, bookie_rpc_address, effective_service_info
from quire_api.ids import LedgerId
from quire_client import QuireAdmin, QuireClient
from quire_client.testing.pytest_plugin import quire_test_image, require_container_support
from quire_proto.registry.v1 import registry_pb2
from tests.container.docker_tcp import ENGINES, DockerOverTcp, engine_docker_host

pytestmark = pytest.mark.container

BOOKIES = 2


@pytest.fixture(scope="module", params=ENGINES)
def engine_container(request: pytest.FixtureRequest) -> Iterator[tuple[str, Any]]:
    image = quire_test_image()
    require_container_support(image)
    from quire_client.testing import QuireContainer

    with pytest.MonkeyPatch.context() as patch:
        docker_host = engine_docker_host(request.param, request)
        if docker_host is not None:
            patch.setenv("DOCKER_HOST", docker_host)
        with QuireContainer(image, bookies=BOOKIES) as container:
            yield request.param, container


def published_ports(container: Any) -> dict[int, int]:
    """Container port -> host port, as the engine reports them."""
    wrapped = container.get_wrapped_container()
    wrapped.reload()
    bindings = wrapped.attrs["NetworkSettings"]["Ports"] or {}
    return {int(spec.split("/")[0]): int(binding[0]["HostPort"]) for spec, binding in bindings.items() if binding}


def test_the_engine_is_the_one_asked_for(engine_container: tuple[str, Any], request: pytest.FixtureRequest) -> None:
    engine, container = engine_container
    base_url = container.get_docker_client().client.api.base_url
    docker_host = engine_docker_host(engine, request)
    if docker_host is None:
        assert base_url.startswith("http+docker://")  # the unix socket
    else:
        relay: DockerOverTcp = request.getfixturevalue("docker_over_tcp")
        assert base_url == docker_host.replace("tcp://", "http://")
        assert relay.connections > 0
        assert container.advertised_host == base_url.split("//")[1].rsplit(":", 1)[0]


def test_clients_connect_through_the_published_ports(engine_container: tuple[str, Any]) -> None:
    _, container = engine_container
    wrapped = container.get_wrapped_container()
    assert wrapped.attrs["HostConfig"]["NetworkMode"] != "host"
    published = published_ports(container)
    host = container.get_container_host_ip()
    for target in (
        container.get_gateway_target(),
        container.get_registry_target(),
        container.get_placement_target(),
        container.get_etcd_endpoint(),
    ):
        target_host, _, port = target.rpartition(":")
        assert target_host == host
        assert int(port) in published.values(), (target, published)


def test_every_advertised_address_answers_from_outside(engine_container: tuple[str, Any]) -> None:
    _, container = engine_container
    gateway, registry = container.get_gateway_target(), container.get_registry_target()
    # The registry and the bookies asked themselves (break-glass), at the addresses they advertise.
    with QuireClient(gateway, timeout=30) as quire, QuireAdmin(registry=registry, direct=True, timeout=30) as admin:
        metadata = quire.create_ledger(ensemble_size=BOOKIES, write_quorum_size=BOOKIES, ack_quorum_size=BOOKIES)
        ledger = LedgerId(metadata.ledger_id.scope_id, metadata.ledger_id.ledger_id)
        payloads = [f"entry {i}".encode() for i in range(20)]
        quire.append_all(ledger, payloads)
        bookies = admin.list_bookies(registry_pb2.BOOKIE_STATE_WRITABLE)
        assert len(bookies) == BOOKIES
        for record in bookies:
            # GetBookieInfo at the bookie-rpc endpoint the bookie registered
            assert admin.bookie_info(record, timeout=10).total_disk_bytes > 0
            endpoints = effective_service_info(record.bookie_id, record.service_info).endpoints
            http = [endpoint for endpoint in endpoints if endpoint.protocol == HTTP_PROTOCOL]
            assert http, f"bookie {record.bookie_id} advertises no http endpoint"
            with urllib.request.urlopen(f"http://{http[0].host}:{http[0].port}/status", timeout=10) as response:
                assert response.status == 200
            assert bookie_rpc_address(record.bookie_id, record.service_info).startswith(f"{container.advertised_host}:")

    # The gateway a `follow_owner` client would resume at.
    owner = metadata.owner.address
    assert owner, "the ledger names no owner"
    with QuireClient(owner, timeout=30) as at_owner:
        assert [entry.payload for entry in at_owner.read(ledger)] == payloads

    # etcd's member list names the client URL etcd advertises.
    request = urllib.request.Request(
        f"http://{container.get_etcd_endpoint()}/v3/cluster/member/list", data=b"{}", method="POST"
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        client_urls = [url for member in json.loads(response.read())["members"] for url in member["clientURLs"]]
    assert client_urls
    for url in client_urls:
        with urllib.request.urlopen(f"{url}/health", timeout=10) as response:
            assert json.loads(response.read())["health"] == "true"
