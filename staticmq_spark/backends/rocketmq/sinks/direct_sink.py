"""The sink on a backend without two-phase staging (Apache RocketMQ): at least once, with a dedup key.

Each task sends its rows straight to their logic queues (murmur3(key) mod totalQueues, as on
staticmq). Rows become visible as they are sent, so a micro-batch that Spark re-runs after a
failure (a driver killed between the tasks' sends and the checkpoint's commit) is written again.
Every row carries the user property `staticmq_row_id` = `<query id>:<batch id>:<partition>:<row>`,
the same on every re-run of the same micro-batch (given a deterministic plan): a reader drops
duplicates on it. RocketMQ's own transactional messages are not used (see docs/rocketmq.md).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from staticmq_spark.backends.api import AT_LEAST_ONCE, TaskWrite
from staticmq_spark.backends.rocketmq.client_instance import RocketMQClientInstance
from staticmq_spark.backends.rocketmq.producer import RocketMQProducer
from staticmq_spark.backends.types import SinkRows, WriteSettings
from staticmq_spark.protocol.rows import arrays

log = logging.getLogger(__name__)
ROW_ID = "staticmq_row_id"
_EMPTY, _ROW_ID, _TRUE = arrays.scalar(""), arrays.scalar(ROW_ID), arrays.scalar(True)


def row_ids(writer: str, batch: int, partition: int, first: int, n: int) -> pa.Array:
    prefix = arrays.scalar(f"{writer}:{batch}:{partition}:")
    numbers = arrays.numbers(np.arange(first, first + n, dtype=np.int64)).cast(pa.string())
    return pc.binary_join_element_wise(prefix, numbers, _EMPTY)


def with_row_ids(props: pa.Array | None, ids: pa.Array) -> pa.Array:
    """The user's properties map plus `staticmq_row_id` (which wins over a user value)."""
    n = len(ids)
    map_type = pa.map_(pa.string(), pa.string())
    if props is None:
        offsets = arrays.numbers(np.arange(n + 1, dtype=np.int32))
        return pa.MapArray.from_arrays(offsets, arrays.repeated(ROW_ID, n), ids)
    props = props.cast(map_type)
    pairs = pa.StructArray.from_arrays([props.keys, props.items], ["key", "value"])  # not sliced; offsets are
    as_list = pa.ListArray.from_arrays(props.offsets, pairs)  # a null map: no entries (a list, not null)
    entries = pc.list_flatten(as_list)
    parents = arrays.int64_values(pc.list_parent_indices(as_list))
    flat_keys, flat_items = entries.field(0), entries.field(1)
    user = arrays.flag_values(pc.not_equal(flat_keys, _ROW_ID).fill_null(_TRUE))
    keep = arrays.flags(user)
    keys = pa.concat_arrays([flat_keys.filter(keep), arrays.repeated(ROW_ID, n)])
    items = pa.concat_arrays([flat_items.filter(keep), ids.cast(pa.string())])
    owner = np.concatenate([parents[user], np.arange(n, dtype=np.int64)])
    order = arrays.numbers(np.argsort(owner, kind="stable"))
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(np.bincount(owner, minlength=n), out=offsets[1:])
    return pa.MapArray.from_arrays(arrays.numbers(offsets), keys.take(order), items.take(order))


def write_direct(
    producer: RocketMQProducer, opts: WriteSettings, writer: str, batch: int, partition: int, rows: Iterator[SinkRows]
) -> TaskWrite:
    written = 0
    for placed in rows:
        ids = row_ids(writer, batch, partition, placed.first, placed.num_rows)
        producer.send_batch(
            opts.topic,
            placed.value,
            keys=placed.key,
            tags=placed.tags,
            properties=with_row_ids(placed.properties, ids),
            queues=placed.targets,
        )
        written += placed.num_rows
    return TaskWrite(writer, batch, partition, written)


class RocketMQDirectSink:
    """At least once: each task sends its rows straight to their logic queues."""

    guarantee = AT_LEAST_ONCE

    def __init__(self, instance: RocketMQClientInstance) -> None:
        self._producer = RocketMQProducer(instance)

    def total_queues(self, topic: str) -> int:
        return self._producer.route(topic).total_queues

    def write_task(
        self, settings: WriteSettings, writer: str, batch: int, partition: int, rows: Iterator[SinkRows]
    ) -> TaskWrite:
        return write_direct(self._producer, settings, writer, batch, partition, rows)

    def commit(self, settings: WriteSettings, writer: str, batch: int, tasks: Sequence[TaskWrite]) -> int:
        return 0  # sent rows are visible already

    def aborted(self) -> str:
        return "rows its tasks sent stay visible (at least once)"

    def close(self) -> None:
        self._producer.close()
