"""Each domain settings class has defaults of its own (so that code and tests
can build one without the environment), and each field that a setting feeds
repeats that setting's default. These tests tie each pair: the domain object
built from an environment with nothing set equals the domain's defaults, so a
default changed in one place and not the other fails here, naming the field."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from quire_bookie.bookie import BookieSettings
from quire_bookie.config import storage_settings
from quire_bookie.settings import BookieEnv
from quire_gateway.autorecovery.auditor import AuditorSettings
from quire_gateway.blobs import BlobSettings
from quire_gateway.config import auditor_settings, blob_settings, read_settings, recovery_settings, write_settings
from quire_gateway.read.replicas import ReadSettings
from quire_gateway.recovery import RecoverySettings
from quire_gateway.settings import AuditorEnv, GatewayEnv
from quire_gateway.write.handle import WriteSettings


def differences(built: Any, defaults: Any, path: str = "") -> list[str]:
    """Fields (nested dataclasses followed) where `built` and `defaults` differ."""
    found = []
    for field in dataclasses.fields(built):
        ours, theirs = getattr(built, field.name), getattr(defaults, field.name)
        if dataclasses.is_dataclass(ours) and dataclasses.is_dataclass(theirs):
            found += differences(ours, theirs, f"{path}{field.name}.")
        elif ours != theirs:
            found.append(f"{path}{field.name}: {ours!r} from the settings, {theirs!r} by default")
    return found


@pytest.mark.parametrize(
    ("built", "defaults"),
    [
        pytest.param(lambda: write_settings(GatewayEnv()), WriteSettings, id="WriteSettings"),
        pytest.param(lambda: read_settings(GatewayEnv()), ReadSettings, id="ReadSettings"),
        pytest.param(lambda: recovery_settings(GatewayEnv()), RecoverySettings, id="RecoverySettings"),
        pytest.param(lambda: blob_settings(GatewayEnv()), BlobSettings, id="BlobSettings"),
        pytest.param(lambda: auditor_settings(AuditorEnv()), AuditorSettings, id="AuditorSettings"),
        pytest.param(lambda: storage_settings(BookieEnv()), BookieSettings, id="BookieSettings"),
    ],
)
def test_a_domain_default_is_its_settings_default(built, defaults) -> None:
    assert differences(built(), defaults()) == []


def test_a_default_changed_in_one_place_is_named() -> None:
    changed = dataclasses.replace(WriteSettings(), add_timeout_seconds=7.0)
    assert differences(write_settings(GatewayEnv()), changed) == [
        "add_timeout_seconds: 5.0 from the settings, 7.0 by default"
    ]
