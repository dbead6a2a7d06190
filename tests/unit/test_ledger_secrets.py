"""The ledger password is kept as a salted hash and derived keys (ledger_secrets.py)."""

from __future__ import annotations

from quire_common.entry import Digester, DigestType, master_key
from quire_common.ledger_secrets import (
    PASSWORD_HASH_ITERATIONS,
    ledger_digester,
    ledger_master_key,
    needs_sealing,
    password_matches,
    seal,
    slow_to_check,
    without_secrets,
)
from quire_proto.common.v1 import common_pb2

PASSWORD = b"correct horse"
HEADER, PAYLOAD = b"\x00" * 24, b"payload"


def legacy(digest_type: int = DigestType.HMAC) -> common_pb2.LedgerMetadata:
    return common_pb2.LedgerMetadata(ensemble_size=1, digest_type=digest_type, password=PASSWORD)


def test_a_sealed_record_holds_no_password_bytes() -> None:
    record = legacy()
    seal(record)
    assert not record.password
    assert PASSWORD not in record.SerializeToString()
    assert not needs_sealing(record)


def test_a_sealed_record_checks_the_password_and_keeps_the_keys() -> None:
    old, new = legacy(), legacy()
    seal(new)
    for record in (old, new):
        assert password_matches(record, PASSWORD)
        assert not password_matches(record, b"wrong")
        assert ledger_master_key(record) == master_key(PASSWORD)
        expected = Digester(DigestType.HMAC, PASSWORD).compute(HEADER, PAYLOAD)
        assert ledger_digester(record).compute(HEADER, PAYLOAD) == expected


def test_each_seal_salts_afresh_and_sealing_twice_changes_nothing() -> None:
    first, second = legacy(), legacy()
    seal(first)
    seal(second)
    assert first.secrets.password_salt != second.secrets.password_salt
    assert first.secrets.password_hash != second.secrets.password_hash
    before = first.SerializeToString()
    seal(first)
    assert first.SerializeToString() == before


def test_a_crc_ledger_keeps_no_mac_key_and_the_empty_password_works() -> None:
    record = common_pb2.LedgerMetadata(ensemble_size=1, digest_type=DigestType.CRC32C)
    assert needs_sealing(record)
    seal(record)
    assert record.secrets.mac_key == b""
    assert password_matches(record, b"")
    assert not password_matches(record, b"x")
    assert ledger_master_key(record) == master_key(b"")


def test_what_clients_see_has_neither_form() -> None:
    old, new = legacy(), legacy()
    seal(new)
    for record in (old, new):
        shown = without_secrets(record)
        assert not shown.password and not shown.HasField("secrets")


def test_kept_beside_the_secrets_for_the_previous_version_then_dropped() -> None:
    record = legacy()
    seal(record, keep_password=True)
    assert record.password == PASSWORD and record.HasField("secrets")
    assert not needs_sealing(record, keep_password=True)
    assert password_matches(record, PASSWORD)
    assert needs_sealing(record)
    seal(record)
    assert not record.password and password_matches(record, PASSWORD)


def test_only_a_real_password_is_stretched() -> None:
    with_password, without = legacy(), common_pb2.LedgerMetadata(ensemble_size=1, digest_type=DigestType.CRC32C)
    seal(with_password)
    seal(without)
    assert with_password.secrets.password_iterations == PASSWORD_HASH_ITERATIONS
    assert slow_to_check(with_password)
    assert without.secrets.password_iterations == 1  # the empty password is everyone's: nothing to slow down
    assert not slow_to_check(without)
    assert password_matches(without, b"") and not password_matches(without, PASSWORD)
