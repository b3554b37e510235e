"""Pulled messages as columns: what every backend hands the Spark reader (no per-message objects)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa

I64 = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class MessageColumns:
    """`columns` in protocol.codec.DECODED_SCHEMA (key, tags, body, properties, born_timestamp),
    with each message's physical queue offset and store time (ms)."""

    columns: pa.RecordBatch
    queue_offsets: I64
    store_timestamps: I64

    @property
    def count(self) -> int:
        return int(self.columns.num_rows)
