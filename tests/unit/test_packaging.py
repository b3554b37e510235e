"""What installing staticmq brings: install_requires is what the connector imports on a driver or
executor, the rest are extras ([spark], [delta], [broker]; [dev] holds them all); the layout keeps
`pyspark_staticmq` on a sys.path entry for every install kind; `staticmq doctor` finds what breaks
`format("staticmq")` and says how to fix it."""

from __future__ import annotations

import configparser
import os
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from staticmq_spark.cli import doctor_cmd
from staticmq_spark.cli.doctor_cmd import (
    check_listed,
    check_pyspark,
    check_requirements,
    check_worker_python,
    version_tuple,
)
from staticmq_spark.errors import EXTRAS, MissingExtraError, missing_extra

ROOT = Path(__file__).resolve().parents[2]


def _setup_cfg() -> configparser.ConfigParser:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    return config


def _requirements(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def _name(requirement: str) -> str:
    for mark in "<>=!~[;":
        requirement = requirement.split(mark, maxsplit=1)[0]
    return requirement.strip().lower()


def test_install_requires_is_the_connector_runtime_and_dev_holds_every_extra() -> None:
    config = _setup_cfg()
    assert {_name(r) for r in _requirements(config["options"]["install_requires"])} == {
        "pyarrow",
        "numpy",
        "grpcio",
        "protobuf",
    }
    extras = {name: set(_requirements(text)) for name, text in config["options.extras_require"].items()}
    assert {"spark", "delta", "broker", "dev"} <= set(extras)
    dev = {_name(r): r for r in extras["dev"]}
    for name in ("spark", "delta", "broker"):
        for requirement in extras[name]:
            # dev holds it as it is, or pins a version inside its range (pyspark: the primary one)
            held = dev.get(_name(requirement))
            assert held is not None, (name, requirement)
            pinned = Requirement(held).specifier
            pin = next((spec.version for spec in pinned if spec.operator == "=="), None)
            assert held == requirement or (pin is not None and Requirement(requirement).specifier.contains(pin)), (
                name,
                requirement,
                held,
            )
    # every optional package a missing-extra error names is in the extra it names
    for package, extra in EXTRAS.values():
        assert package.lower() in {_name(r) for r in extras[extra]}, (package, extra)
    # the default editable install is a plain path entry (see setup.cfg), which pyspark's lookup lists
    assert config["options"]["package_dir"].strip() == "=."


_BLOCKER = """
import importlib.abc, sys
BLOCKED = set(sys.argv[1].split(","))
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Block())
"""


def _run_without(blocked: list[str], code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _BLOCKER + code, ",".join(blocked)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_connector_loads_without_any_optional_package() -> None:
    optional = [m for m in EXTRAS if m != "pyspark"]
    done = _run_without(
        optional,
        "import pyspark_staticmq, staticmq_spark.data_source, staticmq_spark.client\n"
        "from staticmq_spark.backends.registry import backend_class\n"
        "for scheme in ('staticmq', 'rocketmq', 'memory'): backend_class(scheme)\n",
    )
    assert done.returncode == 0, done.stderr[-3000:]


def test_the_client_and_the_cli_load_without_pyspark_and_name_the_missing_extra() -> None:
    done = _run_without(
        list(EXTRAS),
        "import staticmq_spark, staticmq_spark.client\n"
        "from staticmq_spark.cli.main import build_parser, main\n"
        "build_parser()\n"
        "sys.exit(main(['cluster', '--data-dir', '/nonexistent/staticmq-cluster']))\n",
    )
    assert done.returncode == 1, done.stderr[-3000:]
    assert "pip install 'staticmq[broker]'" in done.stderr


def test_missing_extra_names_the_extra_and_passes_other_modules_by() -> None:
    error = missing_extra(ModuleNotFoundError("No module named 'delta'", name="delta.tables"), "a MERGE")
    assert isinstance(error, MissingExtraError)
    assert "a MERGE needs delta-spark" in error.message and "staticmq[delta]" in error.message
    assert missing_extra(ModuleNotFoundError("x", name="nosuchthing"), "x") is None


def test_doctor_lists_modules_the_way_pyspark_does(tmp_path: Path) -> None:
    assert not check_listed([str(tmp_path)]).ok
    (tmp_path / "pyspark_staticmq.py").write_text("")
    assert check_listed([str(tmp_path)]).ok


def test_doctor_names_the_fix_for_an_import_hook_install(monkeypatch: pytest.MonkeyPatch) -> None:
    # importable (find_spec answers) but on no listed sys.path entry: an editable import hook
    monkeypatch.setattr(doctor_cmd.pkgutil, "iter_modules", lambda path=None: iter(()))
    found = check_listed()
    assert not found.ok and "import hook" in found.what
    assert "editable_mode=compat" in found.fix and "spark.dataSource.register" in found.fix


def test_doctor_checks_versions() -> None:
    assert version_tuple("4.2.0.dev1") == (4, 2, 0) and version_tuple("26.0.1") == (26, 0, 1)
    versions = {"pyarrow": "14.0.2", "numpy": "2.4.6", "grpcio": "1.85.3", "protobuf": "8.0.0"}
    findings = {f.what.split()[0]: f for f in check_requirements(versions.get)}
    assert not findings["pyarrow"].ok and not findings["protobuf"].ok
    assert findings["numpy"].ok and findings["grpcio"].ok
    assert [f.ok for f in check_requirements({}.get)] == [False] * 4
    for supported in ("4.0.0", "4.0.2", "4.1.1", "4.2.0", "4.2.1", "4.3.0"):
        assert check_pyspark({"pyspark": supported}.get).ok, supported
    for outside in ("3.5.6", "4.4.0"):
        refused = check_pyspark({"pyspark": outside}.get)
        assert not refused.ok and ">=4.0.0,<4.4" in refused.fix, outside
    missing = check_pyspark({}.get)
    assert not missing.ok and "staticmq[spark]" in missing.fix


def test_doctor_checks_the_python_spark_starts_for_workers(tmp_path: Path) -> None:
    assert check_worker_python(sys.executable, explicit=False).ok
    absent = check_worker_python(str(tmp_path / "no-python"), explicit=True)
    assert not absent.ok and f"PYSPARK_PYTHON={sys.executable}" in absent.fix


def test_staticmq_doctor_command(tmp_path: Path) -> None:
    run = [sys.executable, "-m", "staticmq_spark.cli", "doctor"]
    done = subprocess.run(run, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert "pyspark_staticmq is on sys.path" in done.stdout, done.stdout + done.stderr
    assert done.returncode == (1 if "[FAIL]" in done.stdout else 0)
    env = {**os.environ, "PYSPARK_PYTHON": str(tmp_path / "no-python")}
    bad = subprocess.run(run, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert bad.returncode == 1
    assert "[FAIL] no Python for Spark's workers" in bad.stdout and "fix: export PYSPARK_PYTHON=" in bad.stdout


def test_doctor_says_what_the_running_pyspark_lacks() -> None:
    from staticmq_spark.cli.doctor_cmd import check_pyspark_features
    from staticmq_spark.session.features import ADMISSION_CONTROL, STREAM_ARROW_WRITER

    said = " ".join(f.what for f in check_pyspark_features())
    assert ("admission control" in said) is (not ADMISSION_CONTROL)
    assert ("Arrow stream writer" in said) is (not STREAM_ARROW_WRITER)
    assert ("everything the connector uses" in said) is (ADMISSION_CONTROL and STREAM_ARROW_WRITER)
