"""The bounds on what one call and one caller may hold (quire_common.call_limits)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from quire_api.errors import DeadlineExceeded, ResourceExhausted
from quire_common.call_limits import MAX_METADATA_BYTES, CallsPerCaller, ConnectionLimits, RequestIdle


async def messages(*gaps: float) -> AsyncIterator[int]:
    """Yields 0, 1, ... each after its gap."""
    for index, gap in enumerate(gaps):
        await asyncio.sleep(gap)
        yield index


async def collect(idle: RequestIdle, *gaps: float) -> list[int]:
    return [message async for message in idle.limit(messages(*gaps))]


def test_messages_that_arrive_pass_unchanged() -> None:
    assert asyncio.run(collect(RequestIdle(5.0, 5.0), 0, 0, 0)) == [0, 1, 2]
    assert asyncio.run(collect(RequestIdle(), 0.01, 0.01)) == [0, 1]  # 0: no limit


def test_a_first_message_that_never_comes_ends_the_call() -> None:
    with pytest.raises(DeadlineExceeded, match=r"first request message.*QUIRE_GATEWAY_REQUEST_IDLE_SECONDS"):
        asyncio.run(collect(RequestIdle(0.05, 0.0), 3600))


def test_a_stream_that_goes_quiet_is_ended_only_with_its_own_limit() -> None:
    with pytest.raises(DeadlineExceeded, match=r"next request message.*QUIRE_GATEWAY_STREAM_IDLE_SECONDS"):
        asyncio.run(collect(RequestIdle(5.0, 0.05), 0, 3600))
    # The first-message limit alone lets a stream pause between messages.
    assert asyncio.run(collect(RequestIdle(0.05, 0.0), 0, 0.2)) == [0, 1]


async def read_after(seconds: float) -> str:
    """A unary call's message, as context.read() gives it, `seconds` after its headers."""
    await asyncio.sleep(seconds)
    return "message"


def test_a_unary_calls_message_is_read_within_the_first_message_limit() -> None:
    assert asyncio.run(RequestIdle(5.0, 0.0).first_message(lambda: read_after(0))) == "message"
    assert asyncio.run(RequestIdle().first_message(lambda: read_after(0.01))) == "message"  # 0: no limit
    with pytest.raises(DeadlineExceeded, match=r"first request message.*QUIRE_GATEWAY_REQUEST_IDLE_SECONDS"):
        asyncio.run(RequestIdle(0.05, 5.0).first_message(lambda: read_after(3600)))


def test_each_wait_ends_at_its_own_deadline_among_many() -> None:
    """One timer serves every waiting call: a short bound started after a
    long one still ends on time, and calls whose message came are untouched."""

    async def run() -> tuple[list[str], float]:
        loop = asyncio.get_running_loop()
        began = loop.time()
        long_wait = asyncio.ensure_future(RequestIdle(30.0, 0.0).first_message(lambda: read_after(3600)))
        answered = [RequestIdle(20.0, 0.0).first_message(lambda: read_after(0)) for _ in range(5)]
        outcomes = await asyncio.gather(
            RequestIdle(0.1, 0.0).first_message(lambda: read_after(3600)), *answered, return_exceptions=True
        )
        took = loop.time() - began
        long_wait.cancel()
        return [type(outcome).__name__ if isinstance(outcome, Exception) else outcome for outcome in outcomes], took

    outcomes, took = asyncio.run(run())
    assert outcomes == ["DeadlineExceeded"] + ["message"] * 5
    assert took < 30.0  # the 30 s wait armed first did not hold the 0.1 s one back


def test_a_cancelled_wait_stays_cancelled_and_an_ended_one_leaves_the_task_uncancelled() -> None:
    async def cancelled_from_outside() -> None:
        # A bound no busy machine reaches first: the cancellation must come from outside.
        waiting = asyncio.ensure_future(RequestIdle(30.0, 0.0).first_message(lambda: read_after(3600)))
        await asyncio.sleep(0)
        waiting.cancel()  # the client went away: that is not the idle bound's to answer
        with pytest.raises(asyncio.CancelledError):
            await waiting

    async def ended_then_goes_on() -> int:
        with pytest.raises(DeadlineExceeded):
            await RequestIdle(0.05, 0.0).first_message(lambda: read_after(3600))
        task = asyncio.current_task()
        assert task is not None
        await asyncio.sleep(0)  # the task runs on: no cancellation is left pending on it
        return task.cancelling()

    asyncio.run(cancelled_from_outside())
    assert asyncio.run(ended_then_goes_on()) == 0


def test_the_check_sees_the_first_message_or_every_one() -> None:
    async def checked(check_every: bool, *refused: int) -> tuple[list[int], list[int]]:
        """(the messages the check saw, the messages that passed)."""
        seen: list[int] = []

        def check(message: int) -> None:
            seen.append(message)
            if message in refused:
                raise ValueError(f"{message} refused")

        passed = [message async for message in RequestIdle().limit(messages(0, 0, 0), check, check_every)]
        return seen, passed

    assert asyncio.run(checked(False)) == ([0], [0, 1, 2])
    assert asyncio.run(checked(True)) == ([0, 1, 2], [0, 1, 2])
    with pytest.raises(ValueError, match="1 refused"):
        asyncio.run(checked(True, 1))
    with pytest.raises(ValueError, match="0 refused"):
        asyncio.run(checked(False, 0))


def test_a_caller_is_refused_at_its_limit_and_admitted_again_when_a_call_ends() -> None:
    calls = CallsPerCaller(2)
    calls.admit("certificate:a")
    calls.admit("certificate:a")
    calls.admit("token:b")  # another caller has its own count
    with pytest.raises(ResourceExhausted, match="QUIRE_GATEWAY_MAX_CALLS_PER_CALLER") as refused:
        calls.admit("certificate:a")
    assert refused.value.retryable
    calls.release("certificate:a")
    calls.admit("certificate:a")
    assert calls.open_calls("certificate:a") == 2
    for _ in range(2):
        calls.release("certificate:a")
    assert calls.open_calls("certificate:a") == 0


def test_no_limit_admits_everyone() -> None:
    calls = CallsPerCaller(0)
    for _ in range(10_000):
        calls.admit("token:c")


def test_connection_options() -> None:
    options = dict(ConnectionLimits(8, 30.0, 10.0, 300.0).server_options())
    assert options == {
        "grpc.max_metadata_size": MAX_METADATA_BYTES,
        "grpc.absolute_max_metadata_size": MAX_METADATA_BYTES,
        "grpc.max_concurrent_streams": 8,
        "grpc.keepalive_time_ms": 30_000,
        "grpc.keepalive_timeout_ms": 10_000,
        "grpc.keepalive_permit_without_calls": 1,
        "grpc.max_connection_idle_ms": 300_000,
    }
    # 0: grpc's own defaults (no limit) rather than a limit of zero.
    assert set(dict(ConnectionLimits().server_options())) == {
        "grpc.max_metadata_size",
        "grpc.absolute_max_metadata_size",
    }
