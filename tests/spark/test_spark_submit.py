"""examples/stream_job.py run with spark-submit against a real local cluster."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from staticmq_spark.client import Producer
from tests.support.spark import new_topic

pytestmark = [pytest.mark.spark, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]


def test_the_example_job_runs_under_spark_submit(spark, cluster, tmp_path: Path) -> None:
    source, sink = new_topic(cluster.namesrv, 4), new_topic(cluster.namesrv, 4)
    events = [{"user": f"u{i % 30}", "page": "/", "ms": i, "dwell": i % 5} for i in range(500)]
    with Producer(cluster.namesrv) as producer:
        producer.send_batch(source, [json.dumps(e) for e in events], keys=[e["user"] for e in events])
    spark_submit = shutil.which("spark-submit")
    assert spark_submit, "spark-submit comes with the pyspark package"
    out = subprocess.run(
        [
            spark_submit,
            "--master",
            "local[2]",
            "--properties-file",
            str(ROOT / "conf" / "spark-defaults.conf"),
            str(ROOT / "examples" / "stream_job.py"),
            "--namesrv",
            cluster.namesrv,
            "--input-topic",
            source,
            "--output-topic",
            sink,
            "--checkpoint",
            str(tmp_path / "ck"),
            "--available-now",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,  # as docs/deployment.md runs it: conf/spark-defaults.conf names conf/log4j2.properties
    )
    assert out.returncode == 0, out.stderr[-4000:]
    assert "default log4j profile" not in out.stderr, "the shipped conf/log4j2.properties is used"
    info = [line for line in out.stderr.splitlines() if " INFO " in line]
    assert not info, f"{len(info)} INFO lines, e.g. {info[:3]}"
    rows = spark.read.format("staticmq").option("namesrv", cluster.namesrv).option("topic", sink).load().collect()
    assert len(rows) == sum(1 for e in events if e["dwell"] > 0)
    assert {r["key"] for r in rows} == {e["user"] for e in events if e["dwell"] > 0}
