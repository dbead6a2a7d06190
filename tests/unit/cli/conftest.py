"""Unit tests of the `quire` command line: click's CliRunner with a fake
client in place of a cluster (pure logic only; tests/e2e/test_cli.py runs it
against real processes)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import click.testing
import grpc
import pytest

from quire_api.ids import LedgerId
from quire_client.cli import quire
from quire_client.client import QuireClientError
from quire_proto.admin.v1 import admin_pb2
from quire_proto.common.v1 import common_pb2
from quire_proto.gateway.v1 import ledger_pb2
from quire_proto.registry.v1 import registry_pb2


@dataclass
class FakeClient:
    """Ledgers and blobs in dicts; `fail` makes every call raise it."""

    ledgers: dict[LedgerId, list[bytes]] = field(default_factory=dict)
    closed: set[LedgerId] = field(default_factory=set)
    blobs: dict[str, bytes] = field(default_factory=dict)
    bookies: list[str] = field(default_factory=list)
    lost: list[tuple[str, str]] = field(default_factory=list)  # (ledger, bookie) under-replicated
    fail: Exception | None = None
    calls: list[str] = field(default_factory=list)

    def __enter__(self) -> FakeClient:
        return self

    def __exit__(self, *_: object) -> None:
        pass

    def _check(self, name: str) -> None:
        self.calls.append(name)
        if self.fail is not None:
            raise self.fail

    def _metadata(self, ledger: LedgerId) -> common_pb2.LedgerMetadata:
        entries = self.ledgers[ledger]
        return common_pb2.LedgerMetadata(
            ledger_id=common_pb2.LedgerId(scope_id=ledger.scope_id, ledger_id=ledger.ledger_id),
            ensemble_size=3,
            write_quorum_size=2,
            ack_quorum_size=2,
            state=common_pb2.LEDGER_STATE_CLOSED if ledger in self.closed else common_pb2.LEDGER_STATE_OPEN,
            last_entry_id=len(entries) - 1,
            length=sum(len(e) for e in entries),
        )

    def _find(self, ledger: LedgerId | str) -> LedgerId:
        ledger = LedgerId.parse(ledger) if isinstance(ledger, str) else ledger
        if ledger not in self.ledgers:
            raise QuireClientError(grpc.StatusCode.NOT_FOUND, "ERROR_REASON_LEDGER_NOT_FOUND", f"no ledger {ledger}")
        return ledger

    def create_ledger(self, **kwargs: Any) -> common_pb2.LedgerMetadata:
        self._check("create_ledger")
        ledger = LedgerId.parse(kwargs["ledger_id"]) if kwargs.get("ledger_id") else LedgerId(7, len(self.ledgers) + 1)
        self.ledgers[ledger] = []
        return self._metadata(ledger)

    def append_all(self, ledger: LedgerId | str, payloads: Iterable[bytes], batch_size: int = 100) -> int:
        self._check("append_all")
        entries = self.ledgers[self._find(ledger)]
        entries.extend(payloads)
        return len(entries) - 1

    def read(self, ledger: LedgerId | str, first: int, last: int, unconfirmed: bool = False) -> Iterator[Any]:
        self._check("read")
        entries = self.ledgers[self._find(ledger)]
        end = len(entries) - 1 if last == -1 else last
        for entry_id in range(first, end + 1):
            yield ledger_pb2.Entry(entry_id=entry_id, payload=entries[entry_id])

    def tail(self, ledger: LedgerId | str, first: int = 0) -> Iterator[Any]:
        self._check("tail")
        entries = self.ledgers[self._find(ledger)]
        for entry_id in range(first, len(entries)):
            yield ledger_pb2.Entry(entry_id=entry_id, payload=entries[entry_id])

    def close_ledger(self, ledger: LedgerId | str) -> common_pb2.LedgerMetadata:
        self._check("close_ledger")
        found = self._find(ledger)
        self.closed.add(found)
        return self._metadata(found)

    def delete_ledger(self, ledger: LedgerId | str) -> None:
        self._check("delete_ledger")
        del self.ledgers[self._find(ledger)]

    def list_ledgers(self, scope_id: int | None = None) -> Iterator[common_pb2.LedgerMetadata]:
        self._check("list_ledgers")
        for ledger in sorted(self.ledgers, key=lambda x: (x.scope_id, x.ledger_id)):
            if scope_id is None or ledger.scope_id == scope_id:
                yield self._metadata(ledger)

    def ledger_metadata(self, ledger: LedgerId | str) -> tuple[common_pb2.LedgerMetadata, int]:
        self._check("ledger_metadata")
        return self._metadata(self._find(ledger)), 4

    def last_add_confirmed(self, ledger: LedgerId | str) -> int:
        return len(self.ledgers[self._find(ledger)]) - 1

    def put_blob(self, parts: Iterable[bytes], scope_id: int = 0) -> str:
        self._check("put_blob")
        blob_id = f"blob-{len(self.blobs)}"
        self.blobs[blob_id] = b"".join(parts)
        return blob_id

    def get_blob_parts(self, blob_id: str) -> Iterator[bytes]:
        self._check("get_blob_parts")
        data = self.blobs[blob_id]
        for start in range(0, len(data), 1000):
            yield data[start : start + 1000]

    def list_bookies(self, state: int = registry_pb2.BOOKIE_STATE_ALL) -> list[registry_pb2.BookieRecord]:
        self._check("list_bookies")
        return [registry_pb2.BookieRecord(bookie_id=b) for b in self.bookies]

    def auditor(self) -> registry_pb2.Leader:
        self._check("auditor")
        return registry_pb2.Leader(holder="gateway-1")

    def delete_cookie(self, bookie_id: str) -> bool:
        self._check("delete_cookie")
        return True

    # QuireAdmin's other calls (the methods above from list_bookies on are QuireAdmin's too).

    def recovery_status(self, bookie_id: str = "") -> admin_pb2.GetRecoveryStatusResponse:
        self._check("recovery_status")
        segments = [
            admin_pb2.UnderReplicatedSegment(
                ledger_id=common_pb2.LedgerId(scope_id=found.scope_id, ledger_id=found.ledger_id),
                state=self._metadata(found).state,
                segment=0,
                first_entry_id=0,
                last_entry_id=9,
                bookie_id=bookie,
                why="missing",
            )
            for found, bookie in ((LedgerId.parse(ledger), bookie) for ledger, bookie in self.lost)
            if not bookie_id or bookie == bookie_id
        ]
        return admin_pb2.GetRecoveryStatusResponse(
            auditor=registry_pb2.Leader(holder="gateway-1"), segments=segments, total_segments=len(segments)
        )


@pytest.fixture
def fake() -> FakeClient:
    return FakeClient()


@dataclass
class Run:
    exit_code: int
    stdout: str
    stderr: str
    stdout_bytes: bytes = b""


@pytest.fixture
def run(fake: FakeClient, tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    """run("ledger", "list", input=...) -> Run, through click's test runner and
    the same error handling as `quire` itself, with the fake client."""
    monkeypatch.setenv("QUIRE_CONFIG_DIR", str(tmp_path / "config"))  # never the user's contexts
    for name in (
        "QUIRE_CONTEXT", "QUIRE_GATEWAY", "QUIRE_REGISTRY", "QUIRE_PLACEMENT", "QUIRE_PROGRESS",
        "QUIRE_CLIENT_TLS_CA", "QUIRE_CLIENT_TLS_CERT", "QUIRE_CLIENT_TLS_KEY", "QUIRE_CLIENT_TOKEN",
    ):  # fmt: skip
        monkeypatch.delenv(name, raising=False)

    def invoke(*args: str, input: str | bytes | None = None) -> Run:
        runner = click.testing.CliRunner()
        factories = {"make_client": lambda settings: fake, "make_admin_client": lambda settings: fake}
        result = runner.invoke(quire, list(args), input=input, obj=factories, standalone_mode=False)
        code = result.return_value if result.exception is None else None
        if isinstance(result.exception, click.ClickException):
            code = result.exception.exit_code
            runner_err = result.exception.format_message()
            return Run(code, result.stdout, result.stderr + runner_err, result.stdout_bytes)
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception
        if isinstance(result.exception, SystemExit):
            code = result.exception.code
        return Run(int(code or 0), result.stdout, result.stderr, result.stdout_bytes)

    return invoke
