"""A bookie's pause between registration sessions: the backoff's, cut short
while its lease may still be alive so that it resumes the lease."""

from __future__ import annotations

import pytest

from quire_bookie.registration import _RECONNECT, reconnect_pause


def test_without_a_live_lease_the_backoff_decides() -> None:
    assert reconnect_pause(1.7, lease_left_seconds=0.0) == 1.7
    assert reconnect_pause(1.7, lease_left_seconds=-5.0) == 1.7


def test_a_live_lease_cuts_a_long_pause_to_a_quarter_of_what_is_left() -> None:
    assert reconnect_pause(1.7, lease_left_seconds=2.0) == pytest.approx(0.5)
    assert reconnect_pause(0.2, lease_left_seconds=2.0) == 0.2  # shorter already
    assert reconnect_pause(1.7, lease_left_seconds=0.2) == pytest.approx(0.1)  # never a spin


def test_a_registry_away_for_less_than_the_lease_is_tried_again_before_it_runs_out() -> None:
    """The case a short lease met: the backoff's pauses alone (up to 2 s) let a
    3 s lease lapse while the registry was back within a second. Cut by the
    lease, no pause is longer than half a second of the 2 s left, and the
    attempts go on until the lease's last tenth of a second."""
    for _ in range(200):  # the backoff draws at random
        left, longest = 2.0, 0.0
        pauses = _RECONNECT.pauses()
        while True:
            pause = reconnect_pause(next(pauses), left)
            if pause >= left:
                break
            longest = max(longest, pause)
            left -= pause
        assert longest <= 0.5 + 1e-9
        assert left <= 0.1 + 1e-9
