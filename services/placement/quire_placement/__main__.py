"""Entry point: python -m quire_placement (its parts: assembly.py)."""

from __future__ import annotations

from quire_common.service import run_service
from quire_placement.assembly import PlacementProcess
from quire_placement.settings import PlacementEnv


async def main(settings: PlacementEnv) -> None:
    placement = PlacementProcess(settings)
    await placement.start()
    await placement.serve_until_signalled()


if __name__ == "__main__":
    run_service("placement", PlacementEnv, main)
