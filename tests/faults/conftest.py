"""Fault suite fixtures: leftover checks, per-scenario records, the checker."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.faults import netns
from tests.faults.lab import CLEANUP_COMMAND, MOUNT_PREFIX, leftover_mounts
from tests.faults.report import Scenario, append_record, write_table


def _stale(mount: str) -> bool:
    """A mount of a run whose process is gone (the pid ends the path)."""
    pid = mount.rsplit("-", 1)[-1]
    return not (pid.isdigit() and os.path.exists(f"/proc/{pid}"))


@pytest.fixture(scope="session", autouse=True)
def no_leftovers() -> Iterator[None]:
    stale = [m for m in leftover_mounts() if _stale(m)]
    if stale:
        pytest.exit(f"leftover fault-lab mounts {stale}; clean up with: {CLEANUP_COMMAND}", returncode=3)
    stale_net = netns.leftovers().stale()
    if stale_net:
        pytest.exit(
            f"leftovers of a dead network-lab run: {stale_net.describe()}; clean up with: {netns.CLEANUP_COMMAND}",
            returncode=3,
        )
    yield
    mine = [m for m in leftover_mounts() if m.endswith(f"-{os.getpid()}")]
    assert not mine, f"the suite left mounts under {MOUNT_PREFIX}: {mine}"
    mine_net = netns.leftovers().of(os.getpid())
    assert not mine_net, f"the suite left network-lab pieces: {mine_net.describe()}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if report.when == "call":
        item.stash[_OUTCOME] = report.passed


_OUTCOME = pytest.StashKey[bool]()


@pytest.fixture
def scenario(request: pytest.FixtureRequest) -> Iterator[Scenario]:
    """The scenario's record; written after the test with its outcome."""
    current = Scenario(request.node.name)
    yield current
    if current.row:
        append_record(current.record(request.node.stash.get(_OUTCOME, False)))


def pytest_sessionfinish(session: pytest.Session) -> None:
    write_table()
