"""The coverage rule and the missing rule of recovery (docs/architecture.md, "A recovery open")."""

from itertools import combinations

import pytest

from quire_gateway.quorum_rules import covered, entry_missing, write_set


def brute_force_covered(ensemble: int, write_quorum: int, ack_quorum: int, answered: set[int]) -> bool:
    """Coverage as its meaning: no write set has A members that did not answer
    (so no entry can have been acknowledged entirely by silent bookies)."""
    members = [f"b{i}" for i in range(ensemble)]
    for entry in range(ensemble):
        silent = [m for m in write_set(entry, members, write_quorum) if int(m[1:]) not in answered]
        if len(silent) >= ack_quorum:
            return False
    return True


@pytest.mark.parametrize(
    ("ensemble", "write_quorum", "ack_quorum"), [(3, 3, 2), (3, 2, 2), (5, 3, 2), (4, 2, 1), (5, 5, 3)]
)
def test_coverage_matches_its_meaning_for_every_answer_set(ensemble, write_quorum, ack_quorum):
    for size in range(ensemble + 1):
        for answered in combinations(range(ensemble), size):
            expected = brute_force_covered(ensemble, write_quorum, ack_quorum, set(answered))
            assert covered(ensemble, write_quorum, ack_quorum, set(answered)) == expected, answered


def test_coverage_examples():
    # E=3 W=3 A=2: one silent bookie is fine, two are not.
    assert covered(3, 3, 2, {0, 1})
    assert not covered(3, 3, 2, {0})
    # E=3 W=2 A=2: any two answers cover.
    assert covered(3, 2, 2, {0, 2})
    assert not covered(3, 2, 2, {1})
    # E=4 W=2 A=1: every bookie must answer (one silent member could hold an acked entry alone).
    assert not covered(4, 2, 1, {0, 1, 2})
    assert covered(4, 2, 1, {0, 1, 2, 3})
    # Nobody answered: never covered.
    assert not covered(3, 3, 3, set())


def test_an_entry_is_missing_once_w_minus_a_plus_one_replicas_lack_it():
    # W=3 A=2: two "not found" are enough; one is not.
    assert not entry_missing(3, 2, 1)
    assert entry_missing(3, 2, 2)
    # W=A: a single "not found" proves it was never acknowledged.
    assert entry_missing(2, 2, 1)
    # A=1: every replica must say so.
    assert not entry_missing(3, 1, 2)
    assert entry_missing(3, 1, 3)
