"""The `quire` command line: one module per command group (ledger, blob,
bookie, recovery, placement, cluster, dev, telemetry, bench, context), the
root and exit codes in app.py, what they share in common.py."""

from quire_client.cli.app import main, quire

__all__ = ["main", "quire"]
