"""The bookie's space reclaimer: deleted ledgers' space given back on a thread of its own."""

from __future__ import annotations

import logging

import pytest

from quire_api.ids import LedgerId
from quire_bookie.reclaim import SpaceReclaimer

WAIT = 30.0  # seconds: a bound for a step that should happen at once, never a timing


def test_a_failed_reclaim_is_logged_and_the_next_ledgers_still_go(caplog):
    reclaimed: list[list[LedgerId]] = []

    def reclaim(ledger_ids: list[LedgerId]) -> None:
        if LedgerId(9, 1) in ledger_ids:
            raise OSError("compaction failed")
        reclaimed.append(ledger_ids)

    reclaimer = SpaceReclaimer(reclaim)
    with caplog.at_level(logging.ERROR, logger="quire_bookie.reclaim"):
        reclaimer.put([LedgerId(9, 1)])
        assert reclaimer.wait_until_idle(WAIT)
        reclaimer.put([LedgerId(9, 2)])
        assert reclaimer.wait_until_idle(WAIT)
    reclaimer.close()
    assert reclaimed == [[LedgerId(9, 2)]]
    assert "giving back the space of 1 deleted ledgers failed" in caplog.text


def test_close_gives_back_what_is_queued_then_refuses_more():
    reclaimed: list[LedgerId] = []
    reclaimer = SpaceReclaimer(reclaimed.extend)
    reclaimer.put([LedgerId(9, 1), LedgerId(9, 2)])
    reclaimer.close()
    assert reclaimed == [LedgerId(9, 1), LedgerId(9, 2)]
    with pytest.raises(RuntimeError, match="closed"):
        reclaimer.put([LedgerId(9, 3)])
