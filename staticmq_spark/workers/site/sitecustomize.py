"""The `sitecustomize` of staticmq's Spark Python workers: it rewrites `sys.path` at their start,
taking Spark's zipped pyspark off it when the same pyspark is installed (see `__init__`), and makes
the worker daemon's task sockets acknowledge what the JVM sends at once (`acks_at_once`), and
has the daemon import staticmq's task code before it serves (`preload_daemon`).

Spark puts `$SPARK_HOME/python/lib/pyspark.zip` (and py4j's zip) first on a worker's path. Python
cannot cache the bytecode of modules imported from a zip, so every new worker compiles pyspark's
sources again: about 1 CPU-second, paid by each streaming query's source runner. When the
interpreter has the same pyspark (or py4j) installed, this takes the zip off the path, so that
installation and its cached bytecode are used (and Python 3.11 does not read the zip's directory
again, 14 ms, each time a worker's path changes or pyspark invalidates the import caches). The
same: the zip is the one pip installed inside that package (`pyspark/python/lib/`), or its
`version.py` is byte for byte the installed one. Anything else (no installation, another version,
no zip) leaves the path as Spark made it. Then the next `sitecustomize` on the path, if any, runs
as it would have without this one. With the zipped pyspark gone, so are that Spark installation's
jars on the path (Spark adds spark-core's jar; Python reads a jar's directory like a zip's).
"""

from __future__ import annotations

import functools
import importlib.machinery
import importlib.util
import itertools
import os
import socket
import sys
import zipimport
from collections.abc import Mapping
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
_ZIPPED = (("pyspark.zip", "pyspark"), ("py4j-", "py4j"))  # (file name prefix of the zip, package)


def _installed_version_file(package: str, entries: list[str]) -> str | None:
    spec = importlib.machinery.PathFinder.find_spec(package, [e for e in entries if not e.endswith(".zip")])
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.join(next(iter(spec.submodule_search_locations)), "version.py")


def _same_version(zip_path: str, package: str, version_file: str) -> bool:
    package_dir = os.path.dirname(version_file)
    if os.path.dirname(os.path.abspath(zip_path)) == os.path.join(package_dir, "python", "lib"):
        return True  # the zip pip installed with this very package (pyspark's wheel)
    try:
        zipped = zipimport.zipimporter(zip_path).get_data(f"{package}/version.py")
        with open(version_file, "rb") as installed:
            return bool(zipped == installed.read())
    except (OSError, zipimport.ZipImportError):
        return False


def prefer_installed(path: list[str]) -> list[str]:
    """`path` without each zipped pyspark/py4j whose same version is installed on it, and
    without the jars of the Spark installation whose `pyspark.zip` that was."""
    result = list(path)
    for prefix, package in _ZIPPED:
        zips = [e for e in result if os.path.basename(e).startswith(prefix) and e.endswith(".zip")]
        if not zips:
            continue
        rest = [e for e in result if e not in zips]
        version_file = _installed_version_file(package, rest)
        if version_file is not None and all(_same_version(z, package, version_file) for z in zips):
            result = rest
            if package == "pyspark":
                result = _without_spark_jars(result, zips)
    return result


def _without_spark_jars(path: list[str], pyspark_zips: list[str]) -> list[str]:
    """Spark also puts its own spark-core jar on a worker's path (`SparkContext.jarOfObject`, for
    builds that bundled pyspark in it). A jar is a zip of thousands of classes: Python reads its
    directory, about 60 ms, at the first import that searches it and again at each
    `importlib.invalidate_caches()`. With pyspark's zip of the same installation replaced by the
    installed pyspark, its jars hold nothing Python needs."""
    homes = {os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(z)))) for z in pyspark_zips}
    jar_dirs = {os.path.join(home, "jars") for home in homes}
    return [e for e in path if not (e.endswith(".jar") and os.path.dirname(os.path.abspath(e)) in jar_dirs)]


def _run_next_sitecustomize() -> None:
    """The first `sitecustomize` on the path after this one that is not a copy of this one."""
    skipped = {_HERE}
    while True:
        others = [e for e in sys.path if os.path.abspath(e or ".") not in skipped]
        spec = importlib.machinery.PathFinder.find_spec("sitecustomize", others)
        if spec is None or spec.loader is None or spec.origin is None:
            return
        if not _is_a_copy(spec.origin):
            break
        skipped.add(os.path.dirname(os.path.abspath(spec.origin)))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


def _is_a_copy(origin: str) -> bool:
    """Whether `origin` is this file (another install of staticmq on the same path)."""
    try:
        with open(origin, "rb") as other, open(__file__, "rb") as this:
            return other.read() == this.read()
    except OSError:
        return False


def _forget_finders(entries: set[str]) -> None:
    """Drop the import finders cached for path entries taken off the path: the site's `.pth`
    imports ran before this module and searched the zips, and `importlib.invalidate_caches()`,
    which pyspark's workers call at their start, would read each cached zip's directory again."""
    for entry in entries:
        sys.path_importer_cache.pop(entry, None)


def acks_at_once(sock: socket.socket) -> None:
    """Leave TCP's delayed-acknowledgement mode on a worker's task socket before the task is read.

    Neither Spark's JVM nor pyspark's daemon turns off Nagle's algorithm on the socket of a Python
    task (TCP, unless spark.python.unix.domain.socket.enabled). The JVM writes a task in pieces:
    the piece after the first waits for the first one's acknowledgement, and the worker, which
    answered the previous task on that socket, delays that acknowledgement by up to 40 ms (Linux's
    delayed ACK in its "ping-pong" mode). Every read task waited for it: 20-40 ms of a 0-second
    trigger's addBatch on 2 cores (docs/investigations/2026-11-28-python-task-socket.md).
    TCP_QUICKACK leaves that mode until the worker next answers, so the worker acknowledges each
    piece as it reads it. Sockets that are not TCP, and systems without TCP_QUICKACK, are left
    as they are."""
    quickack = getattr(socket, "TCP_QUICKACK", None)
    if quickack is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return
    try:
        sock.setsockopt(socket.IPPROTO_TCP, quickack, 1)
    except OSError:
        pass  # a socket the JVM already closed: the task fails on its own read


def serve_acking_at_once(main: Any) -> None:
    """Wrap `main.worker` (pyspark's daemon serves each task of a forked worker with
    `worker(sock, authenticated)`, pyspark 4.0 to 4.3) so that each task starts with
    `acks_at_once(sock)`. Once per process; nothing if `main` has no such function."""
    serve = getattr(main, "worker", None)
    if not callable(serve) or getattr(serve, "acks_at_once", False):
        return

    @functools.wraps(serve)
    def worker(sock: socket.socket, *args: Any, **kwargs: Any) -> Any:
        acks_at_once(sock)
        return serve(sock, *args, **kwargs)

    worker.acks_at_once = True  # type: ignore[attr-defined]
    main.worker = worker


def preload_daemon(argv: list[str], environ: Mapping[str, str]) -> None:
    """In pyspark's daemon, before it serves: import what its workers import for staticmq
    (`staticmq_spark.workers.preload`; the daemon's worker module follows `-m pyspark.daemon`,
    `pyspark.worker` if none), so that each worker it forks starts with it, including the ones
    that replace workers Spark stopped after a minute idle. Here and not in a before-fork
    hook: modules imported there register fork hooks of their own whose "after" half would run
    without their "before" half (concurrent.futures' lock). `STATICMQ_WORKER_PRELOAD=0` turns it
    off. A preload that fails leaves the workers to import what they need, as before; its message
    goes to stderr (the daemon's stdout carries its port to the JVM)."""
    if environ.get("STATICMQ_WORKER_PRELOAD", "1") == "0":
        return
    after = _module_args(argv, "pyspark.daemon") or []
    worker_module = after[0] if after and after[0].startswith("pyspark") else "pyspark.worker"
    try:
        importlib.import_module("staticmq_spark.workers.preload").preload_task_path(worker_module)
    except Exception as exc:  # the workers import it themselves
        print(f"staticmq: preloading the worker daemon failed ({exc!r})", file=sys.stderr)


def _module_args(argv: list[str], module: str) -> list[str] | None:
    """The arguments after `-m <module>` when the interpreter was started as `python -m <module> ...`,
    None otherwise."""
    for i, (a, b) in enumerate(itertools.pairwise(argv)):
        if a == "-m" and b == module:
            return argv[i + 2 :]
    return None


def _runs_module(argv: list[str], module: str) -> bool:
    """Whether the interpreter was started as `python -m <module> ...`."""
    return _module_args(argv, module) is not None


def _warm_runner_started(argv: list[str]) -> bool:
    """Whether this is `python -m <staticmq_warm_runner.RUNNER_MODULE>`, a streaming query's source
    runner (checked here, so that other workers do not import that module), and it is beside this file."""
    runner = "pyspark.sql.streaming.python_streaming_source_runner"
    return _runs_module(argv, runner) and os.path.isfile(os.path.join(_HERE, "staticmq_warm_runner.py"))


def is_pyspark_daemon(argv: list[str]) -> bool:
    """Whether the interpreter was started as `python -m pyspark.daemon ...` (Spark's worker daemon)."""
    return _runs_module(argv, "pyspark.daemon")


_kept = prefer_installed(sys.path)
_forget_finders(set(sys.path) - set(_kept))
sys.path[:] = _kept
_run_next_sitecustomize()
if is_pyspark_daemon(sys.orig_argv):  # the daemon forks a worker per connection; its module is __main__
    preload_daemon(sys.orig_argv, os.environ)
    os.register_at_fork(after_in_child=lambda: serve_acking_at_once(sys.modules["__main__"]))
if _warm_runner_started(sys.orig_argv):  # a streaming query's source runner: see staticmq_warm_runner
    try:
        _warm = importlib.import_module("staticmq_warm_runner")
        _code = _warm.hand_over()
    except Exception:  # any failure before a child was told to go: the runner starts as usual
        _code = None
    if _code is not None:
        _warm.exit_as(_code)
