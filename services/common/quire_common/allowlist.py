"""Which service identity may call which internal RPC: the one table.

A service identity is the `<name>` of a certificate's `quire-service:<name>`
(quire_common.security reads it). Registry, placement and bookies refuse a
/quire.* call whose method is not in this table, or whose caller is not listed
for it, with PERMISSION_DENIED (ERROR_REASON_SERVICE_IDENTITY_REQUIRED), unless
QUIRE_RPC_ALLOWLIST_ENABLED=false. The callers are the processes whose code
calls each RPC:

- gateway: ledger metadata, leadership (writer ownership, the auditor),
  bookie directory, ensembles, every bookie call of the write, read,
  recovery, repair and scrub paths, and what its admin API (quire.admin.v1)
  asks on an operator's behalf: placement weights, bookies' GetBookieInfo,
  and a decommission's GetCookie and DeleteCookie;
- placement: the bookie directory, load weights, bookies' GetBookieInfo;
- bookie: its own registration and cookie, ledger metadata for its collector;
- operator: the command line's break-glass cluster commands (`quire --direct
  bookie ...`, `placement weights`, `recovery status`), the cluster runner,
  the init Job, and the telemetry job's PutLoadWeights.

docs/security.md shows this table; tests/unit/test_allowlist.py checks that
the two agree and that every internal RPC of the protos is listed.
"""

from __future__ import annotations

# The prefix of every service identity's name; a client identity never carries it.
SERVICE_IDENTITY_PREFIX = "quire-service:"
GATEWAY = "gateway"
PLACEMENT = "placement"
BOOKIE = "bookie"
OPERATOR = "operator"
# Every service identity Quire issues; a name outside it is nobody.
SERVICE_IDENTITIES = frozenset({GATEWAY, PLACEMENT, BOOKIE, OPERATOR, "registry"})

_REGISTRY = "/quire.registry.v1.RegistryService/"
_PLACEMENT = "/quire.placement.v1.PlacementService/"
_BOOKIE = "/quire.bookie.v1.BookieService/"

ALLOWED_CALLERS: dict[str, frozenset[str]] = {
    method: frozenset(callers)
    for method, callers in {
        _REGISTRY + "RegisterBookie": {BOOKIE},
        _REGISTRY + "ListBookies": {GATEWAY, PLACEMENT, OPERATOR},
        _REGISTRY + "GetBookieServiceInfo": {GATEWAY, PLACEMENT, OPERATOR},
        _REGISTRY + "WatchBookies": {GATEWAY, PLACEMENT},
        _REGISTRY + "GetCookie": {BOOKIE, GATEWAY, OPERATOR},
        _REGISTRY + "PutCookie": {BOOKIE},
        _REGISTRY + "DeleteCookie": {GATEWAY, OPERATOR},
        _REGISTRY + "CreateLedgerMetadata": {GATEWAY},
        _REGISTRY + "CreateLedgerMetadataBatch": {GATEWAY},
        _REGISTRY + "GetLedgerMetadata": {GATEWAY, BOOKIE},
        _REGISTRY + "UpdateLedgerMetadata": {GATEWAY},
        _REGISTRY + "DeleteLedgerMetadata": {GATEWAY},
        _REGISTRY + "ListLedgerMetadata": {GATEWAY},
        _REGISTRY + "ListLedgerIds": {BOOKIE},
        _REGISTRY + "WatchLedgerMetadata": {GATEWAY},
        _REGISTRY + "PutLoadWeights": {OPERATOR},
        _REGISTRY + "ListLoadWeights": {PLACEMENT},
        _REGISTRY + "Campaign": {GATEWAY},
        _REGISTRY + "Resign": {GATEWAY},
        _REGISTRY + "GetLeader": {GATEWAY, OPERATOR},
        _REGISTRY + "ListLeaders": {GATEWAY, OPERATOR},
        _PLACEMENT + "NewEnsemble": {GATEWAY},
        _PLACEMENT + "NewEnsembles": {GATEWAY},
        _PLACEMENT + "ReplaceBookie": {GATEWAY},
        _PLACEMENT + "GetPlacementWeights": {GATEWAY, OPERATOR},
        _BOOKIE + "AddStream": {GATEWAY},
        # The unary forms of the gateway's adds and reads: no process calls them
        # with TLS on (the gateway streams), so they stay the gateway's alone.
        _BOOKIE + "AddEntries": {GATEWAY},
        _BOOKIE + "ReadEntry": {GATEWAY},
        _BOOKIE + "ReadEntries": {GATEWAY},
        _BOOKIE + "ReadLastAddConfirmed": {GATEWAY},
        _BOOKIE + "WriteLastAddConfirmed": {GATEWAY},
        _BOOKIE + "WriteLastAddConfirmedBatch": {GATEWAY},
        _BOOKIE + "FenceLedger": {GATEWAY},
        _BOOKIE + "DeleteLedger": {GATEWAY},
        _BOOKIE + "FindMissingEntries": {GATEWAY},
        _BOOKIE + "CheckEntries": {GATEWAY},
        _BOOKIE + "GetBookieInfo": {GATEWAY, PLACEMENT, OPERATOR},
    }.items()
}


def allowed_callers(method: str) -> frozenset[str]:
    """The service identities that may call `method` (a full method name,
    `/package.Service/Method`); empty for a method no one may call."""
    return ALLOWED_CALLERS.get(method, frozenset())


def markdown_table() -> str:
    """The table as docs/security.md shows it."""
    lines = ["| RPC | callers |", "|---|---|"]
    for method, callers in ALLOWED_CALLERS.items():
        service, name = method.strip("/").split("/")
        lines.append(f"| `{service.rsplit('.', 1)[-1]}/{name}` | {', '.join(sorted(callers))} |")
    return "\n".join(lines) + "\n"
