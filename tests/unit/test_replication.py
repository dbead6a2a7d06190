"""Under-replication planning (quire_common.replication) and the test-only fault rules."""

from __future__ import annotations

import grpc
import pytest

from quire.common.v1 import common_pb2
from quire_common.config import ConfigError
from quire_common.faults import parse_fault_rules
from quire_common.replication import entries_held, lost_replicas


def metadata() -> common_pb2.LedgerMetadata:
    record = common_pb2.LedgerMetadata(ensemble_size=3, write_quorum_size=2, ack_quorum_size=2, last_entry_id=9)
    record.ensembles.add(first_entry_id=0, bookie_ids=["a", "b", "c"])
    record.ensembles.add(first_entry_id=5, bookie_ids=["a", "d", "c"])
    return record


def test_entries_held_follow_the_striping_rule():
    # entry e goes to positions e % 3 and (e + 1) % 3
    assert entries_held(3, 2, 0, 0, 5) == [0, 2, 3, 5]
    assert entries_held(3, 2, 1, 0, 5) == [0, 1, 3, 4]
    assert entries_held(3, 3, 2, 4, 3) == []  # an empty segment


def test_lost_replicas_name_every_segment_of_a_lost_bookie():
    found = lost_replicas(metadata(), {"a", "b"})
    assert [(r.segment, r.position, r.bookie_id, r.first_entry_id, r.last_entry_id) for r in found] == [
        (0, 0, "a", 0, 4),
        (0, 1, "b", 0, 4),
        (1, 0, "a", 5, 9),
    ]
    assert lost_replicas(metadata(), set()) == []


def test_fault_rules_parse_and_reject_nonsense():
    (rule,) = parse_fault_rules('[{"method": "FenceLedger", "action": "reject", "code": "UNAVAILABLE"}]')
    assert rule.matches("/quire.bookie.v1.BookieService/FenceLedger")
    assert rule.code == grpc.StatusCode.UNAVAILABLE
    for bad in ("{}", '[{"method": "X", "action": "explode"}]', '[{"action": "drop"}]', "not json"):
        with pytest.raises(ConfigError, match="QUIRE_FAULT_INJECTION_RULES"):
            parse_fault_rules(bad)
