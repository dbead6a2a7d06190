"""`make bench-telemetry-standalone`: the telemetry stage's records/s on a
standalone Spark cluster of two one-core workers on this machine, next to
local[2], on the same synthetic input (quire_telemetry.bench, fixed seed).

Starts the cluster the tests use (tests/telemetry/standalone.py) in a temporary
directory, runs the bench once per master, one after the other, and stops the
cluster by PID however the runs end.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.telemetry.standalone import StandaloneSpark, spark_env  # noqa: E402


def bench(master: str, records: int, scratch: Path) -> dict[str, object]:
    result = scratch / f"bench-{len(list(scratch.glob('bench-*.json')))}.json"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "quire_telemetry.bench",
            "--records",
            str(records),
            "--master",
            master,
            "--json",
            str(result),
        ],
        check=True,
        env=spark_env(),
    )
    return dict(json.loads(result.read_text()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=1_000_000)
    args = parser.parse_args()
    if args.records <= 0:
        parser.error(f"--records: {args.records} is not a positive number")
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        cluster = StandaloneSpark(root / "spark")
        cluster.start()
        try:
            standalone = bench(cluster.url, args.records, root)
        finally:
            cluster.stop()
        # Only one of the two at a time: the machine's cores are the limit being measured.
        local = bench("local[2]", args.records, root)
    print()
    print("| master | records | stage | records/s | Spark start |")
    print("|---|---|---|---|---|")
    for name, run in (("standalone, 2 workers x 1 core", standalone), ("local[2]", local)):
        print(
            f"| {name} | {run['records']:,} | {run['stage_seconds']} s | {run['records_per_second']:,} "
            f"| {run['spark_startup_seconds']} s |"
        )


if __name__ == "__main__":
    main()
