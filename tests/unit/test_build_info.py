"""Which revision a service reports: the image's stamp first, then git in a
source checkout; a stamp that is not a commit is ignored."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from quire_common import build_info


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    stamp = tmp_path / "quire-revision"
    monkeypatch.setattr(build_info, "REVISION_FILE", stamp)
    build_info.revision.cache_clear()
    yield stamp
    build_info.revision.cache_clear()


def test_the_image_stamp_is_the_revision(fresh):
    fresh.write_text("0123456789abcdef0123456789abcdef01234567\n")
    assert build_info.revision() == "0123456789abcdef0123456789abcdef01234567"
    assert build_info.status_fields()["revision"] == "0123456789abcdef0123456789abcdef01234567"


def test_without_a_stamp_a_checkout_reports_its_commit(fresh):
    fresh.write_text("not a commit\n")
    source = Path(build_info.__file__).parent
    head = subprocess.run(["git", "-C", str(source), "rev-parse", "HEAD"], capture_output=True, text=True, check=False)
    if head.returncode != 0:
        pytest.skip("not a git checkout")
    assert build_info.revision() == head.stdout.strip()
    assert build_info.status_fields()["version"] == build_info.version()
