"""`quire recovery status` and `quire placement weights` with a fake client."""

from __future__ import annotations

import json

import yaml

from quire_api.ids import LedgerId
from quire_proto.placement.v1 import placement_pb2
from quire_proto.registry.v1 import registry_pb2


def test_recovery_status_names_the_auditor_and_the_segments(run, fake, monkeypatch):
    ledger = LedgerId(7, 1)
    fake.ledgers[ledger] = [b"x"]
    leader = registry_pb2.Leader(role="auditor", holder="gateway-0", properties={"scrub_repaired": "2"})
    monkeypatch.setattr(fake, "auditor", lambda: leader, raising=False)
    assert run("recovery", "status").stdout.splitlines()[:2] == [
        "auditor: gateway-0 (active); repaired 2",
        "no under-replicated ledgers",
    ]
    fake.lost = [(ledger.qualified_name, "127.0.0.1:3183")]
    document = json.loads(run("recovery", "status", "-o", "json").stdout)
    assert document["auditor"] == {"holder": "gateway-0", "scrub_repaired": "2"}
    assert [(r["ledger"], r["bookie_id"]) for r in document["under_replicated"]] == [
        (ledger.qualified_name, "127.0.0.1:3183")
    ]
    assert "127.0.0.1:3183" in run("recovery", "status").stdout.splitlines()[-1]


def test_placement_weights_in_table_and_yaml(run, fake, monkeypatch):
    response = placement_pb2.GetPlacementWeightsResponse(
        policy="default",
        disk_weight_placement_enabled=True,
        max_weight_multiple=2.0,
        bookies=[placement_pb2.BookieWeight(bookie_id="b1", free_bytes=2048, total_bytes=4096, capped_weight=0.5)],
        unknown_bookie_ids=["b2"],
    )
    monkeypatch.setattr(fake, "placement_weights", lambda: response, raising=False)
    table = run("placement", "weights").stdout.splitlines()
    assert table[0].startswith("policy default, disk weights on") and "P(FIRST)" in table[1]
    assert "2.00 KiB" in table[2] and table[-1].startswith("b2: info not read yet")
    assert yaml.safe_load(run("placement", "weights", "-o", "yaml").stdout)["policy"] == "default"
