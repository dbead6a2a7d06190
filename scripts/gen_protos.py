"""Generate the Python code for protos/ into api/python/generated/ (the quire-api distribution).

Usage: python scripts/gen_protos.py [OUTPUT_DIR]

The output holds the `quire.<area>.v1` packages (messages, type stubs and gRPC
stubs). `make gen-check` generates into a temporary directory and compares, so
committed code can never drift from the .proto files.
"""

from __future__ import annotations

import pathlib
import shutil
import sys

import grpc_tools
from grpc_tools import protoc

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "protos"
DEFAULT_OUTPUT = ROOT / "api" / "python" / "generated"


def generate(output: pathlib.Path) -> None:
    if output.exists():
        shutil.rmtree(output)
    output.mkdir(parents=True)
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
    # protoc writes modules but no packages; every directory becomes one.
    for directory in [output / "quire", *(p for p in (output / "quire").rglob("*") if p.is_dir())]:
        (directory / "__init__.py").touch()
    # PEP 561: the messages' .pyi stubs are for type checkers of applications too.
    (output / "quire" / "py.typed").touch()


if __name__ == "__main__":
    generate(pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_OUTPUT)
