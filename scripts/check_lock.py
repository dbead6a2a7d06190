"""Check that requirements/lock.txt still satisfies every distribution's ranges.

Usage: python scripts/check_lock.py

Each requirement of the three pyproject.toml files (extras included) and each
development tool of requirements/dev.in must be pinned in the lock at a version
inside its range, and the lock must not pin Quire's own distributions (it is
used as pip constraints next to them). It reads files only: `make lock`
regenerates the lock from PyPI when this fails.
"""

from __future__ import annotations

import pathlib
import sys
import tomllib

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = pathlib.Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements" / "lock.txt"
DEV_REQUIREMENTS = ROOT / "requirements" / "dev.in"
PROJECTS = [ROOT / "api" / "python", ROOT / "clients" / "python", ROOT / "services"]


def requirement_lines(path: pathlib.Path) -> list[str]:
    """The requirement lines of a pip requirements file, comments and options left out."""
    lines = []
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            lines.append(line)
    return lines


def read_lock(path: pathlib.Path) -> dict[str, Version]:
    pins: dict[str, Version] = {}
    for line in requirement_lines(path):
        requirement = Requirement(line)
        pinned = [spec for spec in requirement.specifier if spec.operator == "=="]
        if len(pinned) != 1:
            raise SystemExit(f"{path.relative_to(ROOT)}: {line!r} is not an exact pin (name==version)")
        pins[canonicalize_name(requirement.name)] = Version(pinned[0].version)
    return pins


def project_requirements(project: pathlib.Path) -> tuple[str, list[Requirement]]:
    metadata = tomllib.loads((project / "pyproject.toml").read_text())["project"]
    lines = list(metadata.get("dependencies", []))
    for extra in metadata.get("optional-dependencies", {}).values():
        lines.extend(extra)
    return metadata["name"], [Requirement(line) for line in lines]


def problems(lock: pathlib.Path = LOCK) -> list[str]:
    pins = read_lock(lock)
    named = {str(project.relative_to(ROOT)): project_requirements(project) for project in PROJECTS}
    own = {canonicalize_name(name) for name, _ in named.values()}
    found = [f"{lock.name} pins {name}, one of Quire's own distributions" for name in sorted(own & set(pins))]
    checks: list[tuple[str, Requirement]] = [
        (f"{project}/pyproject.toml ({name})", requirement)
        for project, (name, requirements) in named.items()
        for requirement in requirements
    ]
    checks += [(DEV_REQUIREMENTS.name, Requirement(line)) for line in requirement_lines(DEV_REQUIREMENTS)]
    for where, requirement in checks:
        name = canonicalize_name(requirement.name)
        if name in own:
            continue
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        if name not in pins:
            found.append(f"{where}: {requirement} is not in {lock.name}")
        elif not requirement.specifier.contains(pins[name], prereleases=True):
            found.append(f"{where}: {requirement} is not satisfied by {lock.name}'s {name}=={pins[name]}")
    return found


def main() -> int:
    found = problems()
    if found:
        for problem in found:
            print(f"lock: {problem}", file=sys.stderr)
        print("lock: requirements/lock.txt is out of date: run `make lock` and commit", file=sys.stderr)
        return 1
    print("lock: requirements/lock.txt satisfies every pyproject.toml and requirements/dev.in")
    return 0


if __name__ == "__main__":
    sys.exit(main())
