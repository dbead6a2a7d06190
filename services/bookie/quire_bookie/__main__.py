"""Entry point: python -m quire_bookie (the parts and their start and stop
order: assembly.py)."""

from __future__ import annotations

from quire_bookie.assembly import BookieProcess
from quire_bookie.settings import BookieEnv
from quire_common.service import run_service


async def main(settings: BookieEnv) -> None:
    await BookieProcess(settings).run()


if __name__ == "__main__":
    run_service("bookie", BookieEnv, main)
