"""The LAC as the bookies of a ledger's last ensemble know it: every bookie
is asked, and the answers count once they cover the ensemble (quorum_rules
.covered), so a few slow or lost bookies do not hold a reader up. Readers,
tails and the auditor ask it; recovery fences with the same coverage rule.
Changes nothing on the bookies."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from quire_api.errors import PermissionDenied, QuireError, Reason, Unavailable
from quire_api.ids import LedgerId
from quire_common.fanout import ask_all
from quire_gateway.cluster_calls import ClusterCalls
from quire_gateway.quorum_rules import covered
from quire_proto.common.v1 import common_pb2


async def until_covered(
    metadata: common_pb2.LedgerMetadata,
    ask: Callable[[str], Awaitable[tuple[int, int]]],
    what: str,
) -> list[tuple[int, int]]:
    """Ask every bookie of the last ensemble, and return the answers as soon
    as they cover the ensemble (quorums.covered). UNAVAILABLE when every
    bookie has answered or failed without coverage. The calls still
    outstanding keep running to their deadlines (fences: the more bookies
    fenced the better; never cancelled, see let_finish)."""
    ensemble = list(metadata.ensembles[-1].bookie_ids)
    answered: dict[int, tuple[int, int]] = {}
    failures: list[str] = []

    def take(position: int, answer: tuple[int, int] | None, error: QuireError | None) -> None:
        if isinstance(error, PermissionDenied):
            raise error
        if error is not None:
            failures.append(f"{ensemble[position]}: {error}")
        elif answer is not None:
            answered[position] = answer

    if await ask_all(
        {position: ask(bookie) for position, bookie in enumerate(ensemble)},
        take,
        lambda: covered(len(ensemble), metadata.write_quorum_size, metadata.ack_quorum_size, answered),
        cancel_rest=False,  # the more bookies fenced the better
    ):
        return list(answered.values())
    raise Unavailable(
        f"{what}: only {len(answered)} of the {len(ensemble)} bookies of the last ensemble answered, "
        f"too few to cover it (E={metadata.ensemble_size} W={metadata.write_quorum_size} "
        f"A={metadata.ack_quorum_size}): {'; '.join(failures)}",
        Reason.BOOKIE_UNAVAILABLE,
    )


async def read_last_add_confirmed(
    remote: ClusterCalls, ledger_id: LedgerId, metadata: common_pb2.LedgerMetadata, bookie_timeout_seconds: float
) -> int:
    """The LAC as the bookies of the last ensemble know it, once their answers
    cover the ensemble. Changes nothing (no fencing)."""

    async def ask(bookie: str) -> tuple[int, int]:
        lac, last_entry_id, _ = await remote.read_last_add_confirmed(bookie, ledger_id, bookie_timeout_seconds)
        return lac, last_entry_id

    answers = await until_covered(metadata, ask, f"reading the LAC of ledger {ledger_id}")
    return max(lac for lac, _ in answers)
