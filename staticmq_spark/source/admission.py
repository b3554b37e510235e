"""Admission control arithmetic: how many messages lie between logic offsets (jumps left by
remaps hold none), and where to end a micro-batch to admit at most N of them."""

from __future__ import annotations

from collections.abc import Sequence

from staticmq_spark.mapping import Segment


def count_rows(segments: Sequence[Segment]) -> int:
    return sum(s.count for s in segments)


def advance(segments: Sequence[Segment], start: int, rows: int) -> int:
    """The offset just after the first `rows` messages from `start` (segments in logic order)."""
    if rows <= 0:
        return start
    for seg in segments:
        if rows < seg.count:
            return seg.logic_start + rows
        rows -= seg.count
    return segments[-1].logic_end if segments else start


def share_budget(available: Sequence[int], budget: int) -> list[int]:
    """Split `budget` messages over queues in proportion to what each has available (largest
    remainders first, ties to the lower queue), never more than a queue has."""
    total = sum(available)
    if total <= budget:
        return list(available)
    shares = [budget * a // total for a in available]
    left = budget - sum(shares)
    order = sorted(range(len(available)), key=lambda i: (-(budget * available[i] % total), i))
    for i in order:
        if left <= 0:
            break
        if shares[i] < available[i]:
            shares[i] += 1
            left -= 1
    return shares
