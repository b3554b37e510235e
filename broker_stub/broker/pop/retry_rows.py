"""Rows that go back through the retry topic or to the DLQ: the original row with its origin
(topic, queue, offset) and reconsume count as properties, and reading those back on pop.
Only failed messages take this path, so a Python pass over properties is acceptable here."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from staticmq_spark.protocol.consume import pop_properties as props
from staticmq_spark.protocol.rows.codec import PackedBatch
from staticmq_spark.protocol.rows.decode import decode_batch
from staticmq_spark.protocol.rows.encode import encode_columns


def revived_rows(
    rows: PackedBatch,
    origin_topic: str,
    queue_ids: npt.NDArray[np.int64],
    offsets: npt.NDArray[np.int64],
    reconsume_times: npt.NDArray[np.int64],
) -> PackedBatch:
    """Copies of `rows` carrying their origin and new reconsume count (origin kept if present)."""
    decoded = decode_batch(rows)
    new_props = []
    for pairs, q, o, r in zip(
        decoded.column("properties").to_pylist(),
        queue_ids.tolist(),
        offsets.tolist(),
        reconsume_times.tolist(),
        strict=True,
    ):
        values = dict(pairs)
        values.setdefault(props.ORIGIN_TOPIC, origin_topic)
        values.setdefault(props.ORIGIN_QUEUE, str(q))
        values.setdefault(props.ORIGIN_OFFSET, str(o))
        values[props.RECONSUME_TIMES] = str(r)
        new_props.append(values)
    return encode_columns(
        decoded.column("body"),
        key=decoded.column("key"),
        tags=decoded.column("tags"),
        properties=new_props,
        born_timestamp=decoded.column("born_timestamp"),
    )


def origin_fields(
    rows: PackedBatch,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(origin queue ids, origin offsets, reconsume counts) of retry-topic rows."""
    column = decode_batch(rows).column("properties")
    return (
        _int_property(column, props.ORIGIN_QUEUE, -1),
        _int_property(column, props.ORIGIN_OFFSET, -1),
        _int_property(column, props.RECONSUME_TIMES, 0),
    )


def _int_property(column: pa.Array, key: str, default: int) -> npt.NDArray[np.int64]:
    values = pc.map_lookup(column, pa.scalar(key), "first")
    ints = pc.cast(values, pa.int64(), safe=False) if len(values) else pa.array([], pa.int64())
    return np.asarray(ints.fill_null(default).to_numpy(zero_copy_only=False), dtype=np.int64)
