"""Property tests over the decoders a hostile peer can reach (FAULTS BAD-1,
BAD-5, BAD-7): the same targets atheris fuzzes (tests/fuzz/targets.py),
driven by hypothesis, plus round-trips of well-formed values."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quire_api.errors import InvalidArgument
from quire_api.ids import LedgerId, validate_bookie_id
from quire_common.entry import Digester, DigestType, pack_entry, unpack_entry
from quire_gateway.blobs import BlobRef, decode_blob_id, encode_blob_id
from tests.fuzz.targets import entry_codec, ids, metadata_decoding

U64 = st.integers(min_value=0, max_value=2**64 - 1)


@settings(max_examples=500)
@given(st.binary(max_size=300))
def test_entry_codec_refuses_garbage_cleanly(data: bytes) -> None:
    entry_codec(data)


@settings(max_examples=500)
@given(st.binary(max_size=300))
def test_metadata_decoding_refuses_garbage_cleanly(data: bytes) -> None:
    metadata_decoding(data)


@settings(max_examples=500)
@given(st.one_of(st.binary(max_size=80), st.text(max_size=80).map(str.encode)))
def test_id_parsers_refuse_garbage_cleanly(data: bytes) -> None:
    ids(data)


@given(U64, U64)
def test_ledger_ids_round_trip(scope: int, ledger: int) -> None:
    ledger_id = LedgerId(scope, ledger)
    assert LedgerId.parse(ledger_id.qualified_name) == ledger_id
    assert LedgerId.parse(f"{scope}:{ledger}") == ledger_id
    assert LedgerId.from_key(ledger_id.key) == ledger_id


@given(U64, U64, st.integers(min_value=0, max_value=2**40), st.integers(min_value=1, max_value=2**20))
def test_blob_ids_round_trip(scope: int, ledger: int, first: int, count: int) -> None:
    ref = BlobRef(LedgerId(scope, ledger), first, count)
    assert decode_blob_id(encode_blob_id(ref)) == ref


@given(U64, U64, st.integers(min_value=0, max_value=2**62), st.binary(max_size=200), st.sampled_from(list(DigestType)))
def test_entries_round_trip(scope: int, ledger: int, entry_id: int, payload: bytes, kind: DigestType) -> None:
    digester = Digester(kind, b"pw")
    packed = pack_entry(LedgerId(scope, ledger), entry_id, entry_id - 1, len(payload), payload, digester)
    header, back = unpack_entry(packed, digester)
    assert back == payload and header.entry_id == entry_id


@pytest.mark.parametrize("bookie_id", ["abc\n", "a b", "a/b", "a@b", "[::1]:3181", "ä", "x" * 256, "ReadOnly", ""])
def test_bookie_ids_outside_the_allow_list_are_refused(bookie_id: str) -> None:
    with pytest.raises(InvalidArgument):
        validate_bookie_id(bookie_id)
