"""`staticmq_spark.workers.site`: Python workers started for staticmq import pyspark's installed,
compiled modules instead of compiling `pyspark.zip`, and nothing else about them changes."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import py4j
import pyspark

from staticmq_spark.workers.site import WORKER_SITE, worker_environment

SPARK_LIB = Path(pyspark.__file__).parent / "python" / "lib"
PYSPARK_ZIP = SPARK_LIB / "pyspark.zip"
PY4J_ZIP = next(SPARK_LIB.glob("py4j-*.zip"))
SPARK_CORE_JAR = next((Path(pyspark.__file__).parent / "jars").glob("spark-core_*.jar"))


def worker_imports(
    *path: str | Path, code: str = "import pyspark, py4j; print(pyspark.__file__); print(py4j.__file__)"
) -> list[str]:
    """What a Python started with PYTHONPATH=`path` (as Spark starts its workers) prints."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(p) for p in path)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60, check=True)
    return out.stdout.splitlines()


def test_a_worker_imports_the_installed_pyspark_and_py4j_instead_of_their_zips() -> None:
    assert all(".zip" in line for line in worker_imports(PYSPARK_ZIP, PY4J_ZIP))  # Spark's path alone
    found = worker_imports(PYSPARK_ZIP, PY4J_ZIP, WORKER_SITE)
    assert found == [str(Path(pyspark.__file__)), str(Path(py4j.__file__ or ""))]
    assert not any(".zip" in line for line in found)


def test_a_zip_taken_off_the_path_leaves_no_cached_finder_for_invalidate_caches_to_read_again() -> None:
    code = (
        "import sys, importlib; importlib.invalidate_caches()\n"
        "print(sorted(k for k in sys.path_importer_cache if k.endswith(('.zip', '.jar'))))"
    )
    assert worker_imports(SPARK_CORE_JAR, PYSPARK_ZIP, PY4J_ZIP, WORKER_SITE, code=code) == ["[]"]


def test_the_spark_core_jar_spark_adds_leaves_the_path_with_its_installations_pyspark_zip(tmp_path: Path) -> None:
    jars = "import sys; print([p for p in sys.path if p.endswith('.jar')])"
    assert worker_imports(SPARK_CORE_JAR, PYSPARK_ZIP, PY4J_ZIP, WORKER_SITE, code=jars) == ["[]"]
    other = tmp_path / "pyspark.zip"  # another Spark's pyspark: its path stays as Spark made it
    with zipfile.ZipFile(other, "w") as archive:
        archive.writestr("pyspark/__init__.py", "")
        archive.writestr("pyspark/version.py", '__version__: str = "0.0.1"\n')
    assert worker_imports(SPARK_CORE_JAR, other, WORKER_SITE, code=jars) == [str([str(SPARK_CORE_JAR)])]


def test_a_zipped_pyspark_of_another_version_stays_first(tmp_path: Path) -> None:
    other = tmp_path / "pyspark.zip"
    with zipfile.ZipFile(other, "w") as archive:
        archive.writestr("pyspark/__init__.py", "")
        archive.writestr("pyspark/version.py", '__version__: str = "0.0.1"\n')
    assert worker_imports(other, WORKER_SITE, code="import pyspark; print(pyspark.__file__)") == [
        str(other / "pyspark" / "__init__.py")
    ]


def test_a_zip_without_an_installed_package_stays_where_it_is(tmp_path: Path) -> None:
    alone = tmp_path / "py4j-9.9.9-src.zip"
    with zipfile.ZipFile(alone, "w") as archive:
        archive.writestr("nothing_installed_like_this/__init__.py", "")
    printed = worker_imports(alone, WORKER_SITE, code="import sys, nothing_installed_like_this as m; print(m.__file__)")
    assert printed == [str(alone / "nothing_installed_like_this" / "__init__.py")]


def test_the_next_sitecustomize_on_the_path_still_runs(tmp_path: Path) -> None:
    (tmp_path / "sitecustomize.py").write_text("import builtins\nbuiltins.OTHER_SITE_RAN = True\n")
    code = "import builtins; print(getattr(builtins, 'OTHER_SITE_RAN', False))"
    assert worker_imports(PYSPARK_ZIP, WORKER_SITE, tmp_path, code=code) == ["True"]


def test_worker_environment_puts_the_worker_site_first_and_keeps_the_rest() -> None:
    given = {"PYTHONHASHSEED": "0", "PYTHONPATH": os.pathsep.join(["/a", WORKER_SITE, "/b"])}
    assert worker_environment(given) == {
        "PYTHONHASHSEED": "0",
        "PYTHONPATH": os.pathsep.join([WORKER_SITE, "/a", "/b"]),
    }
    assert worker_environment({}) == {"PYTHONPATH": WORKER_SITE}


def test_a_second_copy_of_the_worker_site_on_the_path_is_skipped_and_the_next_sitecustomize_runs(
    tmp_path: Path,
) -> None:
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "sitecustomize.py").write_text(Path(WORKER_SITE, "sitecustomize.py").read_text())
    (tmp_path / "sitecustomize.py").write_text("import builtins\nbuiltins.OTHER_SITE_RAN = True\n")
    code = (
        "import builtins, pyspark; print(getattr(builtins, 'OTHER_SITE_RAN', False)); print('.zip' in pyspark.__file__)"
    )
    assert worker_imports(PYSPARK_ZIP, WORKER_SITE, copy, tmp_path, code=code) == ["True", "False"]


ACKS = """
import socket, sys, types
import sitecustomize as site

listener = socket.create_server(("127.0.0.1", 0))
client = socket.create_connection(listener.getsockname())
served, _ = listener.accept()
client.sendall(b"task"); served.recv(4); served.sendall(b"answer"); client.recv(6)  # a task answered
ack = lambda: served.getsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK)
print(ack())  # 0: delayed acknowledgements ("ping-pong" mode) after answering
calls = []
original = lambda sock, authenticated: calls.append((ack(), authenticated)) or 0
daemon = types.SimpleNamespace(worker=original)
site.serve_acking_at_once(daemon)
site.serve_acking_at_once(daemon)  # once: the second leaves the first wrapper alone
print(daemon.worker(served, True), calls, daemon.worker.__wrapped__ is original)
daemon_argv = [sys.executable, "-m", "pyspark.daemon", "pyspark.worker"]
print(site.is_pyspark_daemon(daemon_argv), site.is_pyspark_daemon([sys.executable, "-m", "pyspark.worker"]))
"""


def test_each_task_of_a_daemon_worker_starts_with_its_socket_acknowledging_at_once() -> None:
    """pyspark's daemon serves a task with `worker(sock, authenticated)`: wrapped, the socket leaves
    TCP's delayed-acknowledgement mode (entered by answering the previous task) before the task is
    read, so that the JVM's next piece of the task is not held back waiting for an acknowledgement."""
    before, served, daemon_or_not = worker_imports(WORKER_SITE, code=ACKS)
    assert before == "0"
    assert served == "0 [(1, True)] True"  # the wrapped worker ran with the socket already acking
    assert daemon_or_not == "True False"


def daemon_libraries(worker_module: str, **env: str) -> set[str]:
    """Start pyspark's daemon for `worker_module` as Spark starts it for staticmq (PYTHONPATH with
    the worker site), wait until it tells its port (it serves from then on), and return the file
    names of the shared libraries it has loaded by then; closing its stdin ends it."""
    environ = {**os.environ, "PYTHONPATH": WORKER_SITE, "SPARK_REUSE_WORKER": "1", **env}
    environ.pop("PYTHON_UNIX_DOMAIN_ENABLED", None)  # TCP: the daemon writes a 4-byte port
    daemon = subprocess.Popen(
        [sys.executable, "-m", "pyspark.daemon", worker_module],
        env=environ,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert daemon.stdout is not None and len(daemon.stdout.read(4)) == 4, daemon.stderr
        with open(f"/proc/{daemon.pid}/maps") as maps:
            return {os.path.basename(line.split()[-1]) for line in maps if "/" in line}
    finally:
        assert daemon.stdin is not None
        daemon.stdin.close()
        try:
            daemon.wait(timeout=30)
        finally:
            daemon.kill()
            assert daemon.stderr is not None
            daemon.stderr.close()
            daemon.stdout.close()


def test_a_worker_daemon_imports_what_staticmq_tasks_import_before_it_serves() -> None:
    """Each worker the daemon forks, also the ones that replace workers Spark stopped after a minute
    idle, starts with pyarrow, grpc and the connector imported. The daemons that create a data
    source or plan its reads (one per worker module) do the same."""
    for worker_module in ("pyspark.worker", "pyspark.sql.worker.create_data_source"):
        loaded = daemon_libraries(worker_module)
        assert any(name.startswith("cygrpc.") for name in loaded), (worker_module, sorted(loaded))
        assert any(name.startswith("libarrow.so") for name in loaded), (worker_module, sorted(loaded))


def test_staticmq_worker_preload_0_leaves_the_daemon_as_pyspark_starts_it() -> None:
    loaded = daemon_libraries("pyspark.worker", STATICMQ_WORKER_PRELOAD="0")
    assert not any(name.startswith(("cygrpc.", "libarrow.so")) for name in loaded), sorted(loaded)
