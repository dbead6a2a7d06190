"""Render docs/api.md, the API reference, from the comments in protos/.

Usage: python scripts/gen_api_docs.py [OUTPUT_FILE]

protoc (from grpc_tools) compiles protos/quire into a FileDescriptorSet with
source info; its comments become the reference. The codes and reasons each
gateway call returns come from CALL_ERRORS below, the one table of them, and
every pair must be a row of docs/errors.md's table; the retryable reasons
listed there must be quire_api.errors.RETRY_DELAYS. `make gen-check`
renders into a temporary file and compares, so the reference cannot drift
from the protos or the error catalogue.
"""

from __future__ import annotations

import pathlib
import re
import sys
import tempfile

import grpc_tools
from google.protobuf import descriptor_pb2
from grpc_tools import protoc

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "protos"
ERRORS_DOC = ROOT / "docs" / "errors.md"
DEFAULT_OUTPUT = ROOT / "docs" / "api.md"
sys.path.insert(0, str(ROOT / "api" / "python"))

from quire_api.errors import RETRY_DELAYS  # noqa: E402

# What any gateway call can return, whatever it does.
EVERY_CALL = [
    ("UNAUTHENTICATED", "UNAUTHENTICATED"),
    ("UNAUTHENTICATED", "CLIENT_IDENTITY_REQUIRED"),
    ("PERMISSION_DENIED", "PERMISSION_DENIED_ROLE"),
    ("INVALID_ARGUMENT", "INVALID_ARGUMENT"),
    ("UNAVAILABLE", "SERVICE_UNAVAILABLE"),
    ("UNAVAILABLE", "METADATA_STORE_UNAVAILABLE"),
    ("DEADLINE_EXCEEDED", "INVALID_ARGUMENT"),  # no request message within QUIRE_GATEWAY_REQUEST_IDLE_SECONDS
    ("RESOURCE_EXHAUSTED", "OVERLOADED"),  # QUIRE_GATEWAY_MAX_CALLS_PER_CALLER
]
_LEDGER = [("INVALID_ARGUMENT", "INVALID_LEDGER_ID"), ("NOT_FOUND", "LEDGER_NOT_FOUND")]
_WRITE = [
    *_LEDGER,
    ("FAILED_PRECONDITION", "LEDGER_CLOSED"),
    ("FAILED_PRECONDITION", "LEDGER_FENCED"),
    ("FAILED_PRECONDITION", "LEDGER_NOT_WRITABLE_HERE"),
    ("FAILED_PRECONDITION", "LEDGER_OWNER_GONE"),
    ("FAILED_PRECONDITION", "UNEXPECTED_ENTRY_ID"),
    ("RESOURCE_EXHAUSTED", "ENTRY_TOO_LARGE"),
    ("RESOURCE_EXHAUSTED", "OVERLOADED"),
    ("RESOURCE_EXHAUSTED", "DISK_FULL"),
    ("UNAVAILABLE", "NOT_ENOUGH_BOOKIES"),
    ("UNAVAILABLE", "BOOKIE_UNAVAILABLE"),
    ("PERMISSION_DENIED", "SERVICE_IDENTITY_REQUIRED"),
]
_READ = [
    *_LEDGER,
    ("DATA_LOSS", "DIGEST_MISMATCH"),
    ("DATA_LOSS", "STORAGE_ERROR"),
    ("UNAVAILABLE", "BOOKIE_UNAVAILABLE"),
]
_CONFIRMED_READ = [*_READ, ("OUT_OF_RANGE", "READ_BEYOND_LAC")]
# The codes and reasons each gateway call returns besides EVERY_CALL's, by full method name.
CALL_ERRORS: dict[str, list[tuple[str, str]]] = {
    "quire.gateway.v1.LedgerService.CreateLedger": [
        ("INVALID_ARGUMENT", "INVALID_QUORUM"),
        ("INVALID_ARGUMENT", "INVALID_LEDGER_ID"),
        ("ALREADY_EXISTS", "LEDGER_EXISTS"),
        ("ALREADY_EXISTS", "REQUEST_ID_REUSED"),
        ("NOT_FOUND", "LEDGER_NOT_FOUND"),
        ("UNAVAILABLE", "NOT_ENOUGH_BOOKIES"),
        ("RESOURCE_EXHAUSTED", "DISK_FULL"),
    ],
    "quire.gateway.v1.LedgerService.OpenLedger": [
        *_LEDGER,
        ("PERMISSION_DENIED", "WRONG_PASSWORD"),
        ("ABORTED", "METADATA_VERSION_CONFLICT"),
        ("UNAVAILABLE", "BOOKIE_UNAVAILABLE"),
    ],
    "quire.gateway.v1.LedgerService.AppendEntries": _WRITE,
    "quire.gateway.v1.LedgerService.AddEntry": _WRITE,
    "quire.gateway.v1.LedgerService.ReadEntries": _CONFIRMED_READ,
    # ReadEntries' rules with first = last; on the stream most come as a request's ReadEntryError.
    "quire.gateway.v1.LedgerService.ReadEntry": _CONFIRMED_READ,
    "quire.gateway.v1.LedgerService.ReadEntryStream": _CONFIRMED_READ,
    "quire.gateway.v1.LedgerService.ReadUnconfirmedEntries": [*_READ, ("NOT_FOUND", "ENTRY_NOT_FOUND")],
    "quire.gateway.v1.LedgerService.TailEntries": _READ,
    "quire.gateway.v1.LedgerService.ReadLastAddConfirmed": [*_LEDGER, ("UNAVAILABLE", "BOOKIE_UNAVAILABLE")],
    "quire.gateway.v1.LedgerService.CloseLedger": [
        *_LEDGER,
        ("FAILED_PRECONDITION", "LEDGER_FENCED"),
        ("FAILED_PRECONDITION", "LEDGER_NOT_WRITABLE_HERE"),
        ("FAILED_PRECONDITION", "LEDGER_OWNER_GONE"),
        ("ABORTED", "METADATA_VERSION_CONFLICT"),
        ("UNAVAILABLE", "BOOKIE_UNAVAILABLE"),
        ("PERMISSION_DENIED", "SERVICE_IDENTITY_REQUIRED"),
    ],
    "quire.gateway.v1.LedgerService.DeleteLedger": _LEDGER,
    "quire.gateway.v1.LedgerService.GetLedgerMetadata": _LEDGER,
    "quire.gateway.v1.LedgerService.ListLedgers": [],
    "quire.gateway.v1.BlobService.PutBlob": [
        ("RESOURCE_EXHAUSTED", "DISK_FULL"),
        ("RESOURCE_EXHAUSTED", "OVERLOADED"),
        ("UNAVAILABLE", "NOT_ENOUGH_BOOKIES"),
        ("UNAVAILABLE", "BOOKIE_UNAVAILABLE"),
    ],
    # AdminService: every call needs admin on "*" (EVERY_CALL's PERMISSION_DENIED) and asks the
    # registry (METADATA_STORE_UNAVAILABLE when etcd is down, SERVICE_UNAVAILABLE when it is).
    "quire.admin.v1.AdminService.ListBookies": [],
    "quire.admin.v1.AdminService.GetBookieServiceInfo": [
        ("INVALID_ARGUMENT", "INVALID_BOOKIE_ID"),
        ("NOT_FOUND", "BOOKIE_NOT_FOUND"),
    ],
    "quire.admin.v1.AdminService.GetBookieDisks": [],
    "quire.admin.v1.AdminService.GetPlacementWeights": [],
    "quire.admin.v1.AdminService.GetAuditor": [],
    "quire.admin.v1.AdminService.GetRecoveryStatus": [("INVALID_ARGUMENT", "INVALID_BOOKIE_ID")],
    "quire.admin.v1.AdminService.DeleteBookieCookie": [
        ("INVALID_ARGUMENT", "INVALID_BOOKIE_ID"),
        ("FAILED_PRECONDITION", "BOOKIE_ALREADY_REGISTERED"),
        ("ABORTED", "METADATA_VERSION_CONFLICT"),
    ],
    "quire.admin.v1.AdminService.GetClusterStatus": [],
    "quire.gateway.v1.BlobService.GetBlob": [
        ("NOT_FOUND", "ENTRY_NOT_FOUND"),
        ("DATA_LOSS", "DIGEST_MISMATCH"),
        ("DATA_LOSS", "STORAGE_ERROR"),
        ("UNAVAILABLE", "BOOKIE_UNAVAILABLE"),
    ],
}
# What clients call at the gateway: the ledger and blob API, and the operators' admin API.
PUBLIC_PACKAGES = ("quire.gateway.v1", "quire.admin.v1")
_LINT_IGNORE = "buf:lint:ignore "
_PREFIX = "ERROR_REASON_"


def descriptor_set() -> descriptor_pb2.FileDescriptorSet:
    protos = sorted(str(p.relative_to(PROTO_ROOT)) for p in (PROTO_ROOT / "quire").rglob("*.proto"))
    well_known = pathlib.Path(grpc_tools.__file__).parent / "_proto"
    with tempfile.TemporaryDirectory() as scratch:
        out = pathlib.Path(scratch) / "quire.binpb"
        args = ["protoc", f"-I{PROTO_ROOT}", f"-I{well_known}", f"--descriptor_set_out={out}", "--include_source_info"]
        if protoc.main([*args, *protos]) != 0:
            raise SystemExit("protoc failed")
        return descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())


def comments(file: descriptor_pb2.FileDescriptorProto) -> dict[tuple[int, ...], str]:
    """Each element's leading comment, by its source-info path."""
    found = {}
    for location in file.source_code_info.location:
        text = location.leading_comments.strip("\n")
        if text:
            lines = [line[1:] if line.startswith(" ") else line for line in text.split("\n")]
            lines = [line for line in lines if not line.startswith(_LINT_IGNORE)]  # buf's, not the reader's
            found[tuple(location.path)] = "\n".join(lines).strip()
    return found


def documented_errors() -> tuple[set[tuple[str, str]], dict[str, float]]:
    """(code, reason) pairs of docs/errors.md's table, and its retry table (reason -> seconds)."""
    pairs: set[tuple[str, str]] = set()
    retries: dict[str, float] = {}
    for line in ERRORS_DOC.read_text().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 2 and (delay := re.fullmatch(r"([0-9.]+) s", cells[1])):
            retries[cells[0].strip("`")] = float(delay.group(1))
        elif len(cells) == 3 and re.fullmatch(r"[A-Z_]+", cells[1]):
            for suffix in re.findall(r"(?:ERROR_REASON|…)_([A-Z_]+[A-Z])", cells[2]):
                pairs.add((cells[1], suffix))
    return pairs, retries


def check_against_errors_doc(reasons: set[str]) -> None:
    pairs, retries = documented_errors()
    wrong = []
    for method, errors in CALL_ERRORS.items():
        for code, reason in [*EVERY_CALL, *errors]:
            if _PREFIX + reason not in reasons:
                wrong.append(f"{method}: {reason} is not in quire.common.v1.ErrorReason")
            elif (code, reason) not in pairs:
                wrong.append(f"{method}: {code} {_PREFIX}{reason} is not a row of docs/errors.md")
    if retries != {str(reason): delay for reason, delay in RETRY_DELAYS.items()}:
        wrong.append(f"docs/errors.md's retry table {retries} differs from RETRY_DELAYS {dict(RETRY_DELAYS)}")
    if wrong:
        raise SystemExit("docs/api.md cannot be rendered:\n  " + "\n  ".join(wrong))


def type_name(field: descriptor_pb2.FieldDescriptorProto) -> str:
    scalar = descriptor_pb2.FieldDescriptorProto.Type.Name(field.type)[len("TYPE_") :].lower()
    name = field.type_name.lstrip(".") if field.type_name else scalar
    return f"repeated {name}" if field.label == field.LABEL_REPEATED else name


def anchor(full_name: str) -> str:
    return full_name.replace(".", "").lower()


def render(files: list[descriptor_pb2.FileDescriptorProto]) -> str:
    reasons = {
        value.name for file in files for enum in file.enum_type if enum.name == "ErrorReason" for value in enum.value
    }
    check_against_errors_doc(reasons)
    out = [
        "# API reference",
        "",
        "<!-- Rendered by scripts/gen_api_docs.py from the comments in protos/; `make gen` rewrites it. -->",
        "",
        "Quire's public API is the gateway's `quire.gateway.v1` package (LedgerService, BlobService) and",
        "its `quire.admin.v1` AdminService for operators (the admin role on `*`); the other packages are",
        "the services' internal APIs, listed for completeness. Read docs/errors.md",
        "first: status details (ErrorInfo, RetryInfo), which reasons are retryable, message sizes and",
        "64-bit ids apply to every call below.",
        "",
        "Every gateway call may also return: "
        + ", ".join(f"{code} `{_PREFIX}{reason}`" for code, reason in EVERY_CALL)
        + ". Retryable reasons: "
        + ", ".join(f"`{reason}` ({delay:g} s)" for reason, delay in RETRY_DELAYS.items())
        + ".",
        "",
    ]
    public = sorted((f for f in files if f.package in PUBLIC_PACKAGES), key=lambda f: PUBLIC_PACKAGES.index(f.package))
    internal = [f for f in files if f.package not in PUBLIC_PACKAGES]
    for file in [*public, *internal]:
        notes = comments(file)
        out += [f"## {file.name}", "", f"Package `{file.package}`.", ""]
        for s_index, service in enumerate(file.service):
            full = f"{file.package}.{service.name}"
            out += [f"### {full}", "", notes.get((6, s_index), ""), ""]
            for m_index, method in enumerate(service.method):
                request = ("stream " if method.client_streaming else "") + method.input_type.lstrip(".")
                response = ("stream " if method.server_streaming else "") + method.output_type.lstrip(".")
                out += [f"#### {method.name}", "", f"`{method.name}({request}) returns ({response})`", ""]
                out += [notes.get((6, s_index, 2, m_index), ""), ""]
                errors = CALL_ERRORS.get(f"{full}.{method.name}")
                if errors is not None:
                    listed = sorted(set(errors))
                    if listed:
                        out += ["| code | reason |", "|---|---|"]
                        out += [f"| {code} | `{_PREFIX}{reason}` |" for code, reason in listed]
                    else:
                        out += ["No errors of its own beyond those of every call."]
                    out += [""]
        for m_index, message in enumerate(file.message_type):
            out += render_message(file.package, message, notes, (4, m_index))
        for e_index, enum in enumerate(file.enum_type):
            out += render_enum(f"{file.package}.{enum.name}", enum, notes, (5, e_index))
    return "\n".join(line.rstrip() for line in out).rstrip("\n").replace("\n\n\n", "\n\n") + "\n"


def render_message(
    scope: str, message: descriptor_pb2.DescriptorProto, notes: dict[tuple[int, ...], str], path: tuple[int, ...]
) -> list[str]:
    full = f"{scope}.{message.name}"
    if message.options.map_entry:
        return []
    out = [f"### {full}", "", notes.get(path, ""), ""]
    if message.field:
        out += ["| field | type | description |", "|---|---|---|"]
        for f_index, field in enumerate(message.field):
            text = notes.get((*path, 2, f_index), "").replace("\n", " ").replace("|", "\\|")
            out.append(f"| `{field.name}` = {field.number} | `{type_name(field)}` | {text} |")
        out.append("")
    for n_index, nested in enumerate(message.nested_type):
        out += render_message(full, nested, notes, (*path, 3, n_index))
    for e_index, enum in enumerate(message.enum_type):
        out += render_enum(f"{full}.{enum.name}", enum, notes, (*path, 4, e_index))
    return out


def render_enum(
    full: str, enum: descriptor_pb2.EnumDescriptorProto, notes: dict[tuple[int, ...], str], path: tuple[int, ...]
) -> list[str]:
    out = [f"### {full}", "", notes.get(path, ""), "", "| value | number | description |", "|---|---|---|"]
    for v_index, value in enumerate(enum.value):
        text = notes.get((*path, 2, v_index), "").replace("\n", " ").replace("|", "\\|")
        out.append(f"| `{value.name}` | {value.number} | {text} |")
    return [*out, ""]


def main(output: pathlib.Path) -> None:
    files = [f for f in descriptor_set().file if f.package.startswith("quire.")]
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(render(files))


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_OUTPUT)
