"""The one fan-out: ask all, stop once the answers suffice, cancel or let finish the rest."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from quire_api.errors import NotFound, PermissionDenied, QuireError, Unavailable
from quire_common.fanout import ask_all

NEVER_SECONDS = 3600.0


async def answer(value: int, after: asyncio.Event | None = None) -> int:
    if after is not None:
        await after.wait()
    return value


async def fail(error: BaseException) -> int:
    raise error


async def hang(started: asyncio.Event, ended: list[str]) -> int:
    started.set()
    try:
        await asyncio.sleep(NEVER_SECONDS)
    except asyncio.CancelledError:
        ended.append("cancelled")
        raise
    return -1


Take = Callable[[str, int | None, QuireError | None], None]


def collect() -> tuple[dict[str, int], dict[str, QuireError], Take]:
    answers: dict[str, int] = {}
    errors: dict[str, QuireError] = {}

    def take(key: str, value: int | None, error: QuireError | None) -> None:
        if error is not None:
            errors[key] = error
        else:
            assert value is not None
            answers[key] = value

    return answers, errors, take


async def test_every_answer_and_failure_is_taken_when_none_suffices() -> None:
    answers, errors, take = collect()
    enough = await ask_all(
        {"a": answer(1), "b": fail(Unavailable("down")), "c": answer(3)},
        take,
        lambda: False,
        cancel_rest=True,
    )
    assert not enough
    assert answers == {"a": 1, "c": 3}
    assert list(errors) == ["b"]


@pytest.mark.parametrize("cancel_rest", [True, False])
async def test_it_returns_once_enough_and_cancels_the_rest_only_when_asked(cancel_rest: bool) -> None:
    answers, _, take = collect()
    started = asyncio.Event()
    ended: list[str] = []
    slow = hang(started, ended)
    enough = await ask_all(
        {"fast": answer(1), "slow": slow},
        take,
        lambda: len(answers) >= 1,
        cancel_rest=cancel_rest,
    )
    assert enough and answers == {"fast": 1}
    await asyncio.sleep(0)  # let the cancellation (if any) land
    await asyncio.sleep(0)
    assert ended == (["cancelled"] if cancel_rest else [])
    if not cancel_rest:
        for task in asyncio.all_tasks():
            if task.get_coro() is slow:
                task.cancel()


async def test_answers_arriving_together_are_all_taken_before_enough_is_asked() -> None:
    answers, _, take = collect()
    together = asyncio.Event()
    asked_with: list[int] = []

    def enough() -> bool:
        asked_with.append(len(answers))
        return len(answers) >= 1

    calls = {"a": answer(1, together), "b": answer(2, together)}
    task = asyncio.ensure_future(ask_all(calls, take, enough, cancel_rest=True))
    await asyncio.sleep(0)
    together.set()
    assert await task
    assert answers == {"a": 1, "b": 2} and asked_with == [2]


async def test_an_error_take_raises_ends_the_fan_out() -> None:
    def take(key: str, value: int | None, error: QuireError | None) -> None:
        if isinstance(error, PermissionDenied):
            raise error

    started = asyncio.Event()
    ended: list[str] = []
    with pytest.raises(PermissionDenied):
        await ask_all(
            {"denied": fail(PermissionDenied("no")), "slow": hang(started, ended)},
            take,
            lambda: False,
            cancel_rest=True,
        )


async def test_a_bug_in_a_call_is_not_taken_as_an_answer() -> None:
    _, _, take = collect()
    with pytest.raises(ZeroDivisionError):
        await ask_all(
            {"bug": fail(ZeroDivisionError()), "gone": fail(NotFound("x"))},
            take,
            lambda: False,
            cancel_rest=True,
        )
