"""The pyspark matrix: the connector on the lowest supported pyspark (4.0.0), a 4.1 and the newest
(4.3.0), each in an environment that holds a managed runtime's packages (tests/support/pyspark_envs).

For each: the wheel installs beside the runtime's packages without changing any of them and
`pip check` stays clean; then the unit tests and the core Spark tests (below) run there, on real
brokers and a real local Spark, in a pytest of that environment. The primary pyspark (the one
`pip install -e ".[dev]"` brings) runs the whole suite in the outer session.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.support.pyspark_envs import RUNTIMES, build_wheel, ensure_runtime, install_beside

pytestmark = [pytest.mark.spark, pytest.mark.matrix]

ROOT = Path(__file__).resolve().parents[2]
# The core Spark tests: source with maxMessagesPerTrigger and a restart from the checkpoint,
# Trigger.AvailableNow, the driver-side read, the exactly-once sink through a driver kill, batch
# read and write, writes from other threads, Spark Connect.
CORE_SPARK_TESTS = (
    "tests/spark/test_source_basics.py::test_batch_read_returns_every_message_with_its_logic_offset",
    "tests/spark/test_source_basics.py::test_stream_reads_every_message_exactly_once_in_order_per_logic_queue",
    "tests/spark/test_source_basics.py::test_staticmq_format_works_in_a_fresh_session_without_registration",
    "tests/spark/test_source_admission.py::test_max_messages_per_trigger_caps_every_micro_batch",
    "tests/spark/test_source_admission.py::test_a_limited_stream_restarted_from_its_checkpoint_reads_every_message_once",
    "tests/spark/test_source_admission.py::test_available_now_ends_after_reading_what_was_there_at_start",
    "tests/spark/test_source_driver_read.py",
    "tests/spark/test_sink.py::test_keyed_rows_land_in_their_hash_queue_and_queue_id_overrides_the_key",
    "tests/spark/test_sink.py::test_exactly_once_when_the_writing_driver_is_killed_and_restarted",
    "tests/spark/test_threads.py",
    "tests/spark/test_spark_connect.py",
)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel(ROOT, tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="module", params=sorted(RUNTIMES))
def runtime(request: pytest.FixtureRequest, wheel: Path) -> tuple[str, Path, dict[str, tuple[str, str | None]]]:
    """(pyspark version, the environment's python, what installing the wheel there changed)."""
    version = request.param
    python = ensure_runtime(version)
    return version, python, install_beside(python, wheel)


def test_the_wheel_installs_beside_a_runtimes_packages_without_changing_them(
    runtime: tuple[str, Path, dict[str, tuple[str, str | None]]],
) -> None:
    version, python, moved = runtime
    assert not moved, f"installing the wheel beside pyspark {version}'s runtime changed {moved}"
    listed = subprocess.run(
        [str(python), "-m", "pip", "list", "--format=freeze"], capture_output=True, text=True, check=True
    ).stdout.lower()
    for pin in (f"pyspark=={version}", *RUNTIMES[version].pins):
        assert pin.lower() in listed, f"{pin} is not what pyspark {version}'s environment holds after the install"
    assert "staticmq==" in listed


@pytest.mark.timeout(2400)
def test_the_unit_and_core_spark_tests_pass_on_this_pyspark(
    runtime: tuple[str, Path, dict[str, tuple[str, str | None]]], tmp_path: Path
) -> None:
    version, python, _ = runtime
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SPARK_", "VIRTUAL_ENV"))}
    env["PATH"] = f"{python.parent}{os.pathsep}{env.get('PATH', '')}"  # `staticmq`, `python3`: this runtime's
    env["PYSPARK_PYTHON"] = str(python)
    command = [
        str(python),
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "--durations=5",
        f"--basetemp={tmp_path / 'pytest'}",
        "-m",
        "not slow",  # the long fault tests run on the primary version only
        "tests/unit",
        *CORE_SPARK_TESTS,
    ]
    log = tmp_path / "pytest.log"
    with log.open("wb") as out:
        done = subprocess.run(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, timeout=2300)
    lines = log.read_text(errors="replace").strip().splitlines()
    summary = lines[-1] if lines else ""
    print(f"pyspark {version}: {summary}")
    errors = [line for line in lines if line.startswith(("E ", "FAILED", "ERROR"))]
    assert done.returncode == 0, f"pyspark {version}: {summary}\n" + "\n".join(errors[-200:] + lines[-60:])
