"""The gateway writes AddStreamRequests by hand from adds encoded once
(bookie_streams.AddRequest.encoded): they must read back as the protobuf says."""

from __future__ import annotations

from quire_api.ids import LedgerId
from quire_gateway.write import bookie_streams
from quire_gateway.write.bookie_streams import AddRequest
from quire_proto.bookie.v1 import bookie_pb2


def test_joined_encoded_adds_read_back_as_an_add_stream_request():
    ledger = LedgerId(3, 2**64 - 1)
    requests = [
        AddRequest(ledger, b"k" * 20, [(0, b"x")]),
        AddRequest(ledger, b"k" * 20, [(1, b"y" * 300), (2, b"z" * 70_000)], recovery=True),  # 2- and 3-byte lengths
    ]
    wire = b"".join(request.encoded() for request in requests) + bookie_streams._STORED_IDS
    decoded = bookie_pb2.AddStreamRequest.FromString(wire)
    assert decoded.stored_ids
    assert [add.add_id for add in decoded.adds] == [request.add_id for request in requests]
    for add, request in zip(decoded.adds, requests, strict=True):
        assert (add.ledger_id.scope_id, add.ledger_id.ledger_id) == (3, 2**64 - 1)
        assert add.master_key == b"k" * 20 and add.recovery == request.recovery
        assert [(e.entry_id, e.data) for e in add.entries] == request.entries


def test_varint_matches_protobuf():
    for value in (0, 1, 127, 128, 300, 16_383, 16_384, 2**21, 2**35 + 5):
        message = bookie_pb2.AddResult(add_id=value).SerializeToString()
        assert message == b"\x08" + bookie_streams._varint(value) or value == 0
