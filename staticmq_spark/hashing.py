"""The one key -> logic queue function of staticmq.

    logic_queue = murmur3_x86_32(utf8(key), seed=0) mod total_queues

MurmurHash3 x86 32-bit (Austin Appleby's reference), seed 0, over the UTF-8 bytes of the key, the
32-bit result read as unsigned. It is the same function in every producer path: the Python
Producer, the Spark sink (vectorized over Arrow columns) and the command line. A key therefore
lands in the same logic queue whatever brokers come and go.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from staticmq_spark.protocol.rows.murmur3 import murmur3_32, murmur3_32_many


def queue_for_key(key: str, total_queues: int) -> int:
    """The logic queue of one key."""
    if total_queues <= 0:
        raise ValueError(f"total_queues must be positive, got {total_queues}")
    return murmur3_32(key.encode()) % total_queues


def queues_for_keys(keys: Any, total_queues: int) -> npt.NDArray[np.int32]:
    """The logic queue of every key of a string Arrow array (vectorized)."""
    if total_queues <= 0:
        raise ValueError(f"total_queues must be positive, got {total_queues}")
    return (murmur3_32_many(keys) % np.uint32(total_queues)).astype(np.int32)
