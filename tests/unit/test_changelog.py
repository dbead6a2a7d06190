"""CHANGELOG.md keeps up with the API: every gRPC service and method added
since the last release (protos/releases/<version>.binpb, the descriptor set buf
checks breaking changes against) is named in the changelog's "Unreleased"
section, so a release's notes cannot leave an API change out."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

from google.protobuf import descriptor_pb2
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
GENERATED = ROOT / "api" / "python" / "generated"
RELEASES = ROOT / "protos" / "releases"


def last_release() -> Path:
    return max(RELEASES.glob("v*.binpb"), key=lambda path: Version(path.stem.removeprefix("v")))


def released_methods(path: Path) -> dict[str, set[str]]:
    """Service full name -> its method names, as released."""
    files = descriptor_pb2.FileDescriptorSet.FromString(path.read_bytes())
    return {
        f"{file.package}.{service.name}": {method.name for method in service.method}
        for file in files.file
        for service in file.service
    }


def current_methods() -> dict[str, set[str]]:
    """Service full name -> its method names, from the generated code."""
    services: dict[str, set[str]] = {}
    for module_path in sorted(GENERATED.rglob("*_pb2.py")):
        module = importlib.import_module(".".join(module_path.relative_to(GENERATED).with_suffix("").parts))
        for service in module.DESCRIPTOR.services_by_name.values():
            services[service.full_name] = {method.name for method in service.methods}
    return services


def unreleased_notes() -> str:
    text = (ROOT / "CHANGELOG.md").read_text()
    found = re.search(r"^## Unreleased\n(.*?)(?=^## )", text, re.MULTILINE | re.DOTALL)
    assert found is not None, 'CHANGELOG.md has no "## Unreleased" section before the releases'
    return found.group(1)


def additions(released: dict[str, set[str]], current: dict[str, set[str]]) -> list[str]:
    """What the notes must name: a new service by its name, a new method of a released service by its."""
    names = []
    for service, methods in sorted(current.items()):
        if service not in released:
            names.append(service.rsplit(".", 1)[1])
        else:
            names += sorted(methods - released[service])
    return names


def test_every_service_and_method_added_since_the_last_release_is_in_the_changelog() -> None:
    notes = unreleased_notes()
    missing = [name for name in additions(released_methods(last_release()), current_methods()) if name not in notes]
    assert missing == [], f"name these in CHANGELOG.md's Unreleased section: {missing}"


def test_additions_are_found() -> None:
    released = {"quire.x.v1.A": {"Get"}}
    current = {"quire.x.v1.A": {"Get", "List"}, "quire.y.v1.B": {"Put"}}
    assert additions(released, current) == ["List", "B"]
