"""The one backoff policy: doubling ceilings, full jitter, and its bounds."""

from __future__ import annotations

import random

import pytest

from quire_api.backoff import Backoff


def test_the_ceiling_doubles_from_the_first_pause_up_to_the_longest() -> None:
    policy = Backoff(first_seconds=0.1, longest_seconds=1.0)
    assert [policy.ceiling(attempt) for attempt in range(1, 7)] == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.0, 1.0])
    assert policy.ceiling(10_000) == 1.0  # no overflow however long it keeps failing


def test_each_pause_is_drawn_below_its_ceiling_and_never_zero() -> None:
    policy = Backoff(first_seconds=0.2, longest_seconds=5.0)
    rng = random.Random(7)
    for attempt in range(1, 12):
        pauses = [policy.pause(attempt, rng.uniform) for _ in range(200)]
        ceiling = policy.ceiling(attempt)
        assert all(ceiling / 100 <= p <= ceiling for p in pauses)
        assert len(set(pauses)) > 100  # jittered: processes that failed together spread out
    assert policy.pause(3, lambda low, high: low) == pytest.approx(0.8 / 100)


def test_unbounded_pauses_go_on() -> None:
    pauses = Backoff(first_seconds=0.01, longest_seconds=0.02).pauses()
    assert len([next(pauses) for _ in range(1000)]) == 1000


def test_an_attempt_bound_ends_the_pauses() -> None:
    assert len(list(Backoff(first_seconds=0.01, longest_seconds=1.0, attempts=4).pauses())) == 4
    assert list(Backoff(first_seconds=0.01, longest_seconds=1.0, attempts=0).pauses()) == []


def test_a_time_bound_ends_the_pauses_before_one_would_pass_it() -> None:
    now = [100.0]
    policy = Backoff(first_seconds=1.0, longest_seconds=1.0, within_seconds=2.5)
    pauses = policy.pauses(clock=lambda: now[0], draw=lambda low, high: high)
    now[0] += 10.0  # the bound counts from pauses(), not from the first next()
    assert list(pauses) == []

    now[0] = 100.0
    taken = []
    for pause in policy.pauses(clock=lambda: now[0], draw=lambda low, high: high):
        taken.append(pause)
        now[0] += pause
    assert taken == [1.0, 1.0]  # a third would end at 103.0, past 102.5


def test_an_endless_time_bound_is_no_bound() -> None:
    pauses = Backoff(first_seconds=0.01, longest_seconds=0.02, within_seconds=float("inf")).pauses()
    assert len([next(pauses) for _ in range(100)]) == 100


@pytest.mark.parametrize(
    "settings",
    [
        {"first_seconds": 0.0, "longest_seconds": 1.0},
        {"first_seconds": 2.0, "longest_seconds": 1.0},
        {"first_seconds": 0.1, "longest_seconds": 1.0, "attempts": -1},
        {"first_seconds": 0.1, "longest_seconds": 1.0, "within_seconds": -1.0},
    ],
)
def test_a_nonsensical_policy_is_refused(settings: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        Backoff(**settings)  # type: ignore[arg-type]
