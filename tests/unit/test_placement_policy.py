import random

import pytest

from quire_common.errors import InvalidArgument, Unavailable
from quire_common.quorum import validate_quorum
from quire_placement.policy import new_ensemble, replace_bookie

BOOKIES = [f"b{i}" for i in range(5)]


def test_new_ensemble_is_distinct_and_respects_exclusions():
    rng = random.Random(1)
    for _ in range(50):
        chosen = new_ensemble(BOOKIES, 3, ["b0"], rng)
        assert len(set(chosen)) == 3 and "b0" not in chosen


def test_new_ensemble_uses_every_bookie_over_time():
    rng = random.Random(2)
    seen = {b for _ in range(100) for b in new_ensemble(BOOKIES, 2, [], rng)}
    assert seen == set(BOOKIES)


def test_too_few_bookies_names_needed_and_available():
    with pytest.raises(Unavailable) as caught:
        new_ensemble(BOOKIES[:2], 3, [], random.Random())
    assert "needs 3" in caught.value.message and "2 are available" in caught.value.message
    assert caught.value.metadata == {"needed": "3", "available": "2"}


def test_replacement_is_outside_the_ensemble():
    rng = random.Random(3)
    for _ in range(50):
        assert replace_bookie(BOOKIES, ["b0", "b1", "b2"], "b1", ["b3"], rng) == "b4"
    with pytest.raises(Unavailable):
        replace_bookie(BOOKIES, ["b0", "b1", "b2"], "b1", ["b3", "b4"], rng)


@pytest.mark.parametrize("sizes", [(2, 3, 2), (3, 2, 3), (3, 0, 0), (0, 0, 0)])
def test_bad_quorums(sizes):
    with pytest.raises(InvalidArgument):
        validate_quorum(*sizes)
