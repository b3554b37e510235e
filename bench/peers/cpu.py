"""CPU-seconds of a process tree (user + system, from /proc), so each system is charged for all its processes."""

from __future__ import annotations

import os
from collections.abc import Iterable

TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, CPU-seconds) of a live process, None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / TICK


def tree_cpu(root: int | None = None, exclude: Iterable[int] = ()) -> dict[int, float]:
    """CPU-seconds of every live process under `root` (this one by default), `exclude`d subtrees left out."""
    stats = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (s := _stat(int(name))) is not None:
            stats[int(name)] = s
    skip = set(exclude)
    keep, frontier = {}, [root or os.getpid()]
    while frontier:
        pid = frontier.pop()
        if pid in skip or pid not in stats:
            continue
        keep[pid] = stats[pid][1]
        frontier.extend(child for child, (parent, _) in stats.items() if parent == pid)
    return keep


def descendants(root: int | None = None) -> set[int]:
    me = root or os.getpid()
    return set(tree_cpu(me)) - {me}


class CpuMeter:
    """CPU-seconds spent by the tree between start() and stop(), processes started in between counted whole."""

    def __init__(self, exclude: Iterable[int] = ()) -> None:
        self.exclude = set(exclude)
        self.before: dict[int, float] = {}

    def start(self) -> None:
        self.before = tree_cpu(exclude=self.exclude)

    def stop(self) -> float:
        after = tree_cpu(exclude=self.exclude)
        return sum(seconds - self.before.get(pid, 0.0) for pid, seconds in after.items())
