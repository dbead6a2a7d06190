"""The gateway writes AddStreamRequests by hand from adds encoded once
(bookie_streams.AddRequest.wire): they must read back as the protobuf says."""

from __future__ import annotations

import pytest

from quire_api.ids import LedgerId, ledger_id_to_proto
from quire_common.wire import varint
from quire_gateway.write import bookie_streams
from quire_gateway.write.bookie_streams import AddRequest
from quire_proto.bookie.v1 import bookie_pb2


def test_joined_encoded_adds_read_back_as_an_add_stream_request():
    ledger = LedgerId(3, 2**64 - 1)
    requests = [
        AddRequest(ledger, b"k" * 20, [(0, b"x")]),
        AddRequest(ledger, b"k" * 20, [(1, b"y" * 300), (2, b"z" * 70_000)], recovery=True),  # 2- and 3-byte lengths
        AddRequest(LedgerId(0, 5), b"m" * 20, [(2**62, b"")]),  # a 9-byte id, an empty payload
        AddRequest(
            LedgerId(0, 5), b"m" * 20, [(20_000, b"v"), (300_000, b"u"), (3_000_000, b"t")]
        ),  # 3-, 3-, 4-byte ids
        # A writer's add: the fields besides the id and entries encoded once for its ledger.
        AddRequest(ledger, b"k" * 20, [(3, b"w")], fields=bookie_streams.add_fields(ledger, b"k" * 20)),
    ]
    wire = b"".join(piece for request in requests for piece in request.wire) + bookie_streams._STORED_IDS
    decoded = bookie_pb2.AddStreamRequest.FromString(wire)
    assert decoded.stored_ids
    assert [add.add_id for add in decoded.adds] == [request.add_id for request in requests]
    for add, request in zip(decoded.adds, requests, strict=True):
        assert (add.ledger_id.scope_id, add.ledger_id.ledger_id) == tuple(request.ledger_id)
        assert add.master_key == request.master_key and add.recovery == request.recovery
        assert [(e.entry_id, e.data) for e in add.entries] == request.entries


def test_varint_matches_protobuf():
    for value in (0, 1, 127, 128, 300, 16_383, 16_384, 2**21 - 1, 2**21, 2**35 + 5, 2**64 - 1):
        message = bookie_pb2.AddResult(add_id=value).SerializeToString()
        assert message == b"\x08" + varint(value) or value == 0


def test_an_adds_wire_form_is_what_protobuf_encodes_and_references_the_packed_entries(
    monkeypatch: pytest.MonkeyPatch,
):
    """The same bytes as the protobuf encoder's, with every field (a trace
    context too), and the entries' bytes are the writer's own objects, not
    copies: the message sent is where they are copied."""
    traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    monkeypatch.setattr(bookie_streams, "tracing_enabled", lambda: True)
    monkeypatch.setattr(bookie_streams, "_traceparent", lambda: traceparent)
    entries = [(7, b"a" * 200), (8, b"b" * 5)]
    request = AddRequest(LedgerId(1, 2), b"k" * 20, entries, recovery=True)
    assert request.traceparent == traceparent
    pieces = request.wire
    built = bookie_pb2.AddStreamRequest(
        adds=[
            bookie_pb2.StreamedAdd(
                add_id=request.add_id,
                ledger_id=ledger_id_to_proto(LedgerId(1, 2)),
                master_key=b"k" * 20,
                entries=[bookie_pb2.PackedEntry(entry_id=e, data=d) for e, d in entries],
                recovery=True,
                traceparent=request.traceparent,
            )
        ]
    )
    assert bookie_pb2.AddStreamRequest.FromString(b"".join(pieces)) == built
    assert len(b"".join(pieces)) == built.ByteSize()
    assert [data for _, data in entries] == [p for p in pieces if any(p is data for _, data in entries)]


@pytest.mark.parametrize("table_size", [1, 4096])
def test_entries_sharing_a_framing_read_back_whatever_the_table_holds(monkeypatch: pytest.MonkeyPatch, table_size: int):
    """Entries of one size and id length share their framing (kept in a
    table that starts again when full): each still reads back as itself."""
    monkeypatch.setattr(bookie_streams, "_MAX_ENTRY_FRAMINGS", table_size)
    monkeypatch.setattr(bookie_streams, "_entry_framings", {})
    entries = [(5, b"q" * 10), (6, b"r" * 10), (20_000, b"s" * 10), (7, b"t" * 300), (8, b"u" * 10)]
    request = AddRequest(LedgerId(1, 2), b"k" * 20, entries)
    decoded = bookie_pb2.AddStreamRequest.FromString(b"".join(request.wire))
    assert [(e.entry_id, e.data) for e in decoded.adds[0].entries] == entries
    assert len(bookie_streams._entry_framings) <= table_size
