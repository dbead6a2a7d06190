"""Entry point: python -m quire_gateway"""

from __future__ import annotations

from quire_common.service import run_service
from quire_gateway.assembly import GatewayProcess
from quire_gateway.settings import GatewayEnv


async def main(env: GatewayEnv) -> None:
    gateway = GatewayProcess(env)
    await gateway.start()
    await gateway.serve_until_signalled()


if __name__ == "__main__":
    run_service("gateway", GatewayEnv, main)
