"""The cyclic garbage collector on Spark's Python workers, for the source's read tasks and the
sink's write tasks.

A reused pyspark worker runs a full `gc.collect()` after every task it finished (the loop of
`manager` in `pyspark/daemon.py`), over everything the worker has loaded: pyspark, pyarrow, numpy,
protobuf, grpc, the connector and their data. `freeze_long_lived_heap` moves all that out of the
collector's sight once per process, so the daemon's collection walks only what tasks left since.
Frozen objects are still freed when their last reference goes (reference counting); only a
reference cycle frozen with them is never collected.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T")

_HEAP_FROZEN = False


def freeze_long_lived_heap() -> None:
    """Once per Python worker process: collect, then move every object alive (the modules of
    pyspark, pyarrow, the wire clients, ... and their data) out of the collector's sight (gc.freeze).
    Over the whole heap the daemon's collection took 40-50 ms per task in the sink benchmark
    (10-15 ms over what a task leaves), and 11-15 ms per read task of a running query with small
    triggers, 0.3-0.4 ms frozen (docs/investigations/2026-11-27-source-worker-gc.md). Objects
    alive now are never freed by the cyclic collector, even if they become garbage later: the
    heap of a worker that has imported everything is long-lived by nature."""
    global _HEAP_FROZEN
    if not _HEAP_FROZEN:
        gc.collect()
        gc.freeze()
        _HEAP_FROZEN = True


def frozen_after(items: Iterator[T]) -> Iterator[T]:
    """`items`, then, once they are all through, `freeze_long_lived_heap()`: a read task's rows,
    with the worker's heap frozen after its first read completed, when the backend's client and
    every module a read loads are there (a read that fails leaves the freeze to a later one)."""
    yield from items
    freeze_long_lived_heap()


@contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused for the block. A task's write loop makes no
    reference cycles, but the objects it allocates (per Arrow batch, per request) set off
    collections that walk the whole long-lived heap of the Python worker (pyspark, pyarrow,
    the wire clients): 15-20% of the worker's CPU time in the sink benchmark. Cycles made meanwhile
    are collected when the collector runs again."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
