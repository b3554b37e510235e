"""A sink task driven as the Spark sink drives it: the rows placed above the seam
(staticmq_spark/sink/placement.py), then written by the backend's sink writer."""

from __future__ import annotations

import pyarrow as pa

from staticmq_spark.backends import SinkWriter, TaskWrite
from staticmq_spark.backends.types import WriteSettings
from staticmq_spark.sink.placement import placed_rows


def write_task(
    sink: SinkWriter, settings: WriteSettings, writer: str, batch: int, partition: int, batches: list[pa.RecordBatch]
) -> TaskWrite:
    placed = placed_rows(settings.topic, sink.total_queues, partition, iter(batches))
    return sink.write_task(settings, writer, batch, partition, placed)
