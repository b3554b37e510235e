"""`staticmq demo`, the README's main job: it runs end to end and its checks pass."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_demo_runs_end_to_end_and_every_check_passes(tmp_path: Path) -> None:
    report_file = tmp_path / "report.json"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "staticmq_spark.cli",
            "demo",
            "--events",
            "6000",
            "--users",
            "150",
            "--rate",
            "3000",
            "--keep",
            str(tmp_path / "demo"),
            "--json",
            str(report_file),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    assert "result: all checks passed" in out.stdout
    report = json.loads(report_file.read_text())
    assert report["ok"] and report["facts"]["messages_in"] == 6000
    names = {c["name"] for c in report["checks"]}
    assert {
        "nothing lost or duplicated",
        "every key in exactly its hash queue",
        "remap of the input topic while streaming",
        "delta bronze holds every message once",
        "delta silver has one row per page view",
        "delta gold totals match what was sent",
    } <= names
    tables = report["facts"]["delta_tables"]
    assert tables["bronze"]["rows"] == tables["silver"]["rows"] == 6000
    # silver is appended once per bronze batch with rows: a run whose rows came in one batch leaves it at version 0
    assert all(t["version"] >= 0 and t["rows"] > 0 for t in tables.values()), tables
    kept = tmp_path / "demo"
    assert (kept / "lake" / "gold" / "_delta_log").is_dir(), "--keep leaves the Delta tables"
    assert (kept / "cluster").is_dir(), "--keep leaves the cluster data"
    assert report["facts"]["remap"], "the demo remaps the input topic while the query runs"
    assert sum(report["facts"]["produced_per_s"]) == 6000, "every page view in the second it was sent"
    assert 0 < sum(report["facts"]["landed_per_s"]) <= 6000
    assert "  produced |" in out.stdout and "  landed   |" in out.stdout
    facts = report["facts"]
    assert 0 < facts["stream_catch_up_s"] <= facts["silver_gold_catch_up_s"] <= facts["pipeline_catch_up_s"], (
        "bronze first, then silver/gold, then the results topic"
    )
    assert "caught up:    bronze " in out.stdout and "the results topic" in out.stdout
    assert "CodeCache is full" not in out.stdout + out.stderr, "the driver's JIT kept compiling to the end"


def test_demo_refuses_bad_sizes_with_a_clear_message() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "staticmq_spark.cli", "demo", "--brokers", "1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode != 0 and "--brokers must be at least 2" in out.stderr


def test_demo_secure_runs_the_pipeline_with_acl_and_tls_and_leaves_nothing(tmp_path: Path) -> None:
    """`--secure`: the whole pipeline (producers, bronze, results sink, checks) signs every call on a
    cluster with an ACL and TLS; without --keep the run's directory (keys included) is removed."""
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    args = ["demo", "--secure", "--events", "500", "--users", "20", "--rate", "2000"]
    out = subprocess.run(
        [sys.executable, "-m", "staticmq_spark.cli", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    assert "ACL and TLS on" in out.stdout
    assert "[PASS] ACL and TLS: every call signed, permissions enforced" in out.stdout, out.stdout[-3000:]
    assert not list(tmp_path.glob("staticmq-demo-*")), "the demo's directory is removed at the end"


def test_demo_runs_on_an_existing_rocketmq_cluster(tmp_path: Path, rocketmq_cluster) -> None:  # type: ignore[no-untyped-def]
    report_file = tmp_path / "report.json"
    args = ["demo", "--namesrv", rocketmq_cluster.address, "--events", "6000", "--users", "150", "--rate", "3000"]
    out = subprocess.run(
        [sys.executable, "-m", "staticmq_spark.cli", *args, "--json", str(report_file)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    assert f"running on the Apache RocketMQ cluster at {rocketmq_cluster.address}" in out.stdout
    report = json.loads(report_file.read_text())
    assert report["ok"] and report["facts"]["messages_in"] == 6000
    assert report["facts"]["remap"], "RocketMQ's mqadmin remapped the input topic while the query ran"
