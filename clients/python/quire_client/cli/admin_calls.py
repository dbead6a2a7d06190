"""The two ways an admin command (`bookie list`, `bookieinfo`, `placement
weights`, `recovery status`, `bookie decommission`, `cluster status`) reaches
the cluster, behind one interface:

- through the gateway's admin API (quire.admin.v1.AdminService), the
  default: a context needs the gateway's address and a credential with the
  admin role, nothing else;
- `--direct`, break-glass: the registry, placement and bookies called
  themselves (their addresses given, and under mTLS a certificate they
  accept), for when the gateways are down.
"""

from __future__ import annotations

from typing import Any

import click

from quire.admin.v1 import admin_pb2
from quire.common.v1 import common_pb2
from quire_api.errors import QuireError
from quire_api.ids import LedgerId
from quire_client.cli.common import GATEWAY, Globals, ServiceCalls, ledger_name, state_name
from quire_client.errors import QuireClientError

# AdminClient's methods all call the gateway, which must be set.
_ADMIN_API_METHODS = (
    "list_bookies",
    "bookie_service_info",
    "bookie_disks",
    "placement_weights",
    "auditor",
    "recovery_status",
    "delete_cookie",
    "cluster_status",
)


def open_admin(settings: Globals) -> ThroughGateway | Direct:
    """The admin calls of this command, after its settings were checked."""
    if settings.direct:
        return Direct(settings.client())
    settings.check_settings()
    services: dict[str, tuple[str, ...]] = {name: (GATEWAY,) for name in _ADMIN_API_METHODS}
    return ThroughGateway(ServiceCalls(settings.make_admin_client(settings), settings, services))


def _row(ledger: str, state: str, segment: int, first: int, last: int, bookie_id: str, why: str) -> dict[str, Any]:
    return {
        "ledger": ledger,
        "state": state,
        "segment": segment,
        "first_entry_id": first,
        "last_entry_id": last,
        "bookie_id": bookie_id,
        "why": why,
    }


class ThroughGateway:
    def __init__(self, client: Any) -> None:
        self.client = client

    def __enter__(self) -> ThroughGateway:
        self.client.__enter__()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.client.__exit__(*exc_info)

    def list_bookies(self, state: int) -> list[Any]:
        return list(self.client.list_bookies(state))

    def bookie_service_info(self, bookie_id: str) -> Any:
        return self.client.bookie_service_info(bookie_id)

    def bookie_disks(self) -> list[admin_pb2.BookieDisk]:
        return list(self.client.bookie_disks())

    def placement_weights(self) -> Any:
        return self.client.placement_weights()

    def auditor(self) -> Any:
        return self.client.auditor()

    def under_replicated(self, bookie_id: str = "") -> tuple[list[dict[str, Any]], int]:
        """(rows, how many segments in all: more than the rows when the gateway cut the list)."""
        status = self.client.recovery_status(bookie_id)
        rows = [
            _row(
                LedgerId(s.ledger_id.scope_id, s.ledger_id.ledger_id).qualified_name,
                common_pb2.LedgerState.Name(s.state).removeprefix("LEDGER_STATE_"),
                s.segment,
                s.first_entry_id,
                s.last_entry_id,
                s.bookie_id,
                s.why,
            )
            for s in status.segments
        ]
        return rows, int(status.total_segments)

    def delete_cookie(self, bookie_id: str) -> bool:
        return bool(self.client.delete_cookie(bookie_id))

    def cluster_status(self) -> admin_pb2.GetClusterStatusResponse:
        return self.client.cluster_status()  # type: ignore[no-any-return]


class Direct:
    """Break-glass: QuireClient's calls to the registry, placement and bookies."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def __enter__(self) -> Direct:
        self.client.__enter__()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.client.__exit__(*exc_info)

    def list_bookies(self, state: int) -> list[Any]:
        return list(self.client.list_bookies(state))

    def bookie_service_info(self, bookie_id: str) -> Any:
        return self.client.bookie_service_info(bookie_id)

    def bookie_disks(self) -> list[admin_pb2.BookieDisk]:
        disks = []
        for record in self.client.list_bookies():
            try:
                info = self.client.bookie_info(record)
            except (QuireClientError, QuireError) as exc:
                disks.append(admin_pb2.BookieDisk(bookie_id=record.bookie_id, error=str(exc)))
                continue
            disks.append(
                admin_pb2.BookieDisk(
                    bookie_id=record.bookie_id,
                    free_disk_bytes=info.free_disk_bytes,
                    total_disk_bytes=info.total_disk_bytes,
                )
            )
        return disks

    def placement_weights(self) -> Any:
        return self.client.placement_weights()

    def auditor(self) -> Any:
        return self.client.auditor()

    def under_replicated(self, bookie_id: str = "") -> tuple[list[dict[str, Any]], int]:
        rows = [
            _row(
                ledger_name(metadata),
                state_name(metadata),
                replica.segment,
                replica.first_entry_id,
                replica.last_entry_id,
                replica.bookie_id,
                why,
            )
            for metadata, replica, why in self.client.under_replicated()
            if not bookie_id or replica.bookie_id == bookie_id
        ]
        return rows, len(rows)

    def delete_cookie(self, bookie_id: str) -> bool:
        return bool(self.client.delete_cookie(bookie_id))

    def cluster_status(self) -> admin_pb2.GetClusterStatusResponse:
        raise click.UsageError(
            "`quire cluster status` asks a gateway's admin API and has no --direct form; "
            "without a gateway, `quire context check` says which services answer"
        )
