"""Placement policies as pure functions over a list of candidate bookies.

Today's default policy picks uniformly at random among writable bookies.
Rack- and region-aware policies and disk weights plug in here.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence

from quire_common.errors import Reason, Unavailable


def new_ensemble(writable: Sequence[str], ensemble_size: int, exclude: Iterable[str], rng: random.Random) -> list[str]:
    """E distinct bookies from `writable`, none excluded, in random order."""
    excluded = set(exclude)
    candidates = sorted(set(writable) - excluded)
    if len(candidates) < ensemble_size:
        raise Unavailable(
            f"not enough bookies: the ensemble needs {ensemble_size} writable bookies, "
            f"{len(candidates)} are available" + (f" ({len(excluded)} excluded)" if excluded else ""),
            Reason.NOT_ENOUGH_BOOKIES,
            needed=str(ensemble_size),
            available=str(len(candidates)),
        )
    return rng.sample(candidates, ensemble_size)


def replace_bookie(
    writable: Sequence[str], ensemble: Sequence[str], failed: str, exclude: Iterable[str], rng: random.Random
) -> str:
    """One writable bookie that is not in the ensemble, not the failed one and
    not excluded."""
    excluded = set(exclude) | set(ensemble) | {failed}
    candidates = sorted(set(writable) - excluded)
    if not candidates:
        raise Unavailable(
            f"not enough bookies: replacing {failed} needs 1 writable bookie outside the ensemble, 0 are available",
            Reason.NOT_ENOUGH_BOOKIES,
            needed="1",
            available="0",
        )
    return rng.choice(candidates)
