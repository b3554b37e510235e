"""Where a run's CPU goes, from /proc (Linux): seconds per group of processes and JVM threads.

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
from collections import Counter

STREAMING_SOURCE_PROCESS = "python_streaming_source_runner"  # pyspark's per-query driver-side process
Sample = dict[tuple[str, str], float]  # (pid or pid/tid, group) -> CPU seconds so far

JVM_THREAD_GROUPS = (
    ("Executor task", "jvm tasks"),
    ("C2 Compiler", "jvm jit"),
    ("C1 Compiler", "jvm jit"),
    ("VM Thread", "jvm gc"),
    ("GC Thread", "jvm gc"),
)


def _stat_fields(path: str) -> tuple[str, list[str]] | None:
    try:
        with open(path) as f:
            text = f.read()
    except OSError:  # the process or thread exited meanwhile
        return None
    return text[text.index("(") + 1 : text.rindex(")")], text.rsplit(")", 1)[1].split()


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
    tick = os.sysconf("SC_CLK_TCK")
    sample: Sample = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline") as f:
                cmdline = f.read().replace("\0", " ")
        except OSError:
            continue
        if "org.apache.spark.deploy.SparkSubmit" in cmdline:
            _jvm(pid, tick, sample)
            continue
        group = _group(cmdline)
        stat = _stat_fields(f"/proc/{pid}/stat")
        if group is None or stat is None:
            continue
        sample[(pid, group)] = (int(stat[1][11]) + int(stat[1][12])) / tick
    return sample


def _jvm(pid: str, tick: int, sample: Sample) -> None:
    stat = _stat_fields(f"/proc/{pid}/stat")
    if stat is not None:  # children the JVM reaped: cutime + cstime
        sample[(pid, "jvm children")] = (int(stat[1][13]) + int(stat[1][14])) / tick
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return
    for tid in tids:
        thread = _stat_fields(f"/proc/{pid}/task/{tid}/stat")
        if thread is None:
            continue
        name, fields = thread
        group = next((g for prefix, g in JVM_THREAD_GROUPS if name.startswith(prefix)), "jvm other")
        sample[(f"{pid}/{tid}", group)] = (int(fields[11]) + int(fields[12])) / tick


def cpu_spent(before: Sample, after: Sample) -> dict[str, float]:
    """CPU seconds per group between two samples (processes started meanwhile count from zero)."""
    spent: Counter[str] = Counter()
    for key, seconds in after.items():
        spent[key[1]] += seconds - before.get(key, 0.0)
    return {group: round(seconds, 2) for group, seconds in sorted(spent.items()) if seconds > 0.005}


def _pending(cmdline_part: str) -> bool:
    """A child of the Spark JVM runs `cmdline_part`, or is exiting (empty command line) unreaped."""
    procs: dict[str, tuple[str, str]] = {}  # pid -> (parent pid, command line)
    for pid in filter(str.isdigit, os.listdir("/proc")):
        stat = _stat_fields(f"/proc/{pid}/stat")
        try:
            with open(f"/proc/{pid}/cmdline") as f:
                cmdline = f.read()
        except OSError:
            continue
        if stat is not None:
            procs[pid] = (stat[1][1], cmdline)
    jvms = {pid for pid, (_, cmdline) in procs.items() if "org.apache.spark.deploy.SparkSubmit" in cmdline}
    return any(ppid in jvms and (cmdline_part in cmdline or not cmdline) for ppid, cmdline in procs.values())


def wait_reaped(cmdline_part: str, timeout_s: float = 5.0) -> None:
    """Wait until the Spark JVM has no child running `cmdline_part` nor one exiting unreaped (its
    CPU time then counts in `jvm children`): Spark stops a query's processes after it returns."""
    deadline = time.monotonic() + timeout_s
    while _pending(cmdline_part) and time.monotonic() < deadline:
        time.sleep(0.05)  # polling /proc: there is nothing to wait on for another process's child
