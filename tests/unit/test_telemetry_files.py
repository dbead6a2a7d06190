"""The telemetry files: rotation by size with a bounded total."""

from __future__ import annotations

import json

from quire_common.telemetry import RotatingJsonLines


def test_files_rotate_and_the_total_stays_bounded(tmp_path):
    sink = RotatingJsonLines(tmp_path, "bookie-1-spans", max_file_bytes=1000, max_total_bytes=3000)
    for index in range(500):
        sink.write([{"record": "span", "index": index, "pad": "x" * 40}])
    sink.close()
    files = sorted(tmp_path.glob("bookie-1-spans.*.jsonl"))
    assert 2 <= len(files) <= 4
    assert sum(f.stat().st_size for f in files) <= 3000 + 1000
    lines = [json.loads(line) for f in files for line in f.read_text().splitlines()]
    assert lines[-1]["index"] == 499  # the newest survive, the oldest went
    assert [line["index"] for line in lines] == sorted(line["index"] for line in lines)


def test_writes_after_close_are_dropped_not_raised(tmp_path):
    sink = RotatingJsonLines(tmp_path, "x", 1000, 2000)
    sink.close()
    sink.write([{"record": "span"}])
