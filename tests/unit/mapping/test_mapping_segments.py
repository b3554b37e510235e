"""Resolving logic ranges to physical segments, the way the Spark driver plans a micro-batch."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from staticmq_spark.mapping import UNDECIDED, MappingItem, SegmentTable

CHAIN = (
    MappingItem(queue=0, bname="b0", gen=0, logic_offset=0, start_offset=0, end_offset=10),
    MappingItem(queue=2, bname="b1", gen=1, logic_offset=10_000, start_offset=0, end_offset=5),
    MappingItem(queue=1, bname="b2", gen=2, logic_offset=20_000, start_offset=0),
)


def resolve(chains: dict, q: int, start: int, end: int) -> list:
    table = SegmentTable(chains)
    return table.resolve(np.array([q]), np.array([start]), np.array([end])).segments_of(0)


def test_range_inside_one_segment() -> None:
    [seg] = resolve({0: CHAIN}, 0, 2, 8)
    assert (seg.bname, seg.queue, seg.physical_start, seg.physical_end) == ("b0", 0, 2, 8)


def test_range_across_remaps_skips_the_jumps() -> None:
    segs = resolve({0: CHAIN}, 0, 0, 20_003)
    assert [(s.bname, s.logic_start, s.logic_end) for s in segs] == [
        ("b0", 0, 10),
        ("b1", 10_000, 10_005),
        ("b2", 20_000, 20_003),
    ]
    assert [s.physical_start for s in segs] == [0, 0, 0]
    assert sum(s.count for s in segs) == 18


def test_range_inside_a_jump_has_no_segment() -> None:
    assert resolve({0: CHAIN}, 0, 11, 9_000) == []


def test_undecided_leader_is_never_planned() -> None:
    chain = (*CHAIN[:2], MappingItem(queue=3, bname="b2", gen=2, logic_offset=UNDECIDED))
    segs = resolve({0: chain}, 0, 0, 10**9)
    assert [s.bname for s in segs] == ["b0", "b1"]


def test_unfenced_middle_item_ends_where_the_next_begins() -> None:
    chain = (
        MappingItem(queue=0, bname="b0", gen=0, logic_offset=0),
        MappingItem(queue=0, bname="b1", gen=1, logic_offset=10_000),
    )
    assert [(s.logic_start, s.logic_end) for s in resolve({0: chain}, 0, 0, 10_002)] == [(0, 10_000), (10_000, 10_002)]


def test_many_queues_resolve_together() -> None:
    chains = {q: (MappingItem(queue=q, bname=f"b{q % 2}", gen=0, logic_offset=0),) for q in range(16)}
    table = SegmentTable(chains)
    qs = np.arange(16)
    out = table.resolve(qs, qs * 10, qs * 10 + 5).by_range(16)
    assert all(len(segs) == 1 and segs[0].logic_start == q * 10 and segs[0].count == 5 for q, segs in enumerate(out))


@given(st.lists(st.integers(1, 50), min_size=1, max_size=6), st.integers(0, 80_000), st.integers(0, 80_000))
def test_vectorized_resolution_matches_a_naive_walk(lengths: list[int], a: int, b: int) -> None:
    start, end = min(a, b), max(a, b)
    chain = tuple(
        MappingItem(queue=g, bname="b", gen=g, logic_offset=g * 10_000, start_offset=0, end_offset=n)
        for g, n in enumerate(lengths)
    )
    naive = []
    for it in chain:
        lo, hi = max(start, it.logic_offset), min(end, it.logic_offset + it.end_offset)
        if hi > lo:
            naive.append((it.gen, lo, hi))
    got = [(s.gen, s.logic_start, s.logic_end) for s in resolve({0: chain}, 0, start, end)]
    assert got == naive
