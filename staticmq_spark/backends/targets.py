"""Where each row of a batch goes: the routing rule of every producer path (the Producers and the
Spark sink). An explicit queue wins; else a key maps to hash(key) mod total_queues
(staticmq_spark.hashing); else the row is keyless (KEYLESS): the sink places it by its own rule
(sink/placement.py), a Producer by its backend's queue selection (staticmq: the selector's
available and reachable queues; RocketMQ: one queue per send, round robin)."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from staticmq_spark.errors import QueueNotFoundError
from staticmq_spark.hashing import queues_for_keys
from staticmq_spark.protocol.rows import arrays
from staticmq_spark.protocol.rows.codec import PackedBatch, take_rows

KEYLESS = -1


def row_targets(topic: str, total: int, n: int, keys: Any = None, queues: Any = None) -> npt.NDArray[np.int64]:
    """Target queue index of each of n rows (KEYLESS where the selector decides)."""
    if total <= 0:
        raise QueueNotFoundError(f"topic {topic!r} has no writable queue")
    targets = np.full(n, KEYLESS, dtype=np.int64)
    explicit = None if queues is None else np.asarray(queues, dtype=np.int64)
    if keys is not None and (explicit is None or not bool(np.all(explicit >= 0))):  # keys a queue overrides: unhashed
        key_arr = keys if isinstance(keys, pa.Array | pa.ChunkedArray) else pa.array(list(keys), pa.string())
        if isinstance(key_arr, pa.ChunkedArray):
            key_arr = key_arr.combine_chunks()
        hashed = queues_for_keys(key_arr, total).astype(np.int64)
        targets = np.where(arrays.valid(key_arr), hashed, targets)
    if explicit is not None:
        targets = np.where(explicit >= 0, explicit, targets)
    bad = targets[(targets < KEYLESS) | (targets >= total)]
    if bad.size:
        raise QueueNotFoundError(f"topic {topic!r} has {total} queues; queue {int(bad[0])} does not exist")
    return targets


def target_runs(targets: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64] | None, list[tuple[int, int, int]]]:
    """The one grouping of rows by target: `(order, runs)` where `order` sorts the rows by target
    (stable: a queue's rows keep their input order; None when every row has the same target) and
    each run `(target, a, b)` covers positions [a, b) of the sorted rows."""
    n = len(targets)
    if n == 0:
        return None, []
    first = int(targets[0])
    if bool(np.all(targets == first)):
        return None, [(first, 0, n)]
    order = np.argsort(targets, kind="stable")
    ordered = targets[order]
    cuts = [0, *(np.flatnonzero(np.diff(ordered)) + 1).tolist(), n]
    return order, [(int(ordered[a]), a, b) for a, b in itertools.pairwise(cuts)]


def group_rows(
    packed: PackedBatch, targets: npt.NDArray[np.int64]
) -> list[tuple[int, PackedBatch, npt.NDArray[np.int64]]]:
    """Rows grouped by target queue (with their input row indices), order kept within a group."""
    order, runs = target_runs(targets)
    if order is None:
        return [(target, packed, np.arange(packed.count, dtype=np.int64)) for target, _, _ in runs]
    ordered = take_rows(packed, order)
    return [(target, ordered.slice(a, b), order[a:b]) for target, a, b in runs]
