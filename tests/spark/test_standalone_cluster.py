"""Beyond one JVM: a spark-submit job on a Spark standalone cluster (a master and two 1-core
workers from pyspark's own distribution, each executor a JVM of its own with its own Python
workers), on broker_stub and on Apache RocketMQ, and executors killed with kill -9 in the middle of
a source read and of a sink write.

The job (tests/spark/scripts/cluster_job.py) runs two queries of one topic side by side: bronze
(staticmq -> Delta) and results (staticmq -> the staticmq sink). The package reaches the executors
both ways docs/deployment.md names: installed in the Python the workers start (PYSPARK_PYTHON is
this interpreter: tests.support.spark_cluster.spark_env), and, in the RocketMQ job, shipped with
`--py-files` as the wheel copied to a .zip, to executors whose Python cannot import it otherwise."""

from __future__ import annotations

import os
import shutil
import signal
import site
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from staticmq_spark.backends.rocketmq.sinks.direct_sink import ROW_ID
from staticmq_spark.local_clusters.rocketmq import LocalRocketMQ
from staticmq_spark.session.configure import DELTA_CATALOG, DELTA_EXTENSION, delta_jars
from tests.spark.test_sink import assert_hash_sharded, read_topic
from tests.support.spark import by_queue, new_topic, produce
from tests.support.spark_cluster import SPARK_HOME, StandaloneCluster, spark_env
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.spark, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
JOB = Path(__file__).parent / "scripts" / "cluster_job.py"
MESSAGES = 1000  # over 4 logic queues: 250 rows per task, the blocked attempt stops at its 60th
JOB_TIMEOUT_S = 600
QUIET = "-Dlog4j2.configurationFile=conf/log4j2.properties"  # the properties file's driver option
# Short-lived JVMs on 2 cores: one GC thread, and C1 only (C2's compiler threads cost more CPU
# than they save in a job of a minute).
SMALL_JVM = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"


def submit_command(master: str, *job_args: str, wheel: Path | None = None, executor_python: str = "") -> list[str]:
    """spark-submit of the job as docs/deployment.md runs it: the properties file of the checkout,
    Delta's jars and settings (docs/delta.md), small executors; `wheel` ships the package with
    `--py-files`, `executor_python` is the Python the executors start."""
    command = [str(SPARK_HOME / "bin" / "spark-submit"), "--master", master]
    command += ["--properties-file", str(ROOT / "conf" / "spark-defaults.conf")]
    command += ["--jars", ",".join(str(jar) for jar in delta_jars())]
    if wheel is not None:
        command += ["--py-files", str(wheel)]
    conf = {
        "spark.sql.extensions": DELTA_EXTENSION,
        "spark.sql.catalog.spark_catalog": DELTA_CATALOG,
        "spark.databricks.delta.snapshotPartitions": "2",  # Delta's log replay in 2 tasks, not 50
        "spark.executor.memory": "512m",
        # The session is ready once both executors registered (not at once, the standalone default):
        # their JVMs start before the driver starts its Python workers, which must connect back
        # to the driver within 10 s (PythonWorkerFactory.createSimpleWorker's fixed timeout).
        "spark.scheduler.minRegisteredResourcesRatio": "1.0",
        "spark.driver.extraJavaOptions": f"{QUIET} {SMALL_JVM}",
        "spark.executor.extraJavaOptions": SMALL_JVM,
    }
    if executor_python:
        conf |= {"spark.pyspark.python": executor_python, "spark.pyspark.driver.python": sys.executable}
    for key, value in conf.items():
        command += ["--conf", f"{key}={value}"]
    return [*command, str(JOB), *job_args]


@dataclass
class Attempt:
    """One task attempt of the job, from the marker its Python UDF left."""

    phase: str
    stage: int
    partition: int
    attempt: int
    pid: int
    cwd: str  # the executor's directory: <worker work dir>/<app id>/<executor id>
    package: str  # the file staticmq_spark was imported from in that Python worker


@dataclass
class JobRun:
    returncode: int
    stdout: str
    stderr: str
    attempts: list[Attempt]
    killed: list[tuple[Attempt, int]]  # the blocked attempt, and the executor JVM killed under it

    def workers(self, spark_cluster: StandaloneCluster, phase: str) -> set[int]:
        """Indexes of the workers whose executors ran attempts of `phase`."""
        dirs = {i: str(spark_cluster.work_dir(i)) + os.sep for i in range(spark_cluster.workers)}
        return {i for a in self.attempts if a.phase == phase for i, d in dirs.items() if a.cwd.startswith(d)}


def read_attempts(markers: Path) -> list[Attempt]:
    out = []
    for marker in markers.iterdir():
        if marker.name.startswith("blocked-"):
            continue
        phase, stage, partition, attempt, pid = marker.name.split("-")
        cwd, package = marker.read_text().split("\n")
        out.append(Attempt(phase, int(stage[1:]), int(partition[1:]), int(attempt[1:]), int(pid), cwd, package))
    return out


def kill_blocked_executor(spark_cluster: StandaloneCluster, markers: Path, phase: str, job: subprocess.Popen) -> tuple:  # type: ignore[type-arg]
    """Wait for the task attempt that stopped mid-`phase`, then kill -9 the executor JVM it runs in."""
    claim = markers / f"blocked-{phase}"

    def blocked() -> list[str]:
        if job.poll() is not None:
            raise AssertionError(f"the job ended (exit {job.returncode}) before a task blocked in its {phase}")
        fields = claim.read_text().split() if claim.exists() else []
        return fields if len(fields) == 4 else []

    pid, stage, partition, attempt = map(
        int, wait_until(blocked, 300, message=f"a task attempt blocked in its {phase}")
    )
    executor = spark_cluster.executor_of(pid)
    assert executor is not None, f"Python worker {pid} runs under no executor JVM of the cluster"
    cwd = os.readlink(f"/proc/{pid}/cwd")
    os.kill(executor, signal.SIGKILL)
    return Attempt(phase, stage, partition, attempt, pid, cwd, ""), executor


def run_job(
    spark_cluster: StandaloneCluster,
    namesrv: str,
    source: str,
    output: str,
    work: Path,
    kill_in: tuple[str, ...] = (),
    wheel: Path | None = None,
) -> JobRun:
    """The job on the cluster; for each phase of `kill_in` (read, write), in turn, the executor JVM
    under the task attempt stopped in the middle of that phase is killed with kill -9. With `wheel`,
    the executors' Python cannot import the installed package and the job ships the wheel."""
    markers = work / "markers"
    markers.mkdir()
    args = [namesrv, source, output, str(work / "bronze"), str(work / "ck"), str(markers)]
    blocks = (a for phase in kill_in for a in ("--block", phase))
    python = python_without_the_installed_package(work) if wheel is not None else ""
    command = submit_command(spark_cluster.master_url, *args, *blocks, wheel=wheel, executor_python=python)
    killed = []
    with (work / "job.out").open("w") as out, (work / "job.err").open("w") as err:
        job = subprocess.Popen(command, stdout=out, stderr=err, cwd=ROOT, env=spark_env(), start_new_session=True)
        try:
            for phase in kill_in:
                killed.append(kill_blocked_executor(spark_cluster, markers, phase, job))
            job.wait(JOB_TIMEOUT_S)
        finally:
            if job.poll() is None:
                os.killpg(job.pid, signal.SIGKILL)
                job.wait(30)
    run = JobRun(
        job.returncode, (work / "job.out").read_text(), (work / "job.err").read_text(), read_attempts(markers), killed
    )
    assert run.returncode == 0, run.stderr[-4000:]
    assert any(line.startswith("DONE app-") for line in run.stdout.splitlines()), run.stdout
    return run


def python_without_the_installed_package(work: Path) -> str:
    """A Python for executors on a node where staticmq is not installed but its dependencies are:
    this interpreter without `site` (so no .pth file puts the checkout on sys.path), with the
    site-packages directories on PYTHONPATH (pyarrow, numpy, grpcio, protobuf, pyspark)."""
    script = work / "python-without-staticmq"
    paths = ":".join(site.getsitepackages())
    script.write_text(f'#!/bin/sh\nPYTHONPATH="${{PYTHONPATH:+$PYTHONPATH:}}{paths}" exec {sys.executable} -S "$@"\n')
    script.chmod(0o755)
    check = [str(script), "-c", "import staticmq_spark"]
    hidden = subprocess.run(check, capture_output=True, text=True, cwd=work, env=spark_env())
    assert "No module named 'staticmq_spark'" in hidden.stderr, "the package is still importable"
    return str(script)


@pytest.fixture(scope="session")
def shipped_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package as docs/deployment.md ships it with `--py-files`: the wheel, copied to a .zip
    name (pyspark puts only .zip, .egg and .jar files of `--py-files` on the executors' sys.path)."""
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", str(ROOT), "-w", str(out)], check=True, timeout=300
    )
    (built,) = out.glob("staticmq-*.whl")
    return Path(shutil.copyfile(built, out / "staticmq.zip"))


def assert_retried_elsewhere(blocked: Attempt, executor: int, run: JobRun) -> None:
    """The killed attempt's task ran again in another executor JVM (and the job ended well)."""
    retries = [
        a
        for a in run.attempts
        if (a.phase, a.stage, a.partition) == (blocked.phase, blocked.stage, blocked.partition)
        and a.attempt > blocked.attempt
    ]
    assert retries, f"no retry of {blocked} in {run.attempts}"
    assert all(a.cwd != blocked.cwd for a in retries), f"retried in the killed executor {executor}: {retries}"
    with pytest.raises(ProcessLookupError):
        os.kill(executor, 0)  # the JVM is gone


def assert_exactly_once_on_staticmq(spark: SparkSession, namesrv: str, output: str, work: Path, sent: dict) -> None:  # type: ignore[type-arg]
    assert by_queue(spark.read.format("delta").load(str(work / "bronze")).collect()) == sent, (
        "Delta bronze holds every message once, in its queue's order"
    )
    rows = read_topic(spark, namesrv, output)
    want = Counter(b for bodies in sent.values() for b in bodies)
    assert Counter(bytes(r["value"]) for r in rows) == want, "the sink wrote every message exactly once"
    assert_hash_sharded(rows, 4)


@pytest.fixture
def topics(cluster) -> tuple[str, str, dict]:  # type: ignore[no-untyped-def,type-arg]
    source, output = new_topic(cluster.namesrv, 4), new_topic(cluster.namesrv, 4)
    return source, output, produce(cluster.namesrv, source, MESSAGES)


def test_the_spark_submit_job_runs_on_both_workers_and_writes_every_row_exactly_once(
    spark: SparkSession, cluster, spark_standalone: StandaloneCluster, topics, tmp_path: Path
) -> None:
    source, output, sent = topics
    run = run_job(spark_standalone, cluster.namesrv, source, output, tmp_path)
    assert run.workers(spark_standalone, "read") | run.workers(spark_standalone, "write") == {0, 1}, run.attempts
    assert all(a.attempt == 0 for a in run.attempts), "no task failed"
    assert_exactly_once_on_staticmq(spark, cluster.namesrv, output, tmp_path, sent)


def test_executors_killed_in_the_middle_of_a_read_and_of_a_sink_write_have_their_tasks_retried_exactly_once(
    spark: SparkSession, cluster, spark_standalone: StandaloneCluster, topics, tmp_path: Path
) -> None:
    """One run, two kills (one job, not two, for CI's time): the executor under a bronze task
    stopped after 60 of its rows, then the one under a sink task stopped the same way."""
    source, output, sent = topics
    run = run_job(spark_standalone, cluster.namesrv, source, output, tmp_path, kill_in=("read", "write"))
    assert [blocked.phase for blocked, _ in run.killed] == ["read", "write"]
    assert len({executor for _, executor in run.killed}) == 2, "two executor JVMs killed"
    for blocked, executor in run.killed:
        assert_retried_elsewhere(blocked, executor, run)
    assert_exactly_once_on_staticmq(spark, cluster.namesrv, output, tmp_path, sent)


def test_the_spark_submit_job_on_rocketmq_ships_the_package_and_writes_exactly_once_through_an_executor_kill(
    spark: SparkSession,
    rocketmq_cluster: LocalRocketMQ,
    spark_standalone: StandaloneCluster,
    tmp_path: Path,
    shipped_wheel: Path,
) -> None:
    """The executors' Python does not have the package installed: it comes with `--py-files` (the
    wheel as a .zip). The executor under an exactly-once sink task that staged some of its rows on
    the staging topic is killed with kill -9; the task runs again elsewhere and every row lands once."""
    address = rocketmq_cluster.address
    source, output = (f"rmq-standalone-{name}-{os.getpid()}" for name in ("in", "out"))
    rocketmq_cluster.update_static_topic(source, 4)
    rocketmq_cluster.update_static_topic(output, 4)
    sent = produce(address, source, MESSAGES)
    run = run_job(spark_standalone, address, source, output, tmp_path, kill_in=("write",), wheel=shipped_wheel)
    assert [blocked.phase for blocked, _ in run.killed] == ["write"]
    assert_retried_elsewhere(*run.killed[0], run)
    assert {a.phase for a in run.attempts} == {"read", "write"}
    assert all(f"/{shipped_wheel.name}/" in a.package for a in run.attempts), [a.package for a in run.attempts]

    assert by_queue(spark.read.format("delta").load(str(tmp_path / "bronze")).collect()) == sent
    df = spark.read.format("staticmq").option("namesrv", address).option("topic", output).load()
    rows = df.collect()
    want = Counter(b for bodies in sent.values() for b in bodies)
    assert Counter(bytes(r["value"]) for r in rows) == want, "the exactly-once sink wrote every row once"
    assert not any(ROW_ID in (r["properties"] or {}) for r in rows), "the staged sink adds no property of its own"
    assert_hash_sharded(rows, 4)
