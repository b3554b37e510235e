"""Where each row the sink writes lands: the one placement rule of the sink, the same on every
backend, computed before any backend sees the rows (docs/sink.md, "Where rows land").

- an explicit `queueId`: that logic queue;
- else a key: `murmur3(key) mod totalQueues` (staticmq_spark.hashing), never another queue;
- else (a keyless row): round robin over the logic queues from the task's partition, row i of
  Spark partition p (rows numbered from 0 in the task's input order) to `(p + i) mod totalQueues`.
  It needs no broker state, spreads every task's rows evenly, starts each partition on another
  queue, and places the rows of a re-run micro-batch (same input) where the first run placed them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from staticmq_spark.backends.targets import KEYLESS, row_targets
from staticmq_spark.backends.types import SinkRows
from staticmq_spark.errors import InvalidBatchError
from staticmq_spark.protocol.rows import arrays


def keyless_targets(partition: int, numbers: npt.NDArray[np.int64], total: int) -> npt.NDArray[np.int64]:
    """The logic queue of keyless rows numbered `numbers` in a task of Spark partition `partition`."""
    return (partition + numbers) % total


def place(topic: str, total: int, partition: int, rb: pa.RecordBatch, first: int) -> SinkRows:
    """One input batch's rows (numbered from `first` in its task), read once and placed."""
    names = set(rb.schema.names)
    n = rb.num_rows
    value = rb.column("value")
    if value.null_count:
        row = first + int(np.flatnonzero(~arrays.valid(value))[0])
        raise InvalidBatchError(f"row {row} of the task writing {topic!r}: `value` is null (every row needs a value)")
    key = rb.column("key") if "key" in names else None
    explicit = arrays.int64_filled(rb.column("queueId"), KEYLESS) if "queueId" in names else None
    targets = row_targets(topic, total, n, key, explicit)
    keyless = np.flatnonzero(targets == KEYLESS)
    if keyless.size:
        targets[keyless] = keyless_targets(partition, keyless + first, total)
    return SinkRows(
        value=value if pa.types.is_binary(value.type) else value.cast(pa.binary()),
        key=key,
        tags=rb.column("tags") if "tags" in names else None,
        properties=rb.column("properties") if "properties" in names else None,
        targets=targets,
        first=first,
    )


def placed_rows(
    topic: str, total_queues: Callable[[str], int], partition: int, batches: Iterator[pa.RecordBatch]
) -> Iterator[SinkRows]:
    """A task's input batches, placed; empty batches are skipped. `total_queues(topic)` is asked
    once, at the first row (a task without rows asks nothing of the cluster)."""
    first = 0
    total = 0
    for rb in batches:
        if rb.num_rows:
            total = total or total_queues(topic)
            yield place(topic, total, partition, rb, first)
            first += rb.num_rows
