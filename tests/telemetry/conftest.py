"""One local Spark for the whole session: local[2], loopback, UI off."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("pyspark", reason="the telemetry extra (pyspark) is not installed")


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    from quire_telemetry.stage import spark_session

    session = spark_session("local[2]", "quire-telemetry-tests")
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()
