"""Server-side tag filters applied: the tag codes broker_stub keeps in each consume-queue entry
to apply a subscription expression (`tag_expression`) without reading skipped messages, and the
exact match of received messages by their tag column. Shared by the brokers, the backends and the
Spark source's executors.

A broker filters by code (a hash: two tags can share one), so a reader filters the messages it
receives once more by their tag (`tag_matches`), as RocketMQ's own clients do.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from staticmq_spark.errors import InvalidArgumentError
from staticmq_spark.protocol.consume.tag_expression import TagFilter
from staticmq_spark.protocol.rows import arrays
from staticmq_spark.protocol.rows.codec import FLAG_TAGS, PackedBatch
from staticmq_spark.protocol.rows.decode import parse_headers, tags_of
from staticmq_spark.protocol.rows.murmur3 import murmur3_32_many

# Consume-queue entry codes (the entry's int32 `flags`): UNKNOWN for entries written before tag
# codes existed (a filter keeps them: the reader checks their tag), NO_TAG for a message without a
# tag, else TAGGED | the tag's murmur3 in the low 31 bits.
UNKNOWN = 0
NO_TAG = 1
TAGGED = -(2**31)  # the sign bit of an int32

Int32Array = npt.NDArray[np.int32]


def filter_codes(wanted: TagFilter) -> Int32Array:
    """The consume-queue codes a broker keeps for a filter (UNKNOWN entries are kept too)."""
    if wanted.tags is None:
        raise InvalidArgumentError("a filter that takes every message has no codes")
    return tag_codes(arrays.strings(sorted(wanted.tags)))


def tag_matches(wanted: TagFilter, tags: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Which messages (by their tag column) pass the filter exactly."""
    if wanted.tags is None:
        return arrays.flags(np.ones(len(tags), dtype=bool))
    column = tags if isinstance(tags, pa.Array) else tags.combine_chunks()
    keep = pc.is_in(column, value_set=arrays.strings(sorted(wanted.tags)))  # a null tag is not in the set
    return keep if not keep.null_count else pc.coalesce(keep, arrays.flags(np.zeros(len(keep), dtype=bool)))


def tag_codes(tags: pa.Array | pa.ChunkedArray) -> Int32Array:
    """Each message's consume-queue code from its tag (null or empty: NO_TAG)."""
    if isinstance(tags, pa.ChunkedArray):
        tags = tags.combine_chunks()
    hashed = (murmur3_32_many(tags) & np.uint32(0x7FFFFFFF)).astype(np.int64) + TAGGED
    # lengths from the offsets, nulls as empty: no compute kernel with a Python scalar, which would
    # import pandas (half a second of a broker's first send, under its append lock)
    values = arrays.large_binary_nulls_empty(tags.cast(pa.large_binary()))
    offsets = np.frombuffer(values.buffers()[1], dtype=np.int64, count=values.offset + len(values) + 1)
    present = np.diff(offsets[values.offset :]) > 0
    return np.where(present, hashed, NO_TAG).astype(np.int32)


def batch_tag_codes(batch: PackedBatch, header: npt.NDArray[Any] | None = None) -> Int32Array:
    """Each row's consume-queue code of a packed batch; NO_TAG for all, without hashing, when no
    row has a tag (the common case). `header`: the batch's parse_headers (validate_batch returns
    it), when the caller has it."""
    if header is None:
        header = parse_headers(batch)
    if not (header["flags"] & FLAG_TAGS).any():
        return np.full(batch.count, NO_TAG, dtype=np.int32)
    return tag_codes(tags_of(batch, header))


def kept_by_codes(entry_codes: Int32Array, wanted: Int32Array) -> npt.NDArray[np.bool_]:
    """Consume-queue entries a broker answers for a filter with `wanted` codes."""
    kept: npt.NDArray[np.bool_] = (entry_codes == UNKNOWN) | np.isin(entry_codes, wanted)
    return kept
