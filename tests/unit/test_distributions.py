"""Each distribution declares its packages by name (setuptools' `packages`
with `package-dir`); a package on disk that the list leaves out would be
missing from the built wheel while every editable install still imports it.
These tests tie each list to the folders, and check that each package is typed."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROJECTS = [ROOT / "api" / "python", ROOT / "clients" / "python", ROOT / "services"]


def declared(project: Path) -> tuple[set[str], dict[str, str]]:
    setuptools = tomllib.loads((project / "pyproject.toml").read_text())["tool"]["setuptools"]
    return set(setuptools["packages"]), dict(setuptools.get("package-dir", {}))


def on_disk(project: Path, roots: set[str], package_dir: dict[str, str]) -> set[str]:
    """Every package (a folder with __init__.py) under each top-level package's folder."""
    found = set()
    for root in roots:
        folder = project / package_dir.get(root, root.replace(".", "/"))
        for init in folder.rglob("__init__.py"):
            if "__pycache__" in init.parts:
                continue
            relative = init.parent.relative_to(folder).parts
            found.add(".".join((root, *relative)))
    return found


@pytest.mark.parametrize("project", PROJECTS, ids=lambda path: path.relative_to(ROOT).as_posix())
def test_every_package_on_disk_is_declared(project: Path) -> None:
    packages, package_dir = declared(project)
    roots = {name for name in packages if "." not in name}
    assert on_disk(project, roots, package_dir) == packages


@pytest.mark.parametrize("project", PROJECTS, ids=lambda path: path.relative_to(ROOT).as_posix())
def test_every_top_level_package_is_typed(project: Path) -> None:
    packages, package_dir = declared(project)
    untyped = [
        name
        for name in packages
        if "." not in name and not (project / package_dir.get(name, name) / "py.typed").exists()
    ]
    assert untyped == []
