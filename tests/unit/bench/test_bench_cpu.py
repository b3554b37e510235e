"""`bench.common.cpu`'s process-tree meter: what a benchmark charges to a system."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from bench.common.cpu import CpuMeter, tree_cpu
from bench.peers.__main__ import rotated

# starts its arguments as a process of their own and exits at once: init adopts that process
LAUNCH = "import subprocess as s, sys; print(s.Popen(sys.argv[1:], stdout=s.DEVNULL, stderr=s.DEVNULL).pid)"
BURN = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\n"


def test_a_process_that_ran_and_exited_during_the_measure_is_counted_in_its_parent() -> None:
    meter = CpuMeter()
    meter.start()
    subprocess.run([sys.executable, "-c", BURN], check=True, timeout=60)
    assert meter.stop() >= 0.25


@contextmanager
def orphan(*argv: str) -> Iterator[int]:
    """`argv` run as a process whose parent exited at once (init adopts it); killed at the end."""
    launcher = subprocess.run(
        [sys.executable, "-c", LAUNCH, *argv], capture_output=True, text=True, check=True, timeout=60
    )
    pid = int(launcher.stdout)
    try:
        yield pid
    finally:
        os.kill(pid, 9)


def test_a_warm_runner_process_counts_in_the_tree_of_its_owner_though_init_is_its_parent() -> None:
    """A process started as `... staticmq_warm_runner serve <socket> <owner pid>` whose parent
    exited (so init adopted it), like the warm runner the first query runner of a session starts."""
    code = BURN + "time.sleep(30)\n"
    with orphan(sys.executable, "-c", code, "staticmq_warm_runner", "serve", "/x.sock", str(os.getpid())) as pid:
        deadline = time.monotonic() + 30
        while tree_cpu().get(pid, 0.0) < 0.25 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert tree_cpu().get(pid, 0.0) >= 0.25


def test_another_orphan_is_not_counted() -> None:
    with orphan(sys.executable, "-c", "import time; time.sleep(30)", "serve", str(os.getpid())) as pid:
        assert pid not in tree_cpu()


def test_rotated_starts_each_round_one_system_later_so_each_takes_every_place() -> None:
    systems = ["staticmq", "kafka", "rocketmq"]
    rounds = [rotated(systems, run) for run in range(3)]
    assert rounds == [systems, ["kafka", "rocketmq", "staticmq"], ["rocketmq", "staticmq", "kafka"]]
    assert rotated(systems, 3) == systems
