"""How a gateway's bookie stream (bookie_streams.BookieAddStream) matches a
bookie's answers to the messages it has in flight, whichever message an
answer is for."""

from __future__ import annotations

import asyncio
from typing import Any

from quire_api.errors import QuireError
from quire_api.ids import LedgerId
from quire_gateway.write.bookie_streams import AddRequest, BookieAddStream
from quire_proto.bookie.v1 import bookie_pb2


class _HeldCall:
    """A bookie's AddStream whose answers the test sends, in the order it chooses."""

    def __init__(self) -> None:
        self.messages: list[list[int]] = []  # the add ids of each message written
        self._answers: asyncio.Queue[bookie_pb2.AddStreamResponse] = asyncio.Queue()

    async def write(self, message: bytes) -> None:
        self.messages.append([add.add_id for add in bookie_pb2.AddStreamRequest.FromString(message).adds])

    async def read(self) -> bookie_pb2.AddStreamResponse:
        return await self._answers.get()

    def answer(self, add_ids: list[int]) -> None:
        self._answers.put_nowait(bookie_pb2.AddStreamResponse(stored_add_ids=add_ids))

    def cancel(self) -> bool:
        return True


async def _until(condition: Any) -> None:
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("not within 1,000 turns of the loop")


async def test_an_answer_for_a_later_message_in_flight_is_matched_before_the_oldest_is_answered():
    call = _HeldCall()

    async def open_call() -> Any:
        return lambda: call

    # One 600 KiB add per message; a full message's worth waiting lets a second message go
    # before the first is answered (the pipelining of large entries).
    stream = BookieAddStream("bookie-1", open_call, lambda: None, max_message_bytes=700 * 1024)
    loop = asyncio.get_running_loop()
    outcomes: list[asyncio.Future[QuireError | None]] = []
    try:
        for entry_id in range(3):
            outcome: asyncio.Future[QuireError | None] = loop.create_future()
            request = AddRequest(LedgerId(1, 1), b"k" * 20, [(entry_id, b"x" * (600 * 1024))])
            stream.send(request, 60.0, lambda _bookie, error, outcome=outcome: outcome.set_result(error))
            outcomes.append(outcome)
        await _until(lambda: len(call.messages) == 2)
        first, second = call.messages

        call.answer(second)  # the later message's answer comes first
        await asyncio.wait_for(outcomes[1], 10)
        assert outcomes[1].result() is None
        assert not outcomes[0].done(), "the oldest message is still unanswered"

        call.answer(first)
        await asyncio.wait_for(outcomes[0], 10)
        assert outcomes[0].result() is None
        await _until(lambda: len(call.messages) == 3)  # the window has room again: the third add leaves
        call.answer(call.messages[2])
        await asyncio.wait_for(outcomes[2], 10)
        assert outcomes[2].result() is None
        assert stream.messages_sent == 3 and stream.adds_sent == 3
    finally:
        await stream.close()
