"""A bookie writes its ReadEntry and ReadEntries replies and its AddStream
answers by hand (quire_bookie.servicer): they must be the bytes protobuf's
encoder writes."""

from __future__ import annotations

import pytest

from quire_api.errors import FailedPrecondition, Reason
from quire_api.ids import LedgerId
from quire_bookie.journal import StreamedAdd
from quire_bookie.servicer import ReceivedAdds, _AddStreamCodec, read_entries_reply, read_entry_reply
from quire_proto.bookie.v1 import bookie_pb2

FOUND = [(0, b""), (1, b"a" * 40), (300, b"b" * 70_000), (2**62, b"c")]


@pytest.mark.parametrize("entry_id, data", FOUND)
def test_a_read_entry_reply_is_what_protobuf_encodes(entry_id: int, data: bytes) -> None:
    expected = bookie_pb2.ReadEntryResponse(entry=bookie_pb2.PackedEntry(entry_id=entry_id, data=data))
    assert read_entry_reply(entry_id, data) == expected.SerializeToString()


@pytest.mark.parametrize(
    "found, missing, truncated",
    [
        (FOUND, [], False),
        (FOUND[1:2], [5, 2**40, 0], True),  # an id of 0 is still sent in a packed list
        ([], [7], False),
        ([], [], False),  # nothing: the empty message
    ],
)
def test_a_read_entries_reply_is_what_protobuf_encodes(
    found: list[tuple[int, bytes]], missing: list[int], truncated: bool
) -> None:
    expected = bookie_pb2.ReadEntriesResponse(
        entries=[bookie_pb2.PackedEntry(entry_id=e, data=d) for e, d in found],
        missing_entry_ids=missing,
        truncated=truncated,
    )
    encoded = read_entries_reply(found, missing, truncated)
    assert encoded == expected.SerializeToString()
    decoded = bookie_pb2.ReadEntriesResponse.FromString(encoded)
    assert [(e.entry_id, e.data) for e in decoded.entries] == found
    assert (list(decoded.missing_entry_ids), decoded.truncated) == (missing, truncated)


@pytest.mark.parametrize("add_ids", [[1], [5, 127, 128, 16_384, 2**40], []])
def test_an_add_stream_answer_of_stored_adds_lists_them_all_and_nothing_else(add_ids: list[int]) -> None:
    answer = bookie_pb2.AddStreamResponse.FromString(
        _AddStreamCodec.encode(_message(True, add_ids), _adds(add_ids), [None] * len(add_ids))
    )
    assert list(answer.stored_add_ids) == add_ids
    assert not answer.results


def _message(stored_ids: bool, add_ids: list[int]) -> ReceivedAdds:
    request = bookie_pb2.AddStreamRequest(
        adds=[bookie_pb2.StreamedAdd(add_id=i) for i in add_ids], stored_ids=stored_ids
    )
    return ReceivedAdds(request, request.ByteSize())


def _adds(add_ids: list[int]) -> list[StreamedAdd]:
    return [StreamedAdd(add_id, LedgerId(0, 1), b"k" * 20, [(0, b"")], False) for add_id in add_ids]


def test_an_add_stream_answer_with_a_refusal_names_it_beside_the_stored() -> None:
    refusal = FailedPrecondition("ledger 0/1 is fenced", Reason.LEDGER_FENCED)
    answer = bookie_pb2.AddStreamResponse.FromString(
        _AddStreamCodec.encode(_message(True, [3, 4, 5]), _adds([3, 4, 5]), [None, refusal, None])
    )
    assert list(answer.stored_add_ids) == [3, 5]
    assert [(r.add_id, r.reason, r.code) for r in answer.results] == [(4, Reason.LEDGER_FENCED, 9)]


def test_an_add_stream_answer_to_a_gateway_without_stored_ids_has_a_result_per_add() -> None:
    answer = bookie_pb2.AddStreamResponse.FromString(
        _AddStreamCodec.encode(_message(False, [3, 4]), _adds([3, 4]), [None, None])
    )
    assert not answer.stored_add_ids
    assert [(r.add_id, r.code) for r in answer.results] == [(3, 0), (4, 0)]
