"""A warm start for the Python process Spark starts for each streaming query's source.

Spark starts `python -m pyspark.sql.streaming.python_streaming_source_runner` for every streaming
query with a Python data source, and that process imports pyspark's runner, pyarrow, numpy and the
connector before it can answer the first offset: ~0.45 s of every query's start on 2 cores
(docs/investigations/2026-11-28-warm-runner.md). Here a query's runner is instead forked from a
*warm* process that has imported all of that already:

- The first runner of a Spark application (per interpreter, working directory and environment)
  starts as usual, and starts that warm process (`serve`) beside it.
- Each later runner's `sitecustomize` (this package's, which Spark's workers for staticmq run)
  calls `hand_over` before anything else is imported: it sends its environment, working directory
  and standard streams over a Unix socket, the warm process forks a child that takes them over and
  runs the runner module as `__main__`, and the process Spark started stays as a stand-in: it
  passes SIGTERM, SIGINT and SIGHUP on to that child and exits with its exit status. The child
  exits when the stand-in is gone (a pipe between them closes).
- The warm process belongs to one Spark application: it ends when the process that started its
  first runner (the driver's JVM) is gone. Runners whose parent is not a JVM (a wrapper around the
  interpreter that stays their parent) start as usual, unless `STATICMQ_WARM_RUNNER_OWNER` names
  the pid whose life bounds the warm process.

Nothing changes when the warm process is absent, refuses, or answers too late: the runner then
starts as usual. `STATICMQ_WARM_RUNNER=0` in the workers' environment turns all of it off.
Only the standard library is imported before the hand-over: this runs in every runner's start.
"""

from __future__ import annotations

import array
import fcntl
import json
import os
import signal
import socket
import struct
import sys
import time
from collections.abc import Mapping
from typing import Any

RUNNER_MODULE = "pyspark.sql.streaming.python_streaming_source_runner"
SWITCH = "STATICMQ_WARM_RUNNER"
OWNER = "STATICMQ_WARM_RUNNER_OWNER"
# What differs between two runners of one application: how each reaches the JVM.
PER_RUNNER = frozenset(
    {"PYTHON_WORKER_FACTORY_SOCK_PATH", "PYTHON_WORKER_FACTORY_PORT", "PYTHON_WORKER_FACTORY_SECRET"}
)
PASSED_FDS = 4  # stdin, stdout, stderr, and the read end of the stand-in's pipe
ANSWER_TIMEOUT_S = 10.0
SOCKET_PATH_MAX = 100  # sockaddr_un holds 108 bytes


def socket_path(env: Mapping[str, str], executable: str, cwd: str, owner_pid: int, base: str) -> str:
    """Where the warm process for runners started like this one listens: one per owner (the JVM),
    interpreter, working directory and environment (but the per-runner connection variables)."""
    import hashlib

    kept = sorted((k, v) for k, v in env.items() if k not in PER_RUNNER)
    identity = json.dumps([RUNNER_MODULE, executable, cwd, kept]).encode()
    return os.path.join(base, f"{owner_pid}-{hashlib.sha256(identity).hexdigest()[:24]}.sock")


def private_dir(tmp: str) -> str | None:
    """`<tmp>/staticmq-warm-runner-<uid>`, created 0700; None if it exists with other owner or mode."""
    path = os.path.join(tmp, f"staticmq-warm-runner-{os.getuid()}")
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return None
    st = os.lstat(path)
    if st.st_uid != os.getuid() or (st.st_mode & 0o077) or not os.path.isdir(path) or os.path.islink(path):
        return None
    return path


def owner_pid(env: Mapping[str, str], parent: int, proc: str = "/proc") -> int | None:
    """The process whose life bounds the warm process: `STATICMQ_WARM_RUNNER_OWNER` if set, else
    the runner's parent when it is a JVM (Spark's driver starts runners itself). None otherwise: a
    runner started through a wrapper that stays its parent (a shell that does not `exec`) would
    start a warm process per query, which none would use."""
    given = env.get(OWNER, "")
    if given:
        return int(given) if given.isdigit() else None
    try:
        with open(f"{proc}/{parent}/comm") as f:
            command = f.read().strip()
    except OSError:
        return parent if not os.path.isdir(proc) else None  # no /proc to ask (not Linux)
    return parent if command == "java" else None


def _here() -> tuple[str, int] | None:
    base = private_dir(os.environ.get("TMPDIR") or "/tmp")
    owner = owner_pid(os.environ, os.getppid())
    if base is None or owner is None:
        return None
    path = socket_path(os.environ, sys.executable, os.getcwd(), owner, base)
    return (path, owner) if len(path) <= SOCKET_PATH_MAX else None


# --- the stand-in: the process Spark started ------------------------------------------------------


def hand_over() -> int | None:
    """Have the warm process run this runner; its exit code (negative: the signal that ended it),
    or None when this process must start the runner itself (and the warm process was started)."""
    if os.environ.get(SWITCH, "1") == "0":
        return None
    here = _here()
    if here is None:
        return None
    path, owner = here
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
    except OSError:
        conn.close()
        start_warm_process(path, owner)
        return None
    with conn:
        return _stand_in(conn)


def _stand_in(conn: socket.socket) -> int | None:
    go_read, go_write = os.pipe()
    try:
        payload = json.dumps({"env": dict(os.environ), "cwd": os.getcwd(), "argv": sys.orig_argv}).encode()
        data = struct.pack("!I", len(payload)) + payload
        fds = array.array("i", [0, 1, 2, go_read])
        conn.settimeout(ANSWER_TIMEOUT_S)
        sent = conn.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
        conn.sendall(data[sent:])
        os.close(go_read)
        go_read = -1
        answers = conn.makefile("rb")
        first = answers.readline()
    except OSError:
        os.close(go_write)
        if go_read >= 0:
            os.close(go_read)
        return None  # no child was told to go: this process starts the runner itself
    pid = _number_after(b"pid ", first)
    if pid is None or pid <= 0:
        os.close(go_write)
        return None
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda s, _frame: _forward(pid, s))
    os.write(go_write, b"g")  # the child runs from here; go_write stays open while this process lives
    conn.settimeout(None)
    try:
        last = answers.readline()
    except OSError:
        last = b""
    code = _number_after(b"exit ", last)
    if code is not None:
        return code
    while _alive(pid):  # the warm process is gone: wait for the child itself
        time.sleep(0.1)
    return 1


def _number_after(prefix: bytes, line: bytes) -> int | None:
    """The integer of an answer line `<prefix><int>\n`; None for anything else."""
    if not line.startswith(prefix):
        return None
    try:
        return int(line[len(prefix) :])
    except ValueError:
        return None


def _forward(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def exit_as(code: int) -> None:
    """End this process as the child ended: its exit code, or the signal that ended it."""
    sys.stdout.flush()
    sys.stderr.flush()
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        time.sleep(1)
    os._exit(code if code >= 0 else 128 - code)


def start_warm_process(path: str, owner_pid: int) -> None:
    """Start `serve` for `path` in the background with this runner's environment (but the
    per-runner variables); its messages go to `<path>.log`."""
    import subprocess

    env = {k: v for k, v in os.environ.items() if k not in PER_RUNNER}
    try:
        with open(path + ".log", "ab") as log:
            subprocess.Popen(
                [sys.executable, "-m", "staticmq_warm_runner", "serve", path, str(owner_pid)],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
                close_fds=True,
            )
    except OSError:
        pass  # no warm process: every runner starts as usual


# --- the warm process ---------------------------------------------------------------------------


def preload() -> None:
    """Import what a staticmq runner imports before its first offset, then forget the runner module
    itself so that each child runs it afresh as `__main__`."""
    import importlib

    importlib.import_module(RUNNER_MODULE)
    importlib.import_module("staticmq_spark.data_source")
    importlib.import_module("staticmq_spark.source.stream_reader")
    importlib.import_module("staticmq_spark.workers.preload").import_backends()
    sys.modules.pop(RUNNER_MODULE, None)


def serve(path: str, owner_pid: int) -> int:
    """Listen on `path` and fork a runner for each stand-in, until `owner_pid` is gone."""
    lock = open(path + ".lock", "w")  # noqa: SIM115 (held for the process's life)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return 0  # another warm process serves this path
    try:
        preload()
    except Exception:  # the runners start as usual; holding the lock keeps others from retrying
        import traceback

        traceback.print_exc()
        while _alive(owner_pid):
            time.sleep(1.0)
        return 1
    import selectors

    if os.path.exists(path):
        os.unlink(path)  # left by a warm process that was killed
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(16)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_read, False)
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    children: dict[int, socket.socket] = {}
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    selector.register(wake_read, selectors.EVENT_READ)
    try:
        while _alive(owner_pid):
            for key, _ in selector.select(timeout=1.0):
                if key.fileobj is listener:
                    conn, _addr = listener.accept()
                    closed_in_child = [listener, *children.values()]
                    _fork_runner(conn, children, closed_in_child, (wake_read, wake_write, lock.fileno()))
                else:
                    while _drain(wake_read):
                        pass
            _reap(children)
    finally:
        _remove(path, path + ".lock")
        if os.path.exists(path + ".log") and not os.path.getsize(path + ".log"):
            _remove(path + ".log")
    return 0


def _remove(*paths: str) -> None:
    for path in paths:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def _drain(fd: int) -> bool:
    try:
        return bool(os.read(fd, 512))
    except BlockingIOError:
        return False


def _reap(children: dict[int, socket.socket]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = children.pop(pid, None)
        if conn is not None:
            try:
                conn.sendall(f"exit {os.waitstatus_to_exitcode(status)}\n".encode())
            except OSError:
                pass
            conn.close()


def _receive(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    conn.settimeout(ANSWER_TIMEOUT_S)
    fds = array.array("i")
    data, ancillary, _flags, _addr = conn.recvmsg(1 << 16, socket.CMSG_SPACE(PASSED_FDS * fds.itemsize))
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
    try:
        if len(fds) != PASSED_FDS or len(data) < 4:
            raise ValueError(f"a stand-in sent {len(fds)} descriptors and {len(data)} bytes")
        size = struct.unpack("!I", data[:4])[0]
        while len(data) < 4 + size:
            more = conn.recv(4 + size - len(data))
            if not more:
                raise ValueError("a stand-in closed its connection mid-request")
            data += more
        request: dict[str, Any] = json.loads(data[4 : 4 + size])
    except (ValueError, OSError):
        for fd in fds:
            os.close(fd)
        raise
    return request, list(fds)


def _fork_runner(
    conn: socket.socket, children: dict[int, socket.socket], close: list[socket.socket], fds_of_serve: tuple[int, ...]
) -> None:
    try:
        request, fds = _receive(conn)
    except (ValueError, OSError) as exc:
        print(f"staticmq warm runner: refused a request: {exc}", file=sys.stderr, flush=True)
        conn.close()
        return
    pid = os.fork()
    if pid == 0:
        _become_runner(request, fds, [conn, *close], fds_of_serve)
    for fd in fds:
        os.close(fd)
    try:
        conn.sendall(f"pid {pid}\n".encode())
    except OSError:
        os.kill(pid, signal.SIGKILL)  # its stand-in is gone before it was told to go
    children[pid] = conn


def _become_runner(
    request: dict[str, Any], fds: list[int], close: list[socket.socket], fds_of_serve: tuple[int, ...]
) -> None:
    """In the forked child: drop the warm process's sockets, pipe and lock, take over the stand-in's
    streams, environment and working directory, wait for its go, and run the runner module as
    `__main__`. Never returns."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for sock in close:
            sock.close()
        for fd in fds_of_serve:
            os.close(fd)
        for target, fd in zip((0, 1, 2), fds[:3], strict=True):
            os.dup2(fd, target)
            os.close(fd)
        go = fds[3]
        if os.read(go, 1) != b"g":
            os._exit(1)  # the stand-in gave up waiting and starts the runner itself
        import threading

        threading.Thread(target=_exit_with_stand_in, args=(go,), daemon=True, name="stand-in-watch").start()
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        sys.orig_argv[:] = request["argv"]
        sys.argv[:] = ["-m"]  # as `python -m` leaves it for runpy, which sets the module's path
        code = _run_runner()
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        _finish(code)


def _run_runner() -> int:
    import runpy

    try:
        runpy.run_module(RUNNER_MODULE, run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        print(exc.code, file=sys.stderr)
        return 1
    return 0


def _finish(code: int) -> None:
    import atexit

    try:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def _exit_with_stand_in(go: int) -> None:
    while os.read(go, 1):
        pass
    os._exit(143)  # the stand-in is gone (killed): so is this runner


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "serve":
        sys.exit(serve(sys.argv[2], int(sys.argv[3])))
    print("usage: python -m staticmq_warm_runner serve <socket path> <owner pid>", file=sys.stderr)
    sys.exit(2)
