"""Which release a process runs: its version and, when known, the source
revision it was built from. Every service shows both in `/status` and as the
gauge `quire_build_info{version, revision}` (value 1), so that during a
rolling upgrade (docs/upgrade.md) anyone can ask a pod what it runs.

The version is the installed `quire` distribution's. The revision is the git
commit: the image stamps it into `<venv>/quire-revision` when it is built
(scripts/build-image.sh), and a service run from a source checkout (`make
setup` installs it editable) asks git. Otherwise it is unknown (empty).
"""

from __future__ import annotations

import functools
import importlib.metadata
import re
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

from opentelemetry.metrics import CallbackOptions, Observation

from quire_common.telemetry import meter

DISTRIBUTION = "quire-ledger"
REVISION_FILE = Path(sys.prefix) / "quire-revision"
_COMMIT = re.compile(r"[0-9a-f]{40}")


@functools.cache
def version() -> str:
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


@functools.cache
def revision() -> str:
    """The commit this code was built from, or "" when nobody recorded it."""
    try:
        stamped = REVISION_FILE.read_text().strip()
    except OSError:
        stamped = ""
    if _COMMIT.fullmatch(stamped):
        return stamped
    source = Path(__file__).resolve().parent
    if "site-packages" in source.parts:
        return ""  # an installed copy: a checkout around the virtualenv is not where it came from
    try:
        result = subprocess.run(
            ["git", "-C", str(source), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    commit = result.stdout.strip()
    return commit if result.returncode == 0 and _COMMIT.fullmatch(commit) else ""


def status_fields() -> dict[str, str]:
    """What every service's `/status` carries about its build."""
    known_revision = revision()
    return {"version": version(), **({"revision": known_revision} if known_revision else {})}


def _observe_build(_: CallbackOptions) -> Iterable[Observation]:
    return [Observation(1, {"version": version(), "revision": revision()})]


def register_build_info_gauge() -> None:
    """`quire.build_info` (Prometheus `quire_build_info`): 1, labelled with the build.
    Called once per process, after telemetry is set up."""
    meter("quire.build").create_observable_gauge(
        "quire.build_info",
        callbacks=[_observe_build],
        unit="1",
        description="Always 1; its version and revision attributes name the release this process runs",
    )
