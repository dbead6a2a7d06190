"""The admin commands' (`bookie list`, `bookieinfo`, `placement weights`,
`recovery status`, `bookie decommission`, `cluster status`) calls: QuireAdmin's,
by one of its two routes:

- the gateway's admin API (quire.admin.v1.AdminService), the default: a
  context needs the gateway's address and a credential with the admin role,
  nothing else;
- `--direct`, break-glass: the registry, placement and bookies called
  themselves (their addresses given, and under mTLS a certificate they
  accept), for when the gateways are down.
"""

from __future__ import annotations

from typing import Any

import click

from quire_api.ids import LedgerId
from quire_client.cli.common import GATEWAY, PLACEMENT, REGISTRY, Globals, ServiceCalls
from quire_proto.admin.v1 import admin_pb2
from quire_proto.common.v1 import common_pb2

# The services each QuireAdmin call reaches with --direct (checked set before
# the call, and named when they do not answer); through the admin API, the gateway.
DIRECT_SERVICES: dict[str, tuple[str, ...]] = {
    "list_bookies": (REGISTRY,),
    "bookie_service_info": (REGISTRY,),
    "bookie_disks": (REGISTRY,),  # and each bookie, at the address its registry record names
    "placement_weights": (PLACEMENT,),
    "auditor": (REGISTRY,),
    "recovery_status": (REGISTRY, GATEWAY),  # the ledgers are listed through the gateway
    "delete_cookie": (REGISTRY,),
}


def open_admin(settings: Globals) -> AdminCalls:
    """The admin calls of this command, after its settings were checked."""
    settings.check_settings()
    through_gateway: dict[str, tuple[str, ...]] = {name: (GATEWAY,) for name in DIRECT_SERVICES}
    services = DIRECT_SERVICES if settings.direct else through_gateway
    admin = ServiceCalls(settings.make_admin_client(settings), settings, services)
    return AdminCalls(admin, direct=settings.direct)


class AdminCalls:
    """QuireAdmin's calls (`admin`, a ServiceCalls around it or a test's fake),
    with the repair queue as the commands print it."""

    def __init__(self, admin: Any, *, direct: bool) -> None:
        self.admin = admin
        self.direct = direct

    def __enter__(self) -> AdminCalls:
        self.admin.__enter__()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.admin.__exit__(*exc_info)

    def list_bookies(self, state: int) -> list[Any]:
        return list(self.admin.list_bookies(state))

    def bookie_service_info(self, bookie_id: str) -> Any:
        return self.admin.bookie_service_info(bookie_id)

    def bookie_disks(self) -> list[admin_pb2.BookieDisk]:
        return list(self.admin.bookie_disks())

    def placement_weights(self) -> Any:
        return self.admin.placement_weights()

    def auditor(self) -> Any:
        return self.admin.auditor()

    def under_replicated(self, bookie_id: str = "") -> tuple[list[dict[str, Any]], int]:
        """(rows, how many segments in all: more than the rows when the gateway cut the list)."""
        status = self.admin.recovery_status(bookie_id)
        rows = [
            {
                "ledger": LedgerId(s.ledger_id.scope_id, s.ledger_id.ledger_id).qualified_name,
                "state": common_pb2.LedgerState.Name(s.state).removeprefix("LEDGER_STATE_"),
                "segment": s.segment,
                "first_entry_id": s.first_entry_id,
                "last_entry_id": s.last_entry_id,
                "bookie_id": s.bookie_id,
                "why": s.why,
            }
            for s in status.segments
        ]
        return rows, int(status.total_segments)

    def delete_cookie(self, bookie_id: str) -> bool:
        return bool(self.admin.delete_cookie(bookie_id))

    def cluster_status(self) -> admin_pb2.GetClusterStatusResponse:
        if self.direct:
            raise click.UsageError(
                "`quire cluster status` asks a gateway's admin API and has no --direct form; "
                "without a gateway, `quire context check` says which services answer"
            )
        return self.admin.cluster_status()  # type: ignore[no-any-return]
