"""Which permission each public RPC needs, on which scope. Pure: no grpc.

The scope is the request's tenant boundary: a ledger id's scope_id, a blob
id's scope, PutBlob's or CreateLedger's scope. A request with no scope (a
fresh unscoped ledger id, ListLedgers over all scopes) needs the role on "*".
"""

from __future__ import annotations

from typing import Any

from quire_api.ids import ledger_id_from_proto
from quire_common.auth import ADMIN, READ, WRITE
from quire_gateway.blobs import decode_blob_id

_LEDGER_READS = {
    "ReadEntries",
    "ReadEntry",
    "ReadEntryStream",
    "ReadUnconfirmedEntries",
    "TailEntries",
    "ReadLastAddConfirmed",
    "GetLedgerMetadata",
}
_LEDGER_WRITES = {"AppendEntries", "AddEntry", "CloseLedger"}
# Request streams whose every message names its own ledger, possibly of another
# scope than the first: each message is authorized, not only the first.
EVERY_MESSAGE_AUTHORIZED = frozenset({"ReadEntryStream"})


# quire.admin.v1.AdminService: the operator's calls, on the whole cluster.
ADMIN_SERVICE_METHODS = frozenset(
    {
        "ListBookies",
        "GetBookieServiceInfo",
        "GetBookieDisks",
        "GetPlacementWeights",
        "GetAuditor",
        "GetRecoveryStatus",
        "DeleteBookieCookie",
        "GetClusterStatus",
    }
)


def required_permission(method: str, request: Any) -> tuple[str, int | None]:
    """(permission, scope or None for "every scope") for `request` to the
    RPC named `method` (e.g. "ReadEntries"). Unknown methods need admin on
    "*": a new RPC is closed until it is listed here. Malformed ids raise
    InvalidArgument, as the servicer would."""
    if method in ADMIN_SERVICE_METHODS:
        return ADMIN, None
    if method in _LEDGER_READS:
        return READ, ledger_id_from_proto(request.ledger_id).scope_id
    if method in _LEDGER_WRITES:
        return WRITE, ledger_id_from_proto(request.ledger_id).scope_id
    if method == "OpenLedger":
        # Opening for recovery fences the ledger: taking it from its writer.
        return (ADMIN if request.recovery else READ), ledger_id_from_proto(request.ledger_id).scope_id
    if method == "DeleteLedger":
        return ADMIN, ledger_id_from_proto(request.ledger_id).scope_id
    if method == "CreateLedger":
        which = request.WhichOneof("id")
        if which == "ledger_id":
            return WRITE, ledger_id_from_proto(request.ledger_id).scope_id
        if which == "scope_id":
            return WRITE, request.scope_id
        if which == "legacy" and request.legacy:
            return WRITE, 0
        return WRITE, None  # a fresh 128-bit id: its scope is random
    if method == "ListLedgers":
        return READ, None if request.all_scopes else request.scope_id
    if method == "PutBlob":
        return WRITE, request.scope_id
    if method == "GetBlob":
        return READ, decode_blob_id(request.blob_id).ledger_id.scope_id
    return ADMIN, None
