"""`quire.<area>.v1`, the generated API's import name before `quire_proto`,
kept importable in this checkout's development environment only, for tools
written against it: `make setup` puts this folder on the virtualenv's path. No
distribution ships it, because `quire` is other projects' import name on PyPI
(docs/decisions.md, "Python package layout"). Each `quire.…` module is the
`quire_proto.…` module of the same path, the same object."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from collections.abc import Sequence

_OLD, _NEW = "quire.", "quire_proto."


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        return importlib.util.spec_from_loader(fullname, self) if fullname.startswith(_OLD) else None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return importlib.import_module(_NEW + spec.name[len(_OLD) :])

    def exec_module(self, module: types.ModuleType) -> None:
        pass  # imported already, under its own name


sys.meta_path.insert(0, _Alias())
