"""A name-server address that never answered fails in seconds, naming it (the long read retry is
only for a broker that was up and went away)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark


def closed_port() -> int:
    with socket.socket() as s:  # bound, then closed: nothing listens there
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_cli_with_a_wrong_name_server_fails_fast_naming_it() -> None:
    wrong = f"127.0.0.1:{closed_port()}"
    started = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "staticmq_spark.cli", "pull", "-n", wrong, "-t", "orders"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode != 0
    assert f"no name server at {wrong} has answered" in out.stderr
    assert time.monotonic() - started < 60, "not the two-minute retry of a broker that went away"


def test_spark_read_with_a_wrong_name_server_fails_fast_naming_it(spark: SparkSession) -> None:
    wrong = f"127.0.0.1:{closed_port()}"
    started = time.monotonic()
    with pytest.raises(PySparkException, match=f"no name server at {wrong} has answered"):
        spark.read.format("staticmq").option("namesrv", wrong).option("topic", "orders").load().collect()
    assert time.monotonic() - started < 60, "not the two-minute retry of a broker that went away"
