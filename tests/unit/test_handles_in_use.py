"""The bookie store's handles: shared by every use, held alone by reopen and close."""

from __future__ import annotations

import threading

from quire_bookie.storage import HandlesInUse

WAIT = 30.0  # seconds: a bound for a step that should happen at once, never a timing


def test_uses_share_the_handles():
    handles = HandlesInUse()
    inside = threading.Barrier(3)

    def use() -> None:
        with handles:
            inside.wait(WAIT)  # breaks (and fails the test) unless all three are in at once

    threads = [threading.Thread(target=use) for _ in range(2)]
    for thread in threads:
        thread.start()
    with handles:
        inside.wait(WAIT)
    for thread in threads:
        thread.join(WAIT)
    assert not inside.broken


def test_alone_waits_for_the_uses_before_it_and_holds_back_those_after_it():
    handles = HandlesInUse()
    steps: list[str] = []
    first_in, let_first_out, second_tried = threading.Event(), threading.Event(), threading.Event()

    def first_use() -> None:
        with handles:
            first_in.set()
            let_first_out.wait(WAIT)
            steps.append("first use ends")

    def alone() -> None:
        with handles.alone():
            steps.append("alone")

    def second_use() -> None:
        second_tried.set()
        with handles:
            steps.append("second use")

    first = threading.Thread(target=first_use)
    first.start()
    assert first_in.wait(WAIT)
    reopen = threading.Thread(target=alone)
    reopen.start()
    while not handles._alone:  # the reopen is waiting for the first use to end
        threading.Event().wait(0.001)
    second = threading.Thread(target=second_use)
    second.start()
    assert second_tried.wait(WAIT)
    let_first_out.set()
    for thread in (first, reopen, second):
        thread.join(WAIT)
    assert steps == ["first use ends", "alone", "second use"]
