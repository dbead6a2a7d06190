"""The placement service's domain: turn the live view of writable bookies and
the weight map into ensembles, and keep the counters operators look at. No
grpc here."""

from __future__ import annotations

import logging
import random
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from opentelemetry import metrics

from quire_api.errors import InvalidArgument, QuireError
from quire_api.ids import validate_bookie_id
from quire_common.quorum_sizes import validate_quorum
from quire_placement import placement_policies
from quire_placement.placement_policies import BookieNode, Placement, PolicySettings
from quire_placement.tracker import WeightTracker

log = logging.getLogger(__name__)
_meter = metrics.get_meter("quire.placement")
_selections = _meter.create_counter(
    "quire.placement.selections", unit="{bookie}", description="Bookies chosen for ensembles and replacements"
)
_fallbacks = _meter.create_counter(
    "quire.placement.fallbacks", unit="{placement}", description="Placements that relaxed a topology rule"
)

# (bookie id, properties) of every writable bookie, as the registry lists them.
WritableSource = Callable[[], Awaitable[list[tuple[str, Mapping[str, str]]]]]


# Ensembles one NewEnsembles call may ask for (placement.proto says so).
MAX_ENSEMBLES_PER_CALL = 256


@dataclass(frozen=True)
class EnsembleAsk:
    """What one NewEnsemble request asks for."""

    ensemble_size: int
    write_quorum: int
    ack_quorum: int
    exclude: tuple[str, ...]
    custom_metadata: Mapping[str, str]


class Placer:
    def __init__(
        self,
        settings: PolicySettings,
        tracker: WeightTracker,
        writable: WritableSource,
        rng: random.Random | None = None,
    ) -> None:
        self.settings = settings
        self.tracker = tracker
        self._writable = writable
        self.rng = rng or random.Random()
        self.selections: Counter[str] = Counter()

    async def _nodes(self) -> list[BookieNode]:
        return [BookieNode.from_properties(b, props) for b, props in await self._writable()]

    def _record(self, placement: Placement) -> list[str]:
        for bookie_id in placement.bookie_ids:
            self.selections[bookie_id] += 1
            _selections.add(1, {"bookie_id": bookie_id, "policy": placement.policy})
        if placement.fallback:
            _fallbacks.add(1, {"policy": placement.policy})
            log.warning("%s placement fell back: %s", placement.policy, placement.fallback)
        return placement.bookie_ids

    async def new_ensemble(
        self,
        ensemble_size: int,
        write_quorum: int,
        ack_quorum: int,
        exclude: Iterable[str],
        custom_metadata: Mapping[str, str],
    ) -> list[str]:
        ask = EnsembleAsk(ensemble_size, write_quorum, ack_quorum, tuple(exclude), custom_metadata)
        return self._new_ensemble(ask, await self._nodes())

    async def new_ensembles(self, asks: Sequence[EnsembleAsk]) -> list[list[str] | QuireError]:
        """An ensemble for each ask, drawn from one view of the writable
        bookies; an ask that cannot be met gets its error and the others
        their ensembles."""
        if len(asks) > MAX_ENSEMBLES_PER_CALL:
            raise InvalidArgument(f"{len(asks)} ensembles asked in one call; at most {MAX_ENSEMBLES_PER_CALL}")
        nodes = await self._nodes() if asks else []
        results: list[list[str] | QuireError] = []
        for ask in asks:
            try:
                results.append(self._new_ensemble(ask, nodes))
            except QuireError as exc:
                results.append(exc)
        return results

    def _new_ensemble(self, ask: EnsembleAsk, nodes: list[BookieNode]) -> list[str]:
        validate_quorum(ask.ensemble_size, ask.write_quorum, ask.ack_quorum)
        excluded = [validate_bookie_id(b) for b in ask.exclude]
        name = placement_policies.choose_policy(self.settings, ask.custom_metadata)
        placement = placement_policies.new_ensemble(
            nodes,
            placement_policies.request_of(ask.ensemble_size, ask.write_quorum, ask.ack_quorum, excluded),
            self.tracker.draw_weights(),
            self.settings,
            self.rng,
            name,
        )
        return self._record(placement)

    async def replace_bookie(
        self,
        ensemble_size: int,
        write_quorum: int,
        ack_quorum: int,
        ensemble: list[str],
        failed: str,
        exclude: Iterable[str],
        custom_metadata: Mapping[str, str],
    ) -> str:
        validate_quorum(ensemble_size, write_quorum, ack_quorum)
        for bookie_id in [*ensemble, failed, *exclude]:
            validate_bookie_id(bookie_id)
        name = placement_policies.choose_policy(self.settings, custom_metadata)
        placement = placement_policies.replace_bookie(
            await self._nodes(),
            ensemble,
            failed,
            placement_policies.request_of(ensemble_size, write_quorum, ack_quorum, exclude),
            self.tracker.draw_weights(),
            self.settings,
            self.rng,
            name,
        )
        return self._record(placement)[0]
