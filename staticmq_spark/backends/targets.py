"""Where each row of a batch goes: the one routing rule of every producer path (the Producer
and the Spark sink). An explicit queue wins; else a key maps to hash(key) mod total_queues
(staticmq_spark.hashing); else the row is keyless (KEYLESS) and the selector picks."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from staticmq_spark.errors import QueueNotFoundError
from staticmq_spark.hashing import queues_for_keys
from staticmq_spark.protocol.codec import PackedBatch, take_rows

KEYLESS = -1


def row_targets(topic: str, total: int, n: int, keys: Any = None, queues: Any = None) -> npt.NDArray[np.int64]:
    """Target queue index of each of n rows (KEYLESS where the selector decides)."""
    if total <= 0:
        raise QueueNotFoundError(f"topic {topic!r} has no writable queue")
    targets = np.full(n, KEYLESS, dtype=np.int64)
    if keys is not None:
        key_arr = keys if isinstance(keys, pa.Array | pa.ChunkedArray) else pa.array(list(keys), pa.string())
        hashed = queues_for_keys(key_arr, total).astype(np.int64)
        valid = np.asarray(key_arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        targets = np.where(valid, hashed, targets)
    if queues is not None:
        explicit = np.asarray(queues, dtype=np.int64)
        targets = np.where(explicit >= 0, explicit, targets)
    bad = targets[(targets < KEYLESS) | (targets >= total)]
    if bad.size:
        raise QueueNotFoundError(f"topic {topic!r} has {total} queues; queue {int(bad[0])} does not exist")
    return targets


def group_rows(
    packed: PackedBatch, targets: npt.NDArray[np.int64]
) -> list[tuple[int, PackedBatch, npt.NDArray[np.int64]]]:
    """Rows grouped by target queue (with their input row indices), order kept within a group."""
    first = int(targets[0])
    if bool(np.all(targets == first)):
        return [(first, packed, np.arange(packed.count, dtype=np.int64))]
    order = np.argsort(targets, kind="stable")
    ordered = take_rows(packed, order)
    sorted_targets = targets[order]
    cuts = np.flatnonzero(np.diff(sorted_targets)) + 1
    bounds = [0, *cuts.tolist(), len(order)]
    return [(int(sorted_targets[a]), ordered.slice(a, b), order[a:b]) for a, b in itertools.pairwise(bounds)]
