"""Allocation, remap planning, per-broker copies, clean-up and the global consistency check."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from staticmq_spark.errors import InvalidArgumentError
from staticmq_spark.mapping import (
    UNDECIDED,
    MappingItem,
    check_consistency,
    copies_for,
    drop_expired,
    new_items,
    plan_allocation,
    plan_remap,
)


def item(bname: str, queue: int = 0, gen: int = 0, logic: int = 0, end: int = -1) -> MappingItem:
    return MappingItem(queue=queue, bname=bname, gen=gen, logic_offset=logic, end_offset=end)


def test_allocation_spreads_evenly() -> None:
    placed = plan_allocation(8, ["b0", "b1", "b2"], {})
    assert sorted(Counter(placed.values()).values()) == [2, 3, 3]


def test_growing_never_moves_existing_queues_and_fills_the_least_loaded() -> None:
    existing = {0: "b0", 1: "b0", 2: "b1"}
    placed = plan_allocation(5, ["b0", "b1"], existing)
    assert set(placed) == {3, 4}
    assert Counter([*existing.values(), *placed.values()]) == {"b0": 2, "b1": 3} or Counter(
        [*existing.values(), *placed.values()]
    ) == {"b0": 3, "b1": 2}
    assert placed[3] == "b1"


def test_shrinking_is_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="cannot shrink"):
        plan_allocation(2, ["b0"], {0: "b0", 1: "b0", 2: "b0"})


def test_repeated_targets_are_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="repeat"):
        plan_allocation(2, ["b0", "b0"], {})


@given(st.integers(1, 64), st.integers(1, 6))
def test_allocation_counts_differ_by_at_most_one(total: int, brokers: int) -> None:
    targets = [f"b{i}" for i in range(brokers)]
    counts = Counter(plan_allocation(total, targets, {}).values())
    loads = [counts.get(t, 0) for t in targets]
    assert max(loads) - min(loads) <= 1


def test_new_items_take_each_brokers_next_queue_id() -> None:
    items = new_items({0: "b0", 1: "b1", 2: "b0"}, {"b0": 3}, gens={}, logic_offset=0, now_ms=7)
    assert [(items[q].bname, items[q].queue) for q in range(3)] == [("b0", 3), ("b1", 0), ("b0", 4)]


def test_remap_onto_the_current_layout_moves_nothing() -> None:
    leaders = {0: "b0", 1: "b1", 2: "b0", 3: "b1"}
    assert plan_remap(4, ["b0", "b1"], leaders) == {}


def test_remap_moves_everything_off_a_drained_broker() -> None:
    leaders = {0: "b0", 1: "b1", 2: "b2", 3: "b0", 4: "b1", 5: "b2"}
    moves = plan_remap(6, ["b0", "b1"], leaders)
    assert set(moves) == {2, 5}
    assert sorted(moves.values()) == ["b0", "b1"]


@given(
    st.integers(1, 40),
    st.lists(st.sampled_from(["b0", "b1", "b2", "b3"]), min_size=1, max_size=40),
    st.lists(st.sampled_from(["b0", "b1", "b2", "b3", "b4"]), min_size=1, max_size=5, unique=True),
)
def test_remap_balances_and_never_maps_in_and_out_of_one_broker(
    total: int, owners: list[str], targets: list[str]
) -> None:
    leaders = {q: owners[q % len(owners)] for q in range(total)}
    moves = plan_remap(total, targets, leaders)
    final = {**leaders, **moves}
    loads = [sum(1 for b in final.values() if b == t) for t in targets]
    assert set(final.values()) <= set(targets)
    assert max(loads) - min(loads) <= 1
    outs = {leaders[q] for q in moves}
    ins = set(moves.values())
    assert not (outs & ins)
    for q, b in leaders.items():  # a queue on a target broker that did not exceed its quota stays
        if q not in moves:
            assert b in targets


def test_copies_give_leader_and_second_leader_the_full_chain_and_others_an_empty_copy() -> None:
    chains = {
        0: (item("b0", 0, 0, 0, 10), item("b1", 0, 1, 10_000)),
        1: (item("b2", 0, 0, 0, 3), item("b0", 1, 1, 10_000, 4), item("b1", 1, 2, 20_000)),
    }
    copies = copies_for("t", 99, 2, chains, ["b0", "b1", "b2", "b3"])
    assert copies["b1"].hosted == chains
    assert copies["b0"].hosted == chains  # second leader of both
    assert copies["b2"].hosted == {}  # gen 0 of queue 1: older than two gens, dropped
    assert copies["b3"].hosted == {} and copies["b3"].epoch == 99 and copies["b3"].total_queues == 2


def test_expired_items_are_dropped_from_the_front_but_never_the_leader() -> None:
    chain = (item("b0", 0, 0, 0, 10), item("b1", 0, 1, 10_000, 5), item("b2", 0, 2, 20_000))
    assert drop_expired(chain, {("b0", 0): 10, ("b1", 0): 0}) == chain[1:]
    assert drop_expired(chain, {("b0", 0): 10, ("b1", 0): 5, ("b2", 0): 9}) == chain[2:]
    assert drop_expired(chain, {("b0", 0): 3}) == chain


# ---------------------------------------------------------------------- consistency


def healthy() -> dict:
    chains = {0: (item("b0", 0, 0, 0),), 1: (item("b1", 0, 0, 0),)}
    return dict(copies_for("t", 5, 2, chains, ["b0", "b1", "b2"]))


def test_consistent_topic_passes() -> None:
    report = check_consistency("t", healthy())
    assert report.ok and report.total_queues == 2 and set(report.chains) == {0, 1}


def test_missing_broker_is_detected_through_the_no_target_copies() -> None:
    copies = healthy()
    del copies["b1"]  # b1 is down: nobody else hosts logic queue 1
    report = check_consistency("t", copies)
    assert not report.ok and "logic queue 1: no live broker hosts it" in report.describe()


def test_epoch_disagreement_is_named() -> None:
    copies = healthy()
    copies["b2"] = copies_for("t", 4, 2, {}, ["b2"])["b2"]
    report = check_consistency("t", copies)
    assert "epochs differ" in report.describe() and "b2=4" in report.describe()


def test_broker_without_copy_is_named() -> None:
    copies = healthy()
    copies["b3"] = None
    assert "['b3'] hold no copy" in check_consistency("t", copies).describe()


def test_undecided_leader_is_a_half_done_remap() -> None:
    chains = {0: (item("b0", 0, 0, 0), item("b1", 0, 1, UNDECIDED)), 1: (item("b1", 1, 0, 0),)}
    report = check_consistency("t", dict(copies_for("t", 5, 2, chains, ["b0", "b1"])))
    assert report.undecided == [0] and "undecided" in report.describe()


def test_leader_without_complete_chain_breaks_leader_completeness() -> None:
    chains = {0: (item("b0", 0, 0, 0, 5), item("b1", 0, 1, 10_000)), 1: (item("b1", 1, 0, 0),)}
    copies = dict(copies_for("t", 5, 2, chains, ["b0", "b1"]))
    copies["b1"] = copies["b1"].with_chains(5, {1: chains[1]})
    report = check_consistency("t", copies)
    assert "leader completeness" in report.describe()


def test_more_advanced_copy_wins_when_copies_lag() -> None:
    settled = (item("b0", 0, 0, 0, 5), item("b1", 0, 1, 10_000))
    lagging = (item("b0", 0, 0, 0), item("b1", 0, 1, UNDECIDED))
    copies = dict(copies_for("t", 5, 1, {0: settled}, ["b0", "b1"]))
    copies["b0"] = copies["b0"].with_chains(5, {0: lagging})
    report = check_consistency("t", copies)
    assert report.ok and report.chains[0] == settled


def test_topic_that_no_broker_knows_does_not_exist() -> None:
    assert not check_consistency("t", {"b0": None}).exists
