"""Physical positions back to logic ones (staticmq_spark/mapping/positions.py): what RocketMQ's
pop, which reads physical queues, needs to name a message as a pull would."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from staticmq_spark.mapping import MappingItem
from staticmq_spark.mapping.positions import LogicPosition, PhysicalPositions, freshest_chains

OLD = MappingItem(queue=0, bname="a", gen=0, logic_offset=0, start_offset=0, end_offset=5)
MID = MappingItem(queue=1, bname="b", gen=1, logic_offset=10000, start_offset=0, end_offset=3)
NEW = MappingItem(queue=2, bname="a", gen=2, logic_offset=20000, start_offset=0)
CHAINS = {0: (OLD, MID, NEW), 1: (MappingItem(queue=1, bname="a", gen=0, logic_offset=0),)}


def test_each_segment_maps_its_physical_offsets_to_logic_start_plus_distance() -> None:
    p = PhysicalPositions(CHAINS)
    assert p.logic("a", 0, 0) == LogicPosition(0, 0)
    assert p.logic("a", 0, 4) == LogicPosition(0, 4)
    assert p.logic("b", 1, 2) == LogicPosition(0, 10002)
    assert p.logic("a", 2, 7) == LogicPosition(0, 20007)
    assert p.logic("a", 1, 9) == LogicPosition(1, 9)


def test_offsets_outside_every_segment_have_no_logic_position() -> None:
    p = PhysicalPositions(CHAINS)
    assert p.logic("a", 0, 5) is None  # at the fenced end
    assert p.logic("b", 1, 3) is None
    assert p.logic("c", 0, 0) is None  # a broker no chain names
    assert p.logic("a", 7, 0) is None


def test_a_segment_that_starts_past_zero_counts_from_its_physical_start() -> None:
    item = MappingItem(queue=4, bname="b", gen=3, logic_offset=30000, start_offset=120)
    p = PhysicalPositions({2: (item,)})
    assert p.logic("b", 4, 119) is None
    assert p.logic("b", 4, 125) == LogicPosition(2, 30005)


def test_an_undecided_leader_gives_no_logic_position() -> None:
    undecided = MappingItem(queue=0, bname="b", gen=1, logic_offset=-1)
    assert PhysicalPositions({0: (OLD, undecided)}).logic("b", 0, 0) is None


def test_queues_with_more_than_one_segment_are_named() -> None:
    assert PhysicalPositions(CHAINS).multi_segment_queues() == [0]
    assert PhysicalPositions({1: CHAINS[1]}).multi_segment_queues() == []


def test_the_freshest_copy_wins_then_the_longest_then_the_one_with_decided_offsets() -> None:
    undecided = MappingItem(queue=1, bname="b", gen=1, logic_offset=-1)
    decided = MappingItem(queue=1, bname="b", gen=1, logic_offset=10000)
    old_broker = {0: (OLD, undecided)}  # RocketMQ: an old segment's broker keeps the leader at -1
    leader = {0: (OLD, decided)}
    assert freshest_chains([(5, old_broker), (5, leader)]) == {0: (OLD, decided)}
    assert freshest_chains([(5, leader), (5, old_broker)]) == {0: (OLD, decided)}
    assert freshest_chains([(6, {0: (OLD,)}), (5, leader)]) == {0: (OLD,)}
    assert freshest_chains([(5, {0: (OLD,)}), (5, leader)]) == {0: (OLD, decided)}


@given(st.integers(0, 10**9), st.integers(0, 10**6), st.integers(0, 10**6))
def test_logic_minus_physical_is_the_segments_delta(logic_start: int, physical_start: int, distance: int) -> None:
    item = MappingItem(queue=0, bname="a", gen=0, logic_offset=logic_start, start_offset=physical_start)
    found = PhysicalPositions({3: (item,)}).logic("a", 0, physical_start + distance)
    assert found == LogicPosition(3, logic_start + distance)
