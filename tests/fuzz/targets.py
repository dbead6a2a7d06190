"""Fuzz targets shared by the hypothesis properties (tests/unit), the
bounded atheris runs in CI (test_fuzz.py) and `make fuzz`.

Each target takes arbitrary bytes. The contract (FAULTS BAD-7): malformed
input is refused with a QuireError (or protobuf's DecodeError where a raw
message is parsed), never with any other exception; well-formed input
round-trips exactly.
"""

from __future__ import annotations

import struct

from google.protobuf.message import DecodeError

from quire_api.errors import QuireError
from quire_api.ids import LedgerId, ledger_id_from_proto, parse_host_port, validate_bookie_id
from quire_common.entry import (
    Digester,
    DigestType,
    check_keyless_digest,
    header_ids,
    pack_entry,
    parse_header,
    unpack_entry,
)
from quire_gateway.blobs import decode_blob_id, encode_blob_id
from quire_proto.common.v1 import common_pb2
from quire_registry.ledger_records import validate_metadata

_DIGESTERS = {kind: Digester(kind, b"fuzz-password") for kind in DigestType}
_ALLOWED_BOOKIE_ID_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:-")


def entry_codec(data: bytes) -> None:
    """Parsing any bytes as a packed entry; packing and unpacking round-trip."""
    try:
        header = parse_header(data)
        assert header.ledger_id.scope_id >= 0
    except QuireError:
        pass
    try:
        header_ids(data)
    except QuireError:
        pass
    check_keyless_digest(data)
    for digester in _DIGESTERS.values():
        try:
            unpack_entry(data, digester)
        except QuireError:
            pass
    if len(data) >= 25:
        scope, ledger, entry_id = struct.unpack_from(">QQQ", data)
        kind = DigestType(data[24] % 4 + 1)
        payload = data[25:]
        entry_id &= 2**62 - 1
        packed = pack_entry(LedgerId(scope, ledger), entry_id, entry_id - 1, len(payload), payload, _DIGESTERS[kind])
        header, back = unpack_entry(packed, _DIGESTERS[kind])
        assert back == payload and header.entry_id == entry_id and header.ledger_id == LedgerId(scope, ledger)


def metadata_decoding(data: bytes) -> None:
    """Ledger metadata as the registry reads it from etcd or a request."""
    try:
        metadata = common_pb2.LedgerMetadata.FromString(data)
    except DecodeError:
        return
    try:
        validate_metadata(metadata)
    except QuireError:
        return
    # Whatever validates has sound quorums and valid BookieIds.
    assert metadata.ensemble_size >= metadata.write_quorum_size >= metadata.ack_quorum_size >= 1
    for ensemble in metadata.ensembles:
        for bookie_id in ensemble.bookie_ids:
            assert set(bookie_id) <= _ALLOWED_BOOKIE_ID_CHARS, bookie_id


def ids(data: bytes) -> None:
    """Ledger ids (qualified names, hex, scope:ledger, protos), blob ids and BookieIds."""
    text = data.decode("utf-8", "replace")
    try:
        parsed = LedgerId.parse(text)
        assert LedgerId.parse(parsed.qualified_name) == parsed
        assert LedgerId.from_key(parsed.key) == parsed
    except QuireError:
        pass
    try:
        accepted = validate_bookie_id(text)
        assert set(accepted) <= _ALLOWED_BOOKIE_ID_CHARS and accepted.lower() != "readonly", accepted
        assert 1 <= len(accepted) <= 255
    except QuireError:
        pass
    parse_host_port(text)
    try:
        ref = decode_blob_id(text)
        assert decode_blob_id(encode_blob_id(ref)) == ref
    except QuireError:
        pass
    try:
        message = common_pb2.LedgerId.FromString(data)
    except DecodeError:
        return
    try:
        ledger_id_from_proto(message)
    except QuireError:
        pass


TARGETS = {"entry_codec": entry_codec, "metadata_decoding": metadata_decoding, "ids": ids}
