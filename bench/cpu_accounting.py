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
from collections.abc import Iterator

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


def _stat_fields(path: str) -> tuple[str, list[str]] | None:
    try:
        with open(path) as f:
            text = f.read()
    except OSError:  # the process or thread exited meanwhile
        return None
    return text[text.index("(") + 1 : text.rindex(")")], text.rsplit(")", 1)[1].split()


def _processes() -> Iterator[tuple[str, str, list[str]]]:
    """(pid, command line with spaces, fields of /proc/pid/stat after the name) of every process."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
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
    tick = os.sysconf("SC_CLK_TCK")
    sample: Sample = {}
    for pid, cmdline, fields in _processes():
        if JVM_MAIN in cmdline:
            _jvm(pid, fields, tick, sample)
            continue
        group = _group(cmdline)
        if group is not None:
            sample[(pid, group)] = (int(fields[11]) + int(fields[12])) / tick
    return sample


def _jvm(pid: str, fields: list[str], tick: int, sample: Sample) -> None:
    sample[(pid, "jvm children")] = (int(fields[13]) + int(fields[14])) / tick  # reaped: cutime + cstime
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
        sample[(f"{pid}/{tid}", group)] = (int(thread_fields[11]) + int(thread_fields[12])) / tick


def cpu_spent(before: Sample, after: Sample) -> dict[str, float]:
    """CPU seconds per group between two samples (processes started meanwhile count from zero)."""
    spent: Counter[str] = Counter()
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
