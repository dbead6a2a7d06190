import hashlib
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quire_api.errors import DataLoss, InvalidArgument, Reason
from quire_api.ids import U64_MAX, LedgerId
from quire_common.entry import (
    V2_HEADER_SIZE,
    Digester,
    DigestMismatch,
    DigestType,
    check_keyless_digest,
    header_ids,
    header_ids_and_digest,
    master_key,
    pack_entry,
    pack_entry_v1,
    parse_header,
    unpack_entry,
    verified_entry,
    verified_without_key,
)

V1_HELLO_HEADER = bytes.fromhex("00000000000000010000000000000000ffffffffffffffff0000000000000005")


def test_v1_check_values_from_the_design():
    crc32 = pack_entry_v1(1, 0, -1, 5, b"hello", Digester(DigestType.CRC32))
    assert crc32 == V1_HELLO_HEADER + bytes.fromhex("0000000030a56872") + b"hello"
    crc32c = pack_entry_v1(1, 0, -1, 5, b"hello", Digester(DigestType.CRC32C))
    assert crc32c == V1_HELLO_HEADER + bytes.fromhex("e3a5f74d") + b"hello"


def test_master_key_check_value():
    assert master_key(b"pwd").hex() == "9c31dcb7214645e06dbf8a67daa6cfcdcd13a611"


def test_hmac_digest_is_keyed_with_sha1_of_mac_and_password():
    packed = pack_entry(LedgerId(0, 1), 0, -1, 5, b"hello", Digester(DigestType.HMAC, b"pwd"))
    import hmac as hmac_module

    key = hashlib.sha1(b"macpwd").digest()
    expected = hmac_module.new(key, packed[:V2_HEADER_SIZE] + b"hello", hashlib.sha1).digest()
    assert packed[V2_HEADER_SIZE : V2_HEADER_SIZE + 20] == expected


def test_v2_layout():
    packed = pack_entry(LedgerId(5, 7), 3, 2, 100, b"abc", Digester(DigestType.CRC32))
    assert packed[0] == 0x80 | DigestType.CRC32
    assert packed[1:9] == (5).to_bytes(8, "big") and packed[9:17] == (7).to_bytes(8, "big")
    assert int.from_bytes(packed[17:25], "big") == 3
    assert len(packed) == V2_HEADER_SIZE + 8 + 3
    assert int.from_bytes(packed[V2_HEADER_SIZE : V2_HEADER_SIZE + 8], "big") == zlib.crc32(
        packed[:V2_HEADER_SIZE] + b"abc"
    )


def test_v1_entries_are_still_read():
    digester = Digester(DigestType.CRC32C)
    header, payload = unpack_entry(pack_entry_v1(9, 4, 3, 10, b"old", digester), digester)
    assert (header.ledger_id, header.entry_id, header.format_version, payload) == (
        LedgerId(0, 9),
        4,
        1,
        b"old",
    )


entries = st.tuples(
    st.integers(0, U64_MAX),
    st.integers(1, U64_MAX),
    st.integers(0, 2**63 - 1),
    st.integers(-1, 2**63 - 1),
    st.integers(0, 2**63 - 1),
    st.binary(max_size=2048),
    st.sampled_from(list(DigestType)),
    st.binary(max_size=16),
)


@given(entries)
def test_round_trip(entry):
    scope, ledger, entry_id, lac, length, payload, digest_type, password = entry
    digester = Digester(digest_type, password)
    header, unpacked = unpack_entry(
        pack_entry(LedgerId(scope, ledger), entry_id, lac, length, payload, digester), digester
    )
    assert unpacked == payload
    assert (header.ledger_id, header.entry_id, header.last_add_confirmed, header.length) == (
        LedgerId(scope, ledger),
        entry_id,
        lac,
        length,
    )
    assert header.digest_type == digest_type and header.format_version == 2


@settings(max_examples=300)
@given(entries, st.data())
def test_any_flipped_bit_is_detected(entry, data):
    scope, ledger, entry_id, lac, length, payload, digest_type, password = entry
    if digest_type is DigestType.DUMMY:
        digest_type = DigestType.CRC32C  # DUMMY detects nothing, by definition
    digester = Digester(digest_type, password)
    packed = bytearray(pack_entry(LedgerId(scope, ledger), entry_id, lac, length, payload, digester))
    bit = data.draw(st.integers(0, len(packed) * 8 - 1))
    packed[bit // 8] ^= 1 << (bit % 8)
    with pytest.raises((DigestMismatch, InvalidArgument)):
        unpack_entry(bytes(packed), digester)


def test_wrong_password_fails_hmac():
    packed = pack_entry(LedgerId(1, 1), 0, -1, 1, b"x", Digester(DigestType.HMAC, b"right"))
    with pytest.raises(DigestMismatch):
        unpack_entry(packed, Digester(DigestType.HMAC, b"wrong"))


@pytest.mark.parametrize("stored_as", [(LedgerId(7, 9), 4), (LedgerId(7, 8), 3), (LedgerId(6, 9), 3)])
def test_a_good_copy_of_another_entry_is_not_verified(stored_as):
    digester = Digester(DigestType.CRC32C)
    packed = pack_entry(LedgerId(7, 9), 3, 2, 10, b"x", digester)
    unpack_entry(packed, digester)  # the digest alone passes it
    header, payload = verified_entry(packed, digester, LedgerId(7, 9), 3)
    assert (header.entry_id, payload) == (3, b"x")
    with pytest.raises(DataLoss) as raised:
        verified_entry(packed, digester, *stored_as)
    assert raised.value.reason == Reason.ENTRY_HEADER_MISMATCH
    assert "is entry 3 of ledger" in str(raised.value)


@pytest.mark.parametrize("data", [b"", b"\x80" + b"\x00" * 10, b"\x00" * 5, bytes([0x80 | 0x0F]) + b"\x00" * 40])
def test_malformed_headers_are_invalid_argument(data):
    with pytest.raises(InvalidArgument):
        parse_header(data)


@settings(max_examples=200)
@given(entries)
def test_header_ids_agree_with_parse_header(entry):
    scope, ledger, entry_id, lac, length, payload, digest_type, password = entry
    packed = pack_entry(LedgerId(scope, ledger), entry_id, lac, length, payload, Digester(digest_type, password))
    header = parse_header(packed)
    assert header_ids(packed) == (scope, ledger, header.entry_id, header.last_add_confirmed)
    old = pack_entry_v1(ledger >> 1, entry_id, lac, length, payload, Digester(digest_type, password))
    assert header_ids(old) == (0, ledger >> 1, entry_id, lac)


@pytest.mark.parametrize("data", [b"", b"\x80" + b"\x00" * 10, b"\x00" * 5, bytes([0x80 | 0x0F]) + b"\x00" * 40])
def test_header_ids_rejects_what_parse_header_rejects(data):
    with pytest.raises(InvalidArgument):
        header_ids(data)


@settings(max_examples=300)
@given(entries, st.data())
def test_keyless_digests_catch_any_flipped_bit(entry, data):
    scope, ledger, entry_id, lac, length, payload, _, _ = entry
    digest_type = data.draw(st.sampled_from([DigestType.CRC32, DigestType.CRC32C]))
    packed = bytearray(pack_entry(LedgerId(scope, ledger), entry_id, lac, length, payload, Digester(digest_type)))
    assert check_keyless_digest(bytes(packed)) is True
    bit = data.draw(st.integers(8, len(packed) * 8 - 1))  # the flags byte aside: it names the digest
    packed[bit // 8] ^= 1 << (bit % 8)
    assert check_keyless_digest(bytes(packed)) is False


@settings(max_examples=200, deadline=None)
@given(entries, st.data())
def test_a_bookie_verifies_a_copy_by_its_header_ids_and_keyless_digest(entry, data):
    scope, ledger, entry_id, lac, length, payload, _, _ = entry
    ledger_id = LedgerId(scope, ledger)
    digest_type = data.draw(st.sampled_from(list(DigestType)))
    packed = bytearray(pack_entry(ledger_id, entry_id, lac, length, payload, Digester(digest_type, b"pw")))
    assert verified_without_key(bytes(packed), ledger_id, entry_id)
    assert not verified_without_key(bytes(packed), ledger_id, entry_id + 1)
    assert not verified_without_key(bytes(packed), LedgerId(scope, ledger ^ 1), entry_id)
    bit = data.draw(st.integers(8, len(packed) * 8 - 1))
    packed[bit // 8] ^= 1 << (bit % 8)
    # A flipped bit is caught unless only a key could tell (HMAC) or there is no digest (DUMMY),
    # and then only where the header's ids are not touched.
    ids_intact = header_ids(bytes(packed))[:3] == (scope, ledger, entry_id)
    caught_without_key = digest_type in (DigestType.CRC32, DigestType.CRC32C) or not ids_intact
    assert verified_without_key(bytes(packed), ledger_id, entry_id) is not caught_without_key


@settings(max_examples=300)
@given(entries, st.data())
def test_the_bookies_one_call_check_agrees_with_header_ids_and_the_keyless_digest(entry, data):
    """header_ids_and_digest takes a shortcut for V2 CRC32C entries: on any
    entry, damaged or not, V1 or V2, it must answer what the two checks it
    stands for answer."""
    scope, ledger, entry_id, lac, length, payload, digest_type, password = entry
    digester = Digester(digest_type, password)
    packed = bytearray(
        pack_entry(LedgerId(scope, ledger), entry_id, lac, length, payload, digester)
        if data.draw(st.booleans())
        else pack_entry_v1(ledger >> 1, entry_id, lac, length, payload, digester)
    )
    if data.draw(st.booleans()):
        bit = data.draw(st.integers(0, len(packed) * 8 - 1))
        packed[bit // 8] ^= 1 << (bit % 8)
    copy = bytes(packed)
    try:
        expected = (*header_ids(copy), check_keyless_digest(copy))
    except InvalidArgument:
        with pytest.raises(InvalidArgument):
            header_ids_and_digest(copy)
        return
    assert header_ids_and_digest(copy) == expected


def test_keyless_digest_cannot_judge_hmac_dummy_or_v1():
    ledger = LedgerId(1, 2)
    assert check_keyless_digest(pack_entry(ledger, 0, -1, 1, b"x", Digester(DigestType.HMAC, b"pw"))) is None
    assert check_keyless_digest(pack_entry(ledger, 0, -1, 1, b"x", Digester(DigestType.DUMMY))) is None
    assert check_keyless_digest(pack_entry_v1(2, 0, -1, 1, b"x", Digester(DigestType.CRC32C))) is None
