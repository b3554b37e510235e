"""CPU time from /proc (Linux), read one way for every benchmark: user + system seconds of
processes and threads, from the fields of /proc/<pid>/stat.

Two views of it:
- a process tree (`tree_cpu`, `CpuMeter`, `cpu_of`): each system is charged for all its processes
  (`bench.peers`, `bench.rocketmq_ceiling`);
- groups of processes and JVM threads (`cpu_sample`, `cpu_spent`, `wait_reaped`; `bench.delta`):

      before = cpu_sample(); run(); spent = cpu_spent(before, cpu_sample())

  Groups: the Spark JVM's threads by role (tasks, JIT compiler, GC, other), the processes the JVM
  started and reaped during the run (`jvm children`: pyspark's per-query streaming-source process),
  pyspark's Python workers, the staticmq brokers and name server, and kernel threads (loopback
  networking, disk I/O). Processes that exit inside the interval and are not reaped by the JVM are
  not counted (pyspark's daemons reap their forked workers themselves: their time appears when the
  daemon's worker is reused, i.e. in `python workers`).
"""

from __future__ import annotations

import os
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator

TICK = os.sysconf("SC_CLK_TCK")
JVM_MAIN = "org.apache.spark.deploy.SparkSubmit"  # the Spark driver JVM's main class, in its command line
STREAMING_SOURCE_PROCESS = "python_streaming_source_runner"  # pyspark's per-query driver-side process
Sample = dict[tuple[str, str], float]  # (pid or pid/tid, group) -> CPU seconds so far

JVM_THREAD_GROUPS = (
    ("Executor task", "jvm tasks"),
    ("C2 Compiler", "jvm jit"),
    ("C1 Compiler", "jvm jit"),
    ("VM Thread", "jvm gc"),
    ("GC Thread", "jvm gc"),
)

# ------------------------------------------------------------------------------ reading /proc


def _stat_fields(path: str) -> tuple[str, list[str]] | None:
    """(name, fields after the name) of a /proc/.../stat file; None when the process or thread is gone."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError:  # the process or thread exited meanwhile
        return None
    return text[text.index("(") + 1 : text.rindex(")")], text.rsplit(")", 1)[1].split()


def _seconds(fields: list[str], children: bool = False) -> float:
    """utime + stime (or, `children`, the reaped children's cutime + cstime) in seconds."""
    first = 13 if children else 11
    return (int(fields[first]) + int(fields[first + 1])) / TICK


def _pids() -> Iterator[str]:
    return filter(str.isdigit, os.listdir("/proc"))


# ------------------------------------------------------------------------------ process trees


def tree_cpu(root: int | None = None, exclude: Iterable[int] = ()) -> dict[int, float]:
    """CPU-seconds of every live process under `root` (this one by default), `exclude`d subtrees left
    out, each with what its reaped children spent (cutime + cstime): a process that ran and exited
    under a live one (a query's runner, a Python worker the daemon reaped) is counted in its
    parent. staticmq's warm runner processes (`staticmq_warm_runner serve <socket> <owner pid>`)
    belong to the tree of their owner, the driver's JVM, though their parent is init: they fork
    each query's runner."""
    stats: dict[int, tuple[int, float]] = {}  # pid -> (parent pid, CPU-seconds)
    owners: dict[int, list[int]] = defaultdict(list)  # owner pid -> its warm runner processes
    for name in _pids():
        if (stat := _stat_fields(f"/proc/{name}/stat")) is not None:
            stats[int(name)] = int(stat[1][1]), _seconds(stat[1]) + _seconds(stat[1], children=True)
            if stat[0].startswith("python"):
                owner = _warm_runner_owner(name)
                if owner is not None:
                    owners[owner].append(int(name))
    skip = set(exclude)
    keep: dict[int, float] = {}
    frontier = [root or os.getpid()]
    while frontier:
        pid = frontier.pop()
        if pid in skip or pid not in stats or pid in keep:
            continue
        keep[pid] = stats[pid][1]
        frontier.extend(child for child, (parent, _) in stats.items() if parent == pid)
        frontier.extend(owners.get(pid, ()))
    return keep


def _warm_runner_owner(pid: str) -> int | None:
    """The owner pid of a staticmq warm runner process, None for any other process."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        return None
    if b"staticmq_warm_runner" in argv and b"serve" in argv:
        last = [a for a in argv if a][-1]
        return int(last) if last.isdigit() else None
    return None


def descendants(root: int | None = None) -> set[int]:
    me = root or os.getpid()
    return set(tree_cpu(me)) - {me}


def cpu_of(pids: Iterable[int]) -> float:
    """CPU-seconds so far of the processes `pids` and their children."""
    return sum(sum(tree_cpu(pid).values()) for pid in pids)


class CpuMeter:
    """CPU-seconds spent by the tree (`tree_cpu`) between start() and stop(), processes started
    and ended in between included."""

    def __init__(self, exclude: Iterable[int] = ()) -> None:
        self.exclude = set(exclude)
        self.before: dict[int, float] = {}

    def start(self) -> None:
        self.before = tree_cpu(exclude=self.exclude)

    def stop(self) -> float:
        """The tree's CPU-seconds now less at start(): a process gone meanwhile was reaped by one
        in the tree, whose reaped children's time now holds all of it (before start() too)."""
        return sum(tree_cpu(exclude=self.exclude).values()) - sum(self.before.values())


# ------------------------------------------------------------------- groups of processes and threads


def _processes() -> Iterator[tuple[str, str, list[str]]]:
    """(pid, command line with spaces, fields of /proc/pid/stat after the name) of every process."""
    for pid in _pids():
        stat = _stat_fields(f"/proc/{pid}/stat")
        try:
            with open(f"/proc/{pid}/cmdline") as f:
                cmdline = f.read().replace("\0", " ")
        except OSError:
            continue
        if stat is not None:
            yield pid, cmdline, stat[1]


def _group(cmdline: str) -> str | None:
    if "pyspark.daemon" in cmdline or "pyspark.worker" in cmdline:
        return "python workers"
    if "staticmq_spark" in cmdline and ("broker" in cmdline or "namesrv" in cmdline or "cluster" in cmdline):
        return "staticmq cluster"
    if not cmdline:
        return "kernel"
    return None


def cpu_sample() -> Sample:
    """CPU seconds (user + system) of every process and JVM thread of interest, now."""
    sample: Sample = {}
    for pid, cmdline, fields in _processes():
        if JVM_MAIN in cmdline:
            _jvm(pid, fields, sample)
            continue
        group = _group(cmdline)
        if group is not None:
            sample[(pid, group)] = _seconds(fields)
    return sample


def _jvm(pid: str, fields: list[str], sample: Sample) -> None:
    sample[(pid, "jvm children")] = _seconds(fields, children=True)  # reaped: cutime + cstime
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return
    for tid in tids:
        thread = _stat_fields(f"/proc/{pid}/task/{tid}/stat")
        if thread is None:
            continue
        name, thread_fields = thread
        group = next((g for prefix, g in JVM_THREAD_GROUPS if name.startswith(prefix)), "jvm other")
        sample[(f"{pid}/{tid}", group)] = _seconds(thread_fields)


def cpu_spent(before: Sample, after: Sample) -> dict[str, float]:
    """CPU seconds per group between two samples (processes started meanwhile count from zero)."""
    spent: defaultdict[str, float] = defaultdict(float)
    for key, seconds in after.items():
        spent[key[1]] += seconds - before.get(key, 0.0)
    return {group: round(seconds, 2) for group, seconds in sorted(spent.items()) if seconds > 0.005}


def _pending(cmdline_part: str) -> bool:
    """A child of the Spark JVM runs `cmdline_part`, or is exiting (empty command line) unreaped."""
    procs = [(pid, cmdline, fields[1]) for pid, cmdline, fields in _processes()]
    jvms = {pid for pid, cmdline, _ in procs if JVM_MAIN in cmdline}
    return any(ppid in jvms and (cmdline_part in cmdline or not cmdline) for _, cmdline, ppid in procs)


def wait_reaped(cmdline_part: str, timeout_s: float = 5.0) -> None:
    """Wait until the Spark JVM has no child running `cmdline_part` nor one exiting unreaped (its
    CPU time then counts in `jvm children`): Spark stops a query's processes after it returns."""
    deadline = time.monotonic() + timeout_s
    while _pending(cmdline_part) and time.monotonic() < deadline:
        time.sleep(0.05)  # polling /proc: there is nothing to wait on for another process's child
