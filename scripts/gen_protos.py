"""Generate the Python code for protos/ into api/python/generated/ (the quire-api distribution).

Usage: python scripts/gen_protos.py [OUTPUT_DIR]

The output holds the `quire_proto.<area>.v1` packages (messages, type stubs and
gRPC stubs) for the proto packages `quire.<area>.v1`: protoc names Python modules
after the proto files' paths, and `quire` is another distribution's import name on
PyPI, so the modules are moved under `quire_proto` and their imports of each other
rewritten (the proto packages, and so the wire and every other language, are
unchanged). `make gen-check` generates into a temporary directory and compares, so
committed code can never drift from the .proto files.
"""

from __future__ import annotations

import pathlib
import re
import shutil
import sys
import tempfile

import grpc_tools
from grpc_tools import protoc

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "protos"
DEFAULT_OUTPUT = ROOT / "api" / "python" / "generated"
PACKAGE = "quire_proto"  # the Python package holding proto package quire.<area>.v1 as quire_proto.<area>.v1

# What protoc writes that names a module by the proto path: imports of other
# generated modules, and the module name the message classes are built under.
_MODULE_REFERENCES = [
    (re.compile(r"^from quire\.", re.MULTILINE), f"from {PACKAGE}."),
    (
        re.compile(r"BuildTopDescriptorsAndMessages\(DESCRIPTOR, 'quire\."),
        f"BuildTopDescriptorsAndMessages(DESCRIPTOR, '{PACKAGE}.",
    ),
]


def generate(output: pathlib.Path) -> None:
    if output.exists():
        shutil.rmtree(output)
    output.mkdir(parents=True)
    with tempfile.TemporaryDirectory() as scratch:
        _protoc(pathlib.Path(scratch))
        shutil.move(pathlib.Path(scratch) / "quire", output / PACKAGE)
    package = output / PACKAGE
    for module in [*package.rglob("*.py"), *package.rglob("*.pyi")]:
        text = module.read_text()
        for pattern, replacement in _MODULE_REFERENCES:
            text = pattern.sub(replacement, text)
        module.write_text(text)
    # protoc writes modules but no packages; every directory becomes one.
    for directory in [package, *(p for p in package.rglob("*") if p.is_dir())]:
        (directory / "__init__.py").touch()
    # PEP 561: the messages' .pyi stubs are for type checkers of applications too.
    (package / "py.typed").touch()


def _protoc(output: pathlib.Path) -> None:
    # Only Quire's own protos: protos/google/rpc holds copies of googleapis'
    # for clients in other languages; Python has them from googleapis-common-protos.
    protos = sorted(str(p.relative_to(PROTO_ROOT)) for p in (PROTO_ROOT / "quire").rglob("*.proto"))
    well_known = pathlib.Path(grpc_tools.__file__).parent / "_proto"
    args = [
        "protoc",
        f"-I{PROTO_ROOT}",
        f"-I{well_known}",
        f"--python_out={output}",
        f"--pyi_out={output}",
        f"--grpc_python_out={output}",
        *protos,
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")


if __name__ == "__main__":
    generate(pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_OUTPUT)
