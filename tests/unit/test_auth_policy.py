"""Roles, tokens and the RPC -> permission table (quire_common.auth,
quire_gateway.permissions): pure, no sockets."""

from __future__ import annotations

import time

import jwt
import pytest

from quire_api.errors import InvalidArgument, PermissionDenied, Unauthenticated
from quire_api.ids import LedgerId, ledger_id_to_proto
from quire_common.auth import ADMIN, READ, WRITE, AuthSettings, Principal, TokenVerifier, parse_roles
from quire_gateway.blobs import BlobRef, encode_blob_id
from quire_gateway.permissions import required_permission
from quire_proto.gateway.v1 import blob_pb2, ledger_pb2

SECRET = b"0123456789abcdef0123456789abcdef"
LEDGER = ledger_id_to_proto(LedgerId(7, 42))


def token(claims: dict[str, object], key: bytes = SECRET) -> str:
    return jwt.encode({"sub": "alice", "exp": int(time.time()) + 60, **claims}, key, algorithm="HS256")


@pytest.mark.parametrize(
    ("method", "request_", "expected"),
    [
        ("ReadEntries", ledger_pb2.ReadEntriesRequest(ledger_id=LEDGER), (READ, 7)),
        ("TailEntries", ledger_pb2.TailEntriesRequest(ledger_id=LEDGER), (READ, 7)),
        ("ReadEntry", ledger_pb2.ReadEntryRequest(ledger_id=LEDGER), (READ, 7)),
        ("ReadEntryStream", ledger_pb2.ReadEntryRequest(ledger_id=LEDGER), (READ, 7)),
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


async def test_every_message_of_a_read_entry_stream_is_authorized_and_only_the_first_of_others() -> None:
    """A ReadEntryStream names a ledger in each message, of any scope: each is
    checked, and the first refused one ends the stream where the handler reads
    it. Other streams (AppendEntries) are checked on their first message only."""
    import grpc

    from quire_common.security import guard_handler
    from quire_gateway.permissions import EVERY_MESSAGE_AUTHORIZED

    assert EVERY_MESSAGE_AUTHORIZED == {"ReadEntryStream"}
    principal = Principal("tenant", parse_roles({"7": ["reader"]}, "test"))
    other_scope = ledger_id_to_proto(LedgerId(8, 1))
    seen: list[int] = []

    async def handler(requests, context):  # type: ignore[no-untyped-def]
        async for request in requests:
            seen.append(request.ledger_id.scope_id)
            yield request

    def authorize(method: str):  # type: ignore[no-untyped-def]
        def check(checked: Principal, request: ledger_pb2.ReadEntryRequest) -> None:
            permission, scope = required_permission(method, request)
            checked.require(permission, scope, method)

        return check

    async def messages():  # type: ignore[no-untyped-def]
        for ledger in (LEDGER, LEDGER, other_scope, LEDGER):
            yield ledger_pb2.ReadEntryRequest(ledger_id=ledger)

    for method in ("ReadEntryStream", "SomeStream"):
        seen.clear()
        guarded = guard_handler(
            grpc.stream_stream_rpc_method_handler(handler),
            lambda context: principal,
            authorize("ReadEntries" if method == "SomeStream" else method),
            check_every_request=method in EVERY_MESSAGE_AUTHORIZED,
        )
        if method == "ReadEntryStream":
            with pytest.raises(PermissionDenied, match="scope 8") as denied:
                async for _ in guarded.stream_stream(messages(), None):
                    pass
            assert denied.value.reason == "ERROR_REASON_PERMISSION_DENIED_ROLE"
            assert seen == [7, 7]
        else:
            async for _ in guarded.stream_stream(messages(), None):
                pass
            assert seen == [7, 7, 8, 7]  # the positive control: checked on the first message only
