"""Resolving logic offset ranges to physical segments (what the Spark driver plans with).

A decided item covers logic offsets [logic_offset, logic_end): logic_end comes from its end
offset once fenced, else from the next decided item's start, else it is open (the leader).
Offsets between two segments (the jump a remap leaves) belong to no segment: they are a hole,
never data loss. SegmentTable holds every decided item of a topic as sorted numpy arrays so the
ranges of all logic queues resolve together, with binary searches instead of loops over items.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from staticmq_spark.mapping.items import UNDECIDED, Chain
from staticmq_spark.protocol.rows.codec import ranges_to_indices

OPEN_END = np.iinfo(np.int64).max >> 20  # larger than any logic offset, still safe in composite keys
_SHIFT = np.int64(1) << np.int64(43)  # logic offsets stay below 2**43; queue ids below 2**20


@dataclass(frozen=True, slots=True)
class Segment:
    logic_queue: int
    bname: str
    queue: int  # physical queue on bname
    gen: int
    logic_start: int  # inclusive
    logic_end: int  # exclusive
    offset_delta: int

    @property
    def physical_start(self) -> int:
        return self.logic_start - self.offset_delta

    @property
    def physical_end(self) -> int:
        return self.logic_end - self.offset_delta

    @property
    def count(self) -> int:
        return self.logic_end - self.logic_start


class SegmentTable:
    def __init__(self, chains: Mapping[int, Chain]) -> None:
        rows: list[tuple[int, int, int, str, int, int, int]] = []
        open_end = int(OPEN_END)
        for q in sorted(chains):
            decided = [i for i in chains[q] if i.logic_offset != UNDECIDED]
            last = len(decided) - 1
            for n, item in enumerate(decided):
                delta = item.logic_offset - item.start_offset  # inlined: this loop sees every item
                if item.end_offset >= 0:
                    end = item.end_offset + delta
                elif n < last:
                    end = decided[n + 1].logic_offset
                else:
                    end = open_end
                rows.append((q, item.logic_offset, end, item.bname, item.queue, item.gen, delta))
        self.brokers = sorted({r[3] for r in rows})
        index = {b: i for i, b in enumerate(self.brokers)}
        self.queue_of = np.array([r[0] for r in rows], dtype=np.int64)
        self.start = np.array([r[1] for r in rows], dtype=np.int64)
        self.end = np.array([r[2] for r in rows], dtype=np.int64)
        self.broker = np.array([index[r[3]] for r in rows], dtype=np.int64)
        self.physical_queue = np.array([r[4] for r in rows], dtype=np.int64)
        self.gen = np.array([r[5] for r in rows], dtype=np.int64)
        self.delta = np.array([r[6] for r in rows], dtype=np.int64)
        self._key = self.queue_of * _SHIFT + self.start

    def resolve(
        self, queues: npt.NDArray[np.int64], starts: npt.NDArray[np.int64], ends: npt.NDArray[np.int64]
    ) -> ResolvedRanges:
        """Segments of [starts[k], ends[k]) of logic queue queues[k], for every k at once."""
        qk = np.asarray(queues, dtype=np.int64) * _SHIFT
        starts = np.asarray(starts, dtype=np.int64)
        ends = np.maximum(np.asarray(ends, dtype=np.int64), starts)
        first = np.searchsorted(self._key, qk, side="left")
        lo = np.maximum(np.searchsorted(self._key, qk + starts, side="right") - 1, first)
        hi = np.where(ends > starts, np.searchsorted(self._key, qk + ends - 1, side="right"), lo)
        counts = np.maximum(hi - lo, 0)
        idx = ranges_to_indices(lo.astype(np.int64), counts.astype(np.int64))
        owner = np.repeat(np.arange(len(qk), dtype=np.int64), counts)
        seg_start = np.maximum(self.start[idx], starts[owner])
        seg_end = np.minimum(self.end[idx], ends[owner])
        keep = seg_end > seg_start
        return ResolvedRanges(self, owner[keep], idx[keep], seg_start[keep], seg_end[keep])


@dataclass(frozen=True, slots=True)
class ResolvedRanges:
    table: SegmentTable
    owner: npt.NDArray[np.int64]  # which requested range each segment belongs to
    item: npt.NDArray[np.int64]  # row of the table
    logic_start: npt.NDArray[np.int64]
    logic_end: npt.NDArray[np.int64]

    def segments_of(self, k: int) -> list[Segment]:
        """The segments of requested range k, in logic order."""
        t = self.table
        rows = np.flatnonzero(self.owner == k)
        return [
            Segment(
                logic_queue=int(t.queue_of[self.item[r]]),
                bname=t.brokers[int(t.broker[self.item[r]])],
                queue=int(t.physical_queue[self.item[r]]),
                gen=int(t.gen[self.item[r]]),
                logic_start=int(self.logic_start[r]),
                logic_end=int(self.logic_end[r]),
                offset_delta=int(t.delta[self.item[r]]),
            )
            for r in rows.tolist()
        ]

    def by_range(self, count: int) -> list[list[Segment]]:
        """Segments grouped per requested range (k = 0..count-1); columns convert to Python once."""
        out: list[list[Segment]] = [[] for _ in range(count)]
        t, idx = self.table, self.item
        columns = zip(
            self.owner.tolist(),
            t.queue_of[idx].tolist(),
            t.broker[idx].tolist(),
            t.physical_queue[idx].tolist(),
            t.gen[idx].tolist(),
            self.logic_start.tolist(),
            self.logic_end.tolist(),
            t.delta[idx].tolist(),
            strict=True,
        )
        for owner, q, broker, queue, gen, start, end, delta in columns:
            out[owner].append(Segment(q, t.brokers[broker], queue, gen, start, end, delta))
        return out
