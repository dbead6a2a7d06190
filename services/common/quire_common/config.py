"""Typed settings from QUIRE_* environment variables, declared once.

A service's settings are a frozen dataclass whose fields are declared with
`setting(...)`: the variable's name, its default, unit and meaning live in
the field's metadata. `load_settings` reads them from the environment once,
at start, and a bad value is a ConfigError naming the variable (the service
exits 2). docs/configuration.md is generated from the same declarations
(scripts/gen_config_docs.py), and the catalog of names that check_own_settings
accepts is derived from them (quire_common.settings).

Durations are seconds, and their names end in _SECONDS. A renamed setting
keeps its old name for one release (`renamed_from`): read when the new one is
unset, converted, and reported by `renamed_in_use` so the service warns.
"""

from __future__ import annotations

import dataclasses
import os
import types
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")

SETTING = "quire_setting"
TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")


class ConfigError(ValueError):
    """A setting is missing or malformed."""


@dataclass(frozen=True)
class Renamed:
    """The name a setting had before, and what its value is multiplied by
    to get the new unit (1/1000 for milliseconds)."""

    name: str
    scale: float = 1.0


@dataclass(frozen=True)
class Setting:
    """One variable: what docs/configuration.md says about it, and its bounds."""

    env: str
    doc: str
    services: str
    section: str
    unit: str = ""  # "seconds", "bytes", "fraction" ...; shown in the docs
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()
    default_doc: str = ""  # for a default that is computed at start (None in the field)
    renamed_from: Renamed | None = None


def setting(
    env: str,
    default: Any,
    doc: str,
    *,
    services: str,
    section: str,
    unit: str = "",
    minimum: float | None = None,
    maximum: float | None = None,
    choices: tuple[str, ...] = (),
    default_doc: str = "",
    renamed_from: Renamed | None = None,
) -> Any:
    """A dataclass field read from the variable `env`."""
    if unit == "seconds" and not env.endswith("_SECONDS"):
        raise AssertionError(f"{env}: a duration's name ends in _SECONDS")
    meta = Setting(env, doc, services, section, unit, minimum, maximum, choices, default_doc, renamed_from)
    return dataclasses.field(default=default, metadata={SETTING: meta})


def _parse(meta: Setting, raw: str, kind: Any, name: str) -> Any:
    """`raw` as a `kind` (int, float, bool, str or tuple[str, ...]), in bounds."""
    if kind is bool:
        lowered = raw.strip().lower()
        if lowered in TRUE_WORDS:
            return True
        if lowered in FALSE_WORDS:
            return False
        raise ConfigError(f"{name}={raw!r} is not a boolean (use true or false)")
    if kind is tuple:
        return tuple(item.strip() for item in raw.split(",") if item.strip())
    if kind is str:
        if meta.choices and raw not in meta.choices:
            raise ConfigError(f"{name}={raw!r} is not one of {', '.join(meta.choices)}")
        return raw
    value: int | float
    try:
        value = kind(raw)
    except ValueError:
        what = "an integer" if kind is int else "a number"
        raise ConfigError(f"{name}={raw!r} is not {what}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise ConfigError(f"{name}={raw!r} is not a finite number")
    return _bounded(meta, value, name)


def _bounded(meta: Setting, value: float, name: str) -> Any:
    if meta.minimum is not None and value < meta.minimum:
        raise ConfigError(f"{name}={value:g} is below the minimum {meta.minimum:g}")
    if meta.maximum is not None and value > meta.maximum:
        raise ConfigError(f"{name}={value:g} is above the maximum {meta.maximum:g}")
    return value


def _base_type(hint: Any) -> Any:
    """int for `int`, `int | None`; tuple for `tuple[str, ...]`."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        (hint,) = [arg for arg in typing.get_args(hint) if arg is not type(None)]
    return typing.get_origin(hint) or hint


def _read(meta: Setting, kind: Any, environ: Mapping[str, str]) -> tuple[bool, Any]:
    """(found, value) of one setting, under its name or its old name."""
    raw = environ.get(meta.env, "")
    if raw.strip():  # empty counts as unset
        return True, _parse(meta, raw if kind is str else raw.strip(), kind, meta.env)
    old = meta.renamed_from
    if old is not None and (old_raw := environ.get(old.name, "").strip()):
        value = _parse(Setting(old.name, "", "", ""), old_raw, float, old.name) * old.scale
        return True, _bounded(meta, int(value) if kind is int else value, f"{old.name} (as {meta.env})")
    return False, None


def load_settings(cls: type[T], environ: Mapping[str, str] | None = None) -> T:
    """An instance of the settings dataclass `cls` from `environ` (the
    process's environment by default); nested settings dataclasses are read
    too. Unset or empty variables keep the declared default."""
    environ = os.environ if environ is None else environ
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for field in dataclasses.fields(cls):  # type: ignore[arg-type]
        kind = _base_type(hints[field.name])
        meta = field.metadata.get(SETTING)
        if meta is not None:
            found, value = _read(meta, kind, environ)
            if found:
                values[field.name] = value
        elif isinstance(kind, type) and dataclasses.is_dataclass(kind):
            values[field.name] = load_settings(kind, environ)
    return cls(**values)


def declared_settings(cls: type) -> Iterator[tuple[Setting, Any]]:
    """Every (declaration, default) of `cls` and its nested settings, in order."""
    hints = typing.get_type_hints(cls)
    for field in dataclasses.fields(cls):
        meta = field.metadata.get(SETTING)
        if meta is not None:
            yield meta, field.default
        elif dataclasses.is_dataclass(kind := _base_type(hints[field.name])):
            yield from declared_settings(kind)  # type: ignore[arg-type]


def renamed_in_use(cls: type, environ: Mapping[str, str] | None = None) -> list[str]:
    """A warning for each old name of a renamed setting that is set."""
    environ = os.environ if environ is None else environ
    return [
        f"{meta.renamed_from.name} is renamed {meta.env}"
        + (f" (in {meta.unit})" if meta.unit else "")
        + "; the old name is read for one more release only (docs/upgrade.md)"
        for meta, _ in declared_settings(cls)
        if meta.renamed_from is not None and environ.get(meta.renamed_from.name, "").strip()
    ]
