"""The image, started by testcontainers, used from the host, and stopped."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest

from quire_api.ids import LedgerId
from quire_client import QuireAdmin, QuireClient
from quire_client.testing.pytest_plugin import quire_test_image, require_container_support
from quire_proto.registry.v1 import registry_pb2

pytestmark = pytest.mark.container


def test_writes_and_reads_a_ledger_through_the_gateway(quire_container: Any) -> None:
    with QuireClient(quire_container.get_gateway_target(), timeout=30) as quire:
        metadata = quire.create_ledger(ensemble_size=3, write_quorum_size=2, ack_quorum_size=2)
        ledger = LedgerId(metadata.ledger_id.scope_id, metadata.ledger_id.ledger_id)
        payloads = [f"entry {i}".encode() for i in range(50)]
        quire.append_all(ledger, payloads)
        assert [entry.payload for entry in quire.read(ledger)] == payloads
        quire.close_ledger(ledger)


def test_every_bookie_is_registered_and_etcd_answers(quire_container: Any) -> None:
    with QuireAdmin(quire_container.get_gateway_target(), timeout=30) as admin:
        bookies = admin.list_bookies(registry_pb2.BOOKIE_STATE_WRITABLE)
    assert len(bookies) == quire_container.get_bookie_count()
    url = f"http://{quire_container.get_etcd_endpoint()}/health"
    with urllib.request.urlopen(url, timeout=5) as response:
        assert json.loads(response.read())["health"] == "true"


def test_a_container_that_cannot_start_fails_with_its_logs() -> None:
    image = quire_test_image()
    require_container_support(image)
    from quire_client.testing import QuireContainer, QuireContainerError

    # A setting every bookie refuses: the standalone supervisor stops and exits.
    broken = QuireContainer(image, startup_timeout_seconds=60).with_env("QUIRE_BOOKIE_MAX_ENTRY_BYTES", "1")
    with pytest.raises(QuireContainerError) as failure:
        with broken:
            pass
    message = str(failure.value)
    assert "the container exited with status 1" in message
    # the bookie's own log line, copied into the container's log by the standalone mode
    assert "QUIRE_BOOKIE_MAX_ENTRY_BYTES=1 is below the minimum 1024" in message


def test_a_slow_start_times_out_with_the_container_logs() -> None:
    image = quire_test_image()
    require_container_support(image)
    from quire_client.testing import QuireContainer, QuireContainerError

    with pytest.raises(QuireContainerError) as failure:
        with QuireContainer(image, startup_timeout_seconds=0.5):
            pass
    message = str(failure.value)
    assert "not SERVING within" in message
    assert "last 60 lines of the container's log" in message
