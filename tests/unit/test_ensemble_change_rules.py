"""The rules of an ensemble change (quire_gateway.write.ensemble_change), without bookies."""

from __future__ import annotations

from dataclasses import dataclass, field

from quire_api.replication import markers
from quire_gateway.quorum_rules import write_set
from quire_gateway.write.ensemble_change import can_leave_out, reassign, record_new_ensemble, with_replacements
from quire_proto.common.v1 import common_pb2


def metadata_with(*ensembles: tuple[int, list[str]]) -> common_pb2.LedgerMetadata:
    metadata = common_pb2.LedgerMetadata(ensemble_size=3, write_quorum_size=2, ack_quorum_size=2)
    for first, bookies in ensembles:
        metadata.ensembles.append(common_pb2.Ensemble(first_entry_id=first, bookie_ids=bookies))
    return metadata


def test_a_new_ensemble_starts_at_the_given_entry_and_marks_what_the_bookie_never_acknowledged():
    metadata = metadata_with((0, ["a", "b", "c"]))
    record_new_ensemble(metadata, 6, ["a", "d", "c"], ("b", 4, 5))
    assert [(e.first_entry_id, list(e.bookie_ids)) for e in metadata.ensembles] == [
        (0, ["a", "b", "c"]),
        (6, ["a", "d", "c"]),
    ]
    assert markers(metadata) == {"b": (4, 5)}


def test_an_ensemble_with_no_confirmed_entry_is_rewritten_rather_than_stacked():
    metadata = metadata_with((0, ["a", "b", "c"]), (6, ["a", "d", "c"]))
    record_new_ensemble(metadata, 6, ["a", "e", "c"], None)
    assert [(e.first_entry_id, list(e.bookie_ids)) for e in metadata.ensembles] == [
        (0, ["a", "b", "c"]),
        (6, ["a", "e", "c"]),
    ]
    assert markers(metadata) == {}


def test_an_empty_unacknowledged_range_marks_nothing():
    metadata = metadata_with((0, ["a", "b", "c"]))
    record_new_ensemble(metadata, 6, ["a", "d", "c"], ("b", 6, 5))
    assert markers(metadata) == {}


def test_a_bookie_can_be_left_out_while_every_write_set_keeps_the_ack_quorum():
    ensemble = ["a", "b", "c", "d"]
    stripes = [write_set(i, ensemble, 3) for i in range(len(ensemble))]
    assert can_leave_out(stripes, {"b"}, 2)
    assert not can_leave_out(stripes, {"b", "c"}, 2)  # the stripe b, c, d keeps only d
    assert not can_leave_out(stripes, {"a", "c"}, 2)  # the stripe c, d, a keeps only d
    assert not can_leave_out(stripes, {"b"}, 3)


def test_replacements_keep_each_position():
    assert with_replacements(["a", "b", "c"], {"b": "d"}) == ["a", "d", "c"]
    assert with_replacements(["a", "b", "c"], {"a": "e", "c": "f"}) == ["e", "b", "f"]


@dataclass
class Entry:
    write_set: list[str]
    packed: bytes
    acks: set[str] = field(default_factory=set)


def test_pending_entries_of_a_replaced_bookie_move_to_its_replacement_in_entry_order():
    old = ["a", "b", "c"]
    new = ["a", "d", "c"]
    old_stripes = [write_set(i, old, 2) for i in range(3)]
    new_stripes = [write_set(i, new, 2) for i in range(3)]
    pending = {
        e: Entry(list(old_stripes[e % 3]), b"p%d" % e, {"a", "b", "c"} & set(old_stripes[e % 3])) for e in (5, 3, 4)
    }
    resend = reassign(pending, {"b": "d"}, new_stripes)
    # Entry 3 is on a, b; 4 on b, c; 5 on c, a (which needs no resend).
    assert resend == {"d": [(3, b"p3"), (4, b"p4")]}
    assert pending[3].write_set == ["a", "d"] and pending[3].acks == {"a"}
    assert pending[4].write_set == ["d", "c"] and pending[4].acks == {"c"}
    assert pending[5].write_set == ["c", "a"] and pending[5].acks == {"c", "a"}
