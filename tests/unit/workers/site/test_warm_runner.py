"""`staticmq_warm_runner`: a streaming query's source runner forked from a warm process. Real
processes: pyspark's own runner module started as Spark starts it (`python -m ...` with this
package's worker site on PYTHONPATH), against a stand-in for the JVM's side of the handshake."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from staticmq_spark.workers.site import staticmq_warm_runner as warm
from staticmq_spark.workers.site import worker_environment

RUNNER = [sys.executable, "-m", warm.RUNNER_MODULE]


class FakeJvm:
    """The JVM's side of a runner's start: a TCP server that checks the secret, answers "ok" and
    records the pid the runner reports; each connection is then held open until `release()`."""

    def __init__(self) -> None:
        self.secret = "s3cret"
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.pids: list[int] = []
        self.conns: list[socket.socket] = []
        self.reported = threading.Condition()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            f = conn.makefile("rwb")
            (size,) = struct.unpack("!i", f.read(4))
            ok = f.read(size).decode() == self.secret
            f.write(struct.pack("!i", 2) + b"ok" if ok else struct.pack("!i", 2) + b"no")
            f.flush()
            (pid,) = struct.unpack("!i", f.read(4))
            with self.reported:
                self.pids.append(pid)
                self.conns.append(conn)
                self.reported.notify_all()

    def next_pid(self, seen: int, timeout: float = 60) -> int:
        with self.reported:
            assert self.reported.wait_for(lambda: len(self.pids) > seen, timeout), "no runner connected"
            return self.pids[seen]

    def release(self) -> None:
        """Close every runner's connection: each then fails its first read and exits."""
        with self.reported:
            for conn in self.conns:
                conn.shutdown(socket.SHUT_RDWR)  # its makefile() would keep it open past close()
                conn.close()
            self.conns.clear()

    def close(self) -> None:
        self.release()
        self.server.close()


@pytest.fixture
def jvm() -> Iterator[FakeJvm]:
    fake = FakeJvm()
    yield fake
    fake.close()


@pytest.fixture
def tmp_short() -> Iterator[str]:
    """A short private TMPDIR (a Unix socket path holds ~100 bytes), its warm processes killed after."""
    path = tempfile.mkdtemp(prefix="wr-", dir="/tmp")
    yield path
    subprocess.run(["pkill", "-9", "-f", path], check=False)
    shutil.rmtree(path, ignore_errors=True)


def runner_env(jvm: FakeJvm, tmp: str, **extra: str) -> dict[str, str]:
    env = worker_environment({k: v for k, v in os.environ.items() if k not in warm.PER_RUNNER})
    env.update(TMPDIR=tmp, PYTHON_WORKER_FACTORY_PORT=str(jvm.port), PYTHON_WORKER_FACTORY_SECRET=jvm.secret)
    env[warm.OWNER] = str(os.getpid())  # this test process stands in for the JVM that starts runners
    env.update(extra)
    return env


def warm_socket(tmp: str, timeout: float = 60) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = list(Path(tmp).glob("staticmq-warm-runner-*/*.sock"))
        if found:
            return found[0]
        time.sleep(0.05)
    raise AssertionError(f"no warm process listens under {tmp}")


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def gone(pid: int, timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):  # gone before the open, or between open and read
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


def warmed(jvm: FakeJvm, tmp: str) -> None:
    """Start a first runner (as usual: it starts the warm process), end it, wait for the socket."""
    first = subprocess.Popen(RUNNER, env=runner_env(jvm, tmp), stderr=subprocess.DEVNULL)
    assert jvm.next_pid(len(jvm.pids)) == first.pid  # the first runner is the process Spark started
    jvm.release()
    first.wait(timeout=60)
    warm_socket(tmp)


def started_as_usual(jvm: FakeJvm, env: dict[str, str]) -> None:
    """Start a runner with `env`: it must be the process that reaches the JVM (no hand-over); end it."""
    proc = subprocess.Popen(RUNNER, env=env, stderr=subprocess.DEVNULL)
    try:
        assert jvm.next_pid(len(jvm.pids)) == proc.pid
    finally:
        jvm.release()
        proc.wait(timeout=60)


def no_warm_process_started(tmp: str) -> bool:
    time.sleep(1)  # a warm process started beside the runner would be listening by now
    return not list(Path(tmp).glob("staticmq-warm-runner-*/*.sock"))


def test_the_first_runner_starts_as_usual_and_a_later_one_is_forked_from_the_warm_process(
    jvm: FakeJvm, tmp_short: str
) -> None:
    warmed(jvm, tmp_short)
    usual = subprocess.Popen(RUNNER, env=runner_env(jvm, tmp_short, STATICMQ_WARM_RUNNER="0"), stderr=subprocess.PIPE)
    assert jvm.next_pid(1) == usual.pid
    jvm.release()
    _, usual_err = usual.communicate(timeout=60)
    later = subprocess.Popen(RUNNER, env=runner_env(jvm, tmp_short), stderr=subprocess.PIPE)
    pid = jvm.next_pid(2)
    assert pid != later.pid
    warm_pid = parent_of(pid)
    assert "staticmq_warm_runner" in Path(f"/proc/{warm_pid}/cmdline").read_text()
    # The runner writes to the streams of the process Spark started (Spark logs them).
    for fd in (0, 1, 2):
        assert os.readlink(f"/proc/{pid}/fd/{fd}") == os.readlink(f"/proc/{later.pid}/fd/{fd}")
    # and holds nothing of the warm process's (its socket, lock, log): a new one could start without it
    held = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
    assert not [path for path in held if "staticmq-warm-runner" in path], held
    jvm.release()
    _, err = later.communicate(timeout=60)
    # The same end as a runner started as usual (here: the JVM went away before the first command).
    assert later.returncode == usual.returncode != 0
    assert err == usual_err


def test_a_runner_started_with_the_warm_runner_off_starts_no_warm_process(jvm: FakeJvm, tmp_short: str) -> None:
    started_as_usual(jvm, runner_env(jvm, tmp_short, STATICMQ_WARM_RUNNER="0"))
    assert no_warm_process_started(tmp_short)


def test_sigterm_to_the_process_spark_started_ends_the_forked_runner_and_both_report_it(
    jvm: FakeJvm, tmp_short: str
) -> None:
    warmed(jvm, tmp_short)
    stand_in = subprocess.Popen(RUNNER, env=runner_env(jvm, tmp_short), stderr=subprocess.DEVNULL)
    child = jvm.next_pid(1)
    assert child != stand_in.pid
    stand_in.send_signal(signal.SIGTERM)
    assert stand_in.wait(timeout=30) == -signal.SIGTERM
    assert gone(child)


def test_a_forked_runner_ends_when_the_process_spark_started_is_killed(jvm: FakeJvm, tmp_short: str) -> None:
    warmed(jvm, tmp_short)
    stand_in = subprocess.Popen(RUNNER, env=runner_env(jvm, tmp_short), stderr=subprocess.DEVNULL)
    child = jvm.next_pid(1)
    stand_in.kill()
    stand_in.wait(timeout=30)
    assert gone(child)


def test_the_warm_process_ends_with_the_process_that_started_its_first_runner(jvm: FakeJvm, tmp_short: str) -> None:
    env = runner_env(jvm, tmp_short)
    # An owner in place of the JVM: it starts one runner, waits for it and exits.
    code = (
        f"import os, subprocess; os.environ[{warm.OWNER!r}] = str(os.getpid()); "
        f"subprocess.run({RUNNER!r}, stderr=subprocess.DEVNULL)"
    )
    owner = subprocess.Popen([sys.executable, "-c", code], env=env)
    jvm.next_pid(0)
    path = warm_socket(tmp_short)
    assert path.name.startswith(f"{owner.pid}-")
    jvm.release()
    owner.wait(timeout=60)
    deadline = time.monotonic() + 30
    while path.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not path.exists()


def test_runners_share_a_warm_process_only_when_started_alike() -> None:
    env = {"PATH": "/bin", "PYTHONPATH": "/site", "PYTHON_WORKER_FACTORY_SOCK_PATH": "/tmp/.a.sock"}
    base = warm.socket_path(env, "/usr/bin/python3", "/work", 42, "/tmp/d")
    # Only how each runner reaches the JVM differs between the runners of one application.
    same = {**env, "PYTHON_WORKER_FACTORY_SOCK_PATH": "/tmp/.b.sock", "PYTHON_WORKER_FACTORY_PORT": "5"}
    assert warm.socket_path(same, "/usr/bin/python3", "/work", 42, "/tmp/d") == base
    assert base.startswith("/tmp/d/42-")
    others = [
        warm.socket_path({**env, "PYTHONPATH": "/other"}, "/usr/bin/python3", "/work", 42, "/tmp/d"),
        warm.socket_path(env, "/opt/python3", "/work", 42, "/tmp/d"),
        warm.socket_path(env, "/usr/bin/python3", "/elsewhere", 42, "/tmp/d"),
        warm.socket_path(env, "/usr/bin/python3", "/work", 43, "/tmp/d"),
    ]
    assert len({base, *others}) == 5


def test_a_warm_runner_directory_others_can_enter_is_not_used(tmp_path: Path) -> None:
    mine = warm.private_dir(str(tmp_path))
    assert mine is not None and os.stat(mine).st_mode & 0o777 == 0o700
    os.chmod(mine, 0o755)
    assert warm.private_dir(str(tmp_path)) is None


def test_a_runner_whose_parent_is_not_a_jvm_has_no_owner_unless_one_is_named(tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    for pid, command in ((10, "java"), (11, "bash")):
        (proc / str(pid)).mkdir(parents=True)
        (proc / str(pid) / "comm").write_text(command + "\n")
    assert warm.owner_pid({}, 10, str(proc)) == 10
    assert warm.owner_pid({}, 11, str(proc)) is None  # e.g. a shell wrapper that did not exec
    assert warm.owner_pid({}, 12, str(proc)) is None  # gone already
    assert warm.owner_pid({warm.OWNER: "11"}, 11, str(proc)) == 11
    assert warm.owner_pid({warm.OWNER: "x"}, 10, str(proc)) is None
    assert warm.owner_pid({}, 10, str(tmp_path / "no-proc")) == 10  # no /proc to ask


def test_a_runner_started_by_a_process_that_is_not_a_jvm_starts_as_usual(jvm: FakeJvm, tmp_short: str) -> None:
    env = runner_env(jvm, tmp_short)
    del env[warm.OWNER]  # its parent is this test's Python
    started_as_usual(jvm, env)
    assert no_warm_process_started(tmp_short)


def test_a_warm_process_that_answers_nonsense_leaves_the_runner_to_start_as_usual(jvm: FakeJvm, tmp_short: str) -> None:
    env = runner_env(jvm, tmp_short)
    base = warm.private_dir(tmp_short)
    assert base is not None
    path = warm.socket_path(env, sys.executable, os.getcwd(), os.getpid(), base)
    impostor = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    impostor.bind(path)
    impostor.listen(1)

    def answer_nonsense() -> None:
        conn, _ = impostor.accept()
        with conn:
            conn.recv(1 << 16)
            conn.sendall(b"pid twelve\n")

    threading.Thread(target=answer_nonsense, daemon=True).start()
    try:
        started_as_usual(jvm, env)
    finally:
        impostor.close()
