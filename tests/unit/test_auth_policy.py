"""Roles, tokens and the RPC -> permission table (quire_common.auth,
quire_gateway.permissions): pure, no sockets."""

from __future__ import annotations

import time

import jwt
import pytest

from quire.gateway.v1 import blob_pb2, ledger_pb2
from quire_api.errors import InvalidArgument, PermissionDenied, Unauthenticated
from quire_api.ids import LedgerId, ledger_id_to_proto
from quire_common.auth import ADMIN, READ, WRITE, AuthSettings, Principal, TokenVerifier, parse_roles
from quire_gateway.blobs import BlobRef, encode_blob_id
from quire_gateway.permissions import required_permission

SECRET = b"0123456789abcdef0123456789abcdef"
LEDGER = ledger_id_to_proto(LedgerId(7, 42))


def token(claims: dict[str, object], key: bytes = SECRET) -> str:
    return jwt.encode({"sub": "alice", "exp": int(time.time()) + 60, **claims}, key, algorithm="HS256")


@pytest.mark.parametrize(
    ("method", "request_", "expected"),
    [
        ("ReadEntries", ledger_pb2.ReadEntriesRequest(ledger_id=LEDGER), (READ, 7)),
        ("TailEntries", ledger_pb2.TailEntriesRequest(ledger_id=LEDGER), (READ, 7)),
        ("OpenLedger", ledger_pb2.OpenLedgerRequest(ledger_id=LEDGER), (READ, 7)),
        ("OpenLedger", ledger_pb2.OpenLedgerRequest(ledger_id=LEDGER, recovery=True), (ADMIN, 7)),
        ("AddEntry", ledger_pb2.AddEntryRequest(ledger_id=LEDGER), (WRITE, 7)),
        ("AppendEntries", ledger_pb2.AppendEntriesRequest(ledger_id=LEDGER), (WRITE, 7)),
        ("CloseLedger", ledger_pb2.CloseLedgerRequest(ledger_id=LEDGER), (WRITE, 7)),
        ("DeleteLedger", ledger_pb2.DeleteLedgerRequest(ledger_id=LEDGER), (ADMIN, 7)),
        ("CreateLedger", ledger_pb2.CreateLedgerRequest(scope_id=9), (WRITE, 9)),
        ("CreateLedger", ledger_pb2.CreateLedgerRequest(legacy=True), (WRITE, 0)),
        ("CreateLedger", ledger_pb2.CreateLedgerRequest(), (WRITE, None)),
        ("ListLedgers", ledger_pb2.ListLedgersRequest(scope_id=3), (READ, 3)),
        ("ListLedgers", ledger_pb2.ListLedgersRequest(all_scopes=True), (READ, None)),
        ("PutBlob", blob_pb2.PutBlobRequest(scope_id=5), (WRITE, 5)),
        (
            "GetBlob",
            blob_pb2.GetBlobRequest(blob_id=encode_blob_id(BlobRef(LedgerId(4, 1), 0, 1))),
            (READ, 4),
        ),
        ("SomeNewRpc", ledger_pb2.ReadEntriesRequest(), (ADMIN, None)),
    ],
)
def test_every_rpc_needs_one_permission_on_one_scope(method: str, request_: object, expected: tuple) -> None:
    assert required_permission(method, request_) == expected


def test_a_request_without_a_ledger_is_invalid_before_authorization() -> None:
    with pytest.raises(InvalidArgument):
        required_permission("ReadEntries", ledger_pb2.ReadEntriesRequest())


def test_roles_nest_and_scopes_do_not_leak() -> None:
    principal = Principal("bob", parse_roles({"7": ["writer"], "*": ["reader"]}, "test"))
    assert principal.permissions(7) == {READ, WRITE}
    assert principal.permissions(8) == {READ}
    assert principal.permissions(None) == {READ}
    principal.require(WRITE, 7, "AddEntry")
    with pytest.raises(PermissionDenied) as denied:
        principal.require(WRITE, 8, "AddEntry")
    assert "'write'" in denied.value.message and "scope 8" in denied.value.message
    assert denied.value.reason == "ERROR_REASON_PERMISSION_DENIED_ROLE"
    with pytest.raises(PermissionDenied) as denied:
        principal.require(ADMIN, None, "DeleteLedger")
    assert "every scope" in denied.value.message


@pytest.mark.parametrize(
    "roles", [{"7": ["owner"]}, {"x": ["reader"]}, {"7": "reader"}, ["reader"], {"-1": ["reader"]}]
)
def test_malformed_role_grants_are_refused(roles: object) -> None:
    with pytest.raises(ValueError):
        parse_roles(roles, "test")


def test_tokens_are_verified() -> None:
    verifier = TokenVerifier(SECRET, "HS256")
    assert verifier.verify(token({"roles": {"*": ["admin"]}})).permissions(1) == {READ, WRITE, ADMIN}
    for bad, why in [
        (token({"exp": int(time.time()) - 5}), "expired"),
        (token({}, key=b"another-secret-another-secret-xx"), "invalid"),
        (jwt.encode({"sub": "x"}, SECRET, algorithm="HS256"), "invalid"),  # no exp
        (token({"roles": {"*": ["root"]}}), "invalid"),
        (jwt.encode({"sub": "x", "exp": int(time.time()) + 60}, "", algorithm="none"), "invalid"),
        ("x" * 10000, "too long"),
        ("not-a-jwt", "invalid"),
    ]:
        with pytest.raises(Unauthenticated, match=why):
            verifier.verify(bad)


def test_credentials_are_required_and_certificates_need_a_mapping() -> None:
    settings = AuthSettings(True, TokenVerifier(SECRET, "HS256"), {"client-reader": {"*": frozenset({"reader"})}})
    with pytest.raises(Unauthenticated, match="no credentials"):
        settings.authenticate(None, None)
    with pytest.raises(Unauthenticated, match="not mapped"):
        settings.authenticate(None, "stranger")
    with pytest.raises(Unauthenticated, match="Bearer"):
        settings.authenticate("Basic abc", None)
    assert settings.authenticate(None, "client-reader").via == "certificate"
    assert settings.authenticate(f"Bearer {token({})}", "client-reader").via == "token"
