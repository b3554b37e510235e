"""The wheel a Databricks cluster installs with %pip: it carries both packages, the conf files'
users, and the top-level module through which pyspark finds format("staticmq")."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_wheel_builds_with_the_registration_module_and_both_packages(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(tmp_path), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (wheel,) = tmp_path.glob("staticmq-*-py3-none-any.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "pyspark_staticmq.py" in names
    for module in (
        "staticmq_spark/data_source.py",
        "staticmq_spark/session/configure.py",
        "staticmq_spark/lakehouse.py",
        "broker_stub/broker/app.py",
    ):
        assert module in names, module
    assert not any(name.startswith("tests/") for name in names)
