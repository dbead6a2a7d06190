"""`quire blob put/get` with a fake client."""

from __future__ import annotations

import json


def test_put_then_get_into_a_file_and_to_stdout(run, fake, tmp_path):
    source = tmp_path / "in.bin"
    source.write_bytes(bytes(range(256)) * 40)
    put = run("blob", "put", str(source))
    assert put.exit_code == 0 and put.stdout == "blob-0\n"
    target = tmp_path / "out.bin"
    assert run("blob", "get", "blob-0", str(target)).exit_code == 0
    assert target.read_bytes() == source.read_bytes()
    fake.blobs["blob-1"] = b"text blob"
    assert run("blob", "get", "blob-1").stdout == "text blob"


def test_put_from_stdin_as_json_and_with_progress(run, fake):
    put = run("--progress", "blob", "put", "-", "-o", "json", input=b"x" * 5000)
    assert json.loads(put.stdout) == {"blob_id": "blob-0"} and "storing" in put.stderr
    assert fake.blobs["blob-0"] == b"x" * 5000


def test_a_missing_file_is_a_usage_error(run, fake, tmp_path):
    missing = run("blob", "put", str(tmp_path / "nope"))
    assert missing.exit_code == 2 and fake.calls == []
