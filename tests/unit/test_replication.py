"""Under-replication planning (quire_api.replication) and the test-only fault rules."""

from __future__ import annotations

import grpc
import pytest

from quire_api.replication import (
    add_marker,
    count_held,
    entries_held,
    lost_replicas,
    marked_replicas,
    marker_after_repair,
    markers,
    repairable_replicas,
    set_marker,
)
from quire_common.config import ConfigError
from quire_common.faults import parse_fault_rules
from quire_proto.common.v1 import common_pb2


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


def test_count_held_agrees_with_the_listed_entries():
    for ensemble_size in range(1, 6):
        for write_quorum in range(1, ensemble_size + 1):
            for position in range(ensemble_size):
                for first in range(0, 7):
                    for last in range(first - 2, first + 13):
                        expected = len(entries_held(ensemble_size, write_quorum, position, first, last))
                        assert count_held(ensemble_size, write_quorum, position, first, last) == expected


def test_the_auditor_counts_under_replicated_entries_of_known_extent():
    from quire_gateway.autorecovery.auditor import under_replicated_entries

    record = metadata()
    # "a" missing: entries 0, 2, 3 of the first segment and 5, 6, 8, 9 of the second (E=3, W=2).
    assert under_replicated_entries(record, lost_replicas(record, {"a"})) == 7
    add_marker(record, "d", 7, None)
    assert under_replicated_entries(record, marked_replicas(record)) == 2  # 7 and 9 of segment 1, position 1


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


def test_delayed_change_markers_name_what_a_bookie_may_lack():
    record = metadata()
    record.custom_metadata["quire.under-replicated/a"] = "3"
    record.custom_metadata["quire.under-replicated/b"] = "7"  # b left the ledger at entry 5: nothing to repair
    record.custom_metadata["quire.under-replicated/c"] = "not a number"  # counts from entry 0
    record.custom_metadata["owner"] = "someone"
    assert markers(record) == {"a": (3, None), "b": (7, None), "c": (0, None)}
    found = [(r.segment, r.position, r.bookie_id, r.first_entry_id, r.last_entry_id) for r in marked_replicas(record)]
    assert found == [(0, 0, "a", 3, 4), (1, 0, "a", 5, 9), (0, 2, "c", 0, 4), (1, 2, "c", 5, 9)]


def test_an_open_ledgers_marked_last_segment_is_listed_without_an_end():
    record = metadata()
    record.state = common_pb2.LEDGER_STATE_OPEN
    record.last_entry_id = -1
    record.custom_metadata["quire.under-replicated/d"] = "7"
    assert [(r.segment, r.bookie_id, r.first_entry_id, r.last_entry_id) for r in marked_replicas(record)] == [
        (1, "d", 7, -1)
    ]


def test_markers_merge_into_one_covering_range():
    record = metadata()
    assert add_marker(record, "d", 6, 6)
    assert not add_marker(record, "d", 6, 6)  # nothing new
    assert add_marker(record, "d", 8, 9)
    assert record.custom_metadata["quire.under-replicated/d"] == "6-9"
    assert add_marker(record, "d", 7, None)
    assert record.custom_metadata["quire.under-replicated/d"] == "6"  # open-ended wins
    assert add_marker(record, "a", 1, 1)
    assert sorted((r.segment, r.bookie_id, r.first_entry_id, r.last_entry_id) for r in marked_replicas(record)) == [
        (0, "a", 1, 1),
        (1, "d", 6, 9),
    ]


def _spans(replicas):
    return [(r.segment, r.bookie_id, r.first_entry_id, r.last_entry_id) for r in replicas]


def test_an_open_ledger_is_repairable_up_to_what_is_confirmed_only():
    """Open ledger, b replaced at entry 5 (marker 2-4) and c left out from 7
    (marker 7-): b's closed segment is repairable whole; c's only up to the LAC."""
    record = metadata()
    record.state = common_pb2.LEDGER_STATE_OPEN
    record.last_entry_id = -1
    add_marker(record, "b", 2, 4)
    add_marker(record, "c", 7, None)
    assert _spans(repairable_replicas(record, confirmed=8)) == [(0, "b", 2, 4), (1, "c", 7, 8)]
    assert _spans(repairable_replicas(record, confirmed=6)) == [(0, "b", 2, 4)]
    # b is in no open segment: its marker goes once copied; c's narrows past the LAC.
    assert marker_after_repair(record, "b", 8) is None
    assert marker_after_repair(record, "c", 8) == (9, None)
    set_marker(record, "c", (9, None))
    set_marker(record, "b", None)
    assert markers(record) == {"c": (9, None)}


def test_a_closed_ledgers_markers_go_once_repaired():
    record = metadata()
    record.state = common_pb2.LEDGER_STATE_CLOSED
    add_marker(record, "c", 7, None)
    assert _spans(repairable_replicas(record, confirmed=9)) == [(1, "c", 7, 9)]
    assert marker_after_repair(record, "c", 9) is None
