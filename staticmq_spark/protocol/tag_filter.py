"""Server-side tag filters: RocketMQ's subscription expression (`*`, or `TagA || TagB`) and the
tag codes broker_stub keeps in each consume-queue entry to apply it without reading skipped
messages. Pure: shared by the brokers, the backends and the Spark source.

A broker filters by code (a hash: two tags can share one), so a reader filters the messages it
receives once more by their tag (`TagFilter.matches`), as RocketMQ's own clients do.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from staticmq_spark.errors import InvalidArgumentError
from staticmq_spark.hashing import murmur3_32_many

ALL = "*"
SEPARATOR = "||"
# Consume-queue entry codes (the entry's int32 `flags`): UNKNOWN for entries written before tag
# codes existed (a filter keeps them: the reader checks their tag), NO_TAG for a message without a
# tag, else TAGGED | the tag's murmur3 in the low 31 bits.
UNKNOWN = 0
NO_TAG = 1
TAGGED = -(2**31)  # the sign bit of an int32

Int32Array = npt.NDArray[np.int32]


@dataclass(frozen=True, slots=True)
class TagFilter:
    """`tags` None: every message; else the messages whose tag is one of `tags`."""

    expression: str
    tags: frozenset[str] | None

    @property
    def takes_all(self) -> bool:
        return self.tags is None

    def codes(self) -> Int32Array:
        """The consume-queue codes a broker keeps (UNKNOWN entries are kept too)."""
        if self.tags is None:
            raise InvalidArgumentError("a filter that takes every message has no codes")
        return tag_codes(pa.array(sorted(self.tags), pa.string()))

    def matches(self, tags: pa.Array | pa.ChunkedArray) -> pa.Array:
        """Which messages (by their tag column) pass the filter exactly."""
        if self.tags is None:
            return pa.array(np.ones(len(tags), dtype=bool))
        keep = pc.is_in(tags, value_set=pa.array(sorted(self.tags), pa.string()))
        return keep.fill_null(False) if isinstance(keep, pa.Array) else keep.combine_chunks().fill_null(False)


EVERYTHING = TagFilter(ALL, None)


def parse_tag_expression(expression: str | None) -> TagFilter:
    """RocketMQ's TAG expression: empty or `*` takes everything; else tags joined by `||`
    (spaces around each tag ignored, as `FilterAPI.buildSubscriptionData` does)."""
    text = (expression or "").strip()
    if text in ("", ALL):
        return EVERYTHING
    tags = [t.strip() for t in text.split(SEPARATOR)]
    named = [t for t in tags if t]
    if not named:
        raise InvalidArgumentError(f"tag expression {expression!r} names no tag (use '*' for every message)")
    bad = [t for t in named if t == ALL or any(c in t for c in "|\x00")]
    if bad:
        raise InvalidArgumentError(f"tag expression {expression!r}: {bad[0]!r} is not a tag name")
    return TagFilter(text, frozenset(named))


def tag_codes(tags: pa.Array | pa.ChunkedArray) -> Int32Array:
    """Each message's consume-queue code from its tag (null or empty: NO_TAG)."""
    if isinstance(tags, pa.ChunkedArray):
        tags = tags.combine_chunks()
    hashed = (murmur3_32_many(tags) & np.uint32(0x7FFFFFFF)).astype(np.int64) + TAGGED
    present = np.asarray(pc.fill_null(pc.greater(pc.binary_length(tags.cast(pa.binary())), 0), False), dtype=bool)
    return np.where(present, hashed, NO_TAG).astype(np.int32)


def kept_by_codes(entry_codes: Int32Array, wanted: Int32Array) -> npt.NDArray[np.bool_]:
    """Consume-queue entries a broker answers for a filter with `wanted` codes."""
    kept: npt.NDArray[np.bool_] = (entry_codes == UNKNOWN) | np.isin(entry_codes, wanted)
    return kept
