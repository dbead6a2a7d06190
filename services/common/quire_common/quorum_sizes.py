"""The one rule every service checks on quorum sizes: E >= W >= A >= 1."""

from __future__ import annotations

from quire_api.errors import InvalidArgument, Reason


def validate_quorum(ensemble: int, write_quorum: int, ack_quorum: int) -> None:
    if ensemble >= write_quorum >= ack_quorum >= 1:
        return
    if ensemble < write_quorum:
        problem = "E < W"
    elif ack_quorum > write_quorum:
        problem = "A > W"
    else:
        problem = "a size below 1"
    raise InvalidArgument(
        f"quorum sizes must satisfy E >= W >= A >= 1 ({problem}): E={ensemble}, W={write_quorum}, A={ack_quorum}",
        Reason.INVALID_QUORUM,
    )
