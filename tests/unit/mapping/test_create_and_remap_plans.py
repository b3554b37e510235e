"""The create/grow and remap plans (mapping.plan_create_steps, plan_remap_steps, plan_settled_copies)
and the one applier that runs them through a backend's MappingStore (backends/static_topic_steps)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import pytest

from staticmq_spark.backends import static_topic_steps as steps
from staticmq_spark.backends.types import BrokerState, PhysicalBounds
from staticmq_spark.errors import InconsistentTopicError, InvalidArgumentError, TopicNotFoundError
from staticmq_spark.mapping import (
    UNDECIDED,
    MappingItem,
    RemapSteps,
    TopicQueueMapping,
    check_states,
    plan_create_steps,
    plan_remap_steps,
    plan_settled_copies,
    settle_chains,
)
from staticmq_spark.protocol.topics.config import TopicConfig

NOW = 1_700_000_000_000
BROKERS = ["b0", "b1", "b2"]


def item(bname: str, queue: int = 0, gen: int = 0, logic: int = 0, start: int = 0, end: int = -1) -> MappingItem:
    return MappingItem(queue=queue, bname=bname, gen=gen, logic_offset=logic, start_offset=start, end_offset=end)


# ---------------------------------------------------------------------------- create / grow


def test_a_create_places_every_logic_queue_evenly_at_logic_offset_zero_on_fresh_physical_queues() -> None:
    plan = plan_create_steps("t", 5, 0, 0, {}, ["b0", "b1"], dict.fromkeys(BROKERS, 0), NOW)
    assert plan.placements == {0: "b0", 1: "b1", 2: "b0", 3: "b1", 4: "b0"}
    hosted = {b: plan.copies[b].hosted for b in BROKERS}
    assert {q for q, chain in hosted["b0"].items()} == {0, 2, 4}
    assert [hosted["b0"][q][0].queue for q in (0, 2, 4)] == [0, 1, 2]
    assert all(c[0].logic_offset == 0 and c[0].gen == 0 and len(c) == 1 for h in hosted.values() for c in h.values())


def test_a_create_writes_the_leaders_first_and_gives_a_broker_without_queues_an_empty_copy_with_the_epoch() -> None:
    plan = plan_create_steps("t", 2, 0, 0, {}, ["b2", "b1"], dict.fromkeys(BROKERS, 0), NOW)
    assert plan.order == ["b1", "b2", "b0"]
    assert plan.copies["b0"].hosted == {}
    assert {c.epoch for c in plan.copies.values()} == {plan.epoch} and plan.epoch > 0
    assert {c.total_queues for c in plan.copies.values()} == {2}
    assert {c.bname for c in plan.copies.values()} == set(BROKERS)


def test_a_grow_keeps_every_existing_chain_and_adds_queues_on_each_brokers_next_physical_queue() -> None:
    chains = {0: (item("b0", 0),), 1: (item("b0", 1),)}
    plan = plan_create_steps("t", 4, 2, 7, chains, ["b0", "b1"], {"b0": 2, "b1": 3}, NOW)
    assert plan.placements == {2: "b1", 3: "b1"}
    assert plan.copies["b0"].hosted == chains
    assert [plan.copies["b1"].hosted[q][0].queue for q in (2, 3)] == [3, 4]
    assert plan.epoch > 7


def test_a_grow_to_the_same_count_places_nothing_but_still_rewrites_every_copy_at_a_new_epoch() -> None:
    chains = {0: (item("b0"),)}
    plan = plan_create_steps("t", 1, 1, 5, chains, ["b0"], {"b0": 1, "b1": 0}, NOW)
    assert plan.placements == {}
    assert set(plan.copies) == {"b0", "b1"} and plan.epoch > 5


@pytest.mark.parametrize("total", [0, -3])
def test_a_create_of_no_logic_queues_is_refused_naming_qn(total: int) -> None:
    with pytest.raises(InvalidArgumentError, match="-qn must be positive"):
        plan_create_steps("t", total, 0, 0, {}, ["b0"], {"b0": 0}, NOW)


def test_shrinking_a_static_topic_is_refused_because_keys_would_change_queue() -> None:
    chains = {q: (item("b0", q),) for q in range(3)}
    with pytest.raises(InvalidArgumentError, match="has 3 logic queues; shrinking to 2 is refused"):
        plan_create_steps("t", 2, 3, 1, chains, ["b0"], {"b0": 3}, NOW)


def test_a_create_without_targets_or_with_repeated_targets_is_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="no target broker"):
        plan_create_steps("t", 2, 0, 0, {}, [], {"b0": 0}, NOW)
    with pytest.raises(InvalidArgumentError, match="repeat"):
        plan_create_steps("t", 2, 0, 0, {}, ["b0", "b0"], {"b0": 0}, NOW)


def test_a_created_topic_passes_the_global_epoch_check() -> None:
    plan = plan_create_steps("t", 6, 0, 0, {}, BROKERS, dict.fromkeys(BROKERS, 0), NOW)
    report = check_states("t", states_holding(plan.copies))
    assert report.ok and report.total_queues == 6 and report.epoch == plan.epoch
    assert sorted(Counter(c[-1].bname for c in report.chains.values()).values()) == [2, 2, 2]


# ---------------------------------------------------------------------------- remap settle


def pending_remap() -> RemapSteps:
    chains = {0: (item("b0", 0),), 1: (item("b0", 1),)}
    plan = plan_remap_steps("t", 2, 3, chains, ["b1"], {"b0": 2, "b1": 0}, ["b0", "b1"], NOW)
    assert plan is not None
    return plan


def test_a_remap_plan_leaves_the_new_leaders_undecided_until_settled() -> None:
    plan = pending_remap()
    assert plan.map_in == ["b1"] and plan.map_out == ["b0"]
    assert all(plan.pending[q][-1].logic_offset == UNDECIDED for q in (0, 1))


def test_settling_ends_the_old_segment_at_its_fenced_max_and_starts_the_new_one_past_it() -> None:
    plan = pending_remap()
    fenced = {("b0", 0): PhysicalBounds(0, 5, 111), ("b0", 1): PhysicalBounds(0, 0, 0)}
    copies = plan_settled_copies(plan, fenced, {}, NOW)
    chain = copies["b1"].hosted[0]
    assert (chain[0].end_offset, chain[0].time_of_end) == (5, 111)
    assert chain[-1].logic_offset == 10000 and chain[-1].bname == "b1" and chain[-1].gen == 1
    empty = copies["b1"].hosted[1]
    assert empty[0].end_offset == 0 and empty[0].time_of_end == NOW  # no message: ends now, where it started
    assert {c.epoch for c in copies.values()} == {plan.epoch}


def test_the_old_leader_keeps_the_settled_chain_as_second_leader() -> None:
    plan = pending_remap()
    copies = plan_settled_copies(plan, {("b0", 0): PhysicalBounds(0, 3)}, {}, NOW)
    assert copies["b0"].hosted == copies["b1"].hosted
    assert check_states("t", states_holding(copies)).ok


def test_a_segment_without_fenced_bounds_ends_where_it_started() -> None:
    chains = {0: (item("b0", 0, start=4), item("b1", 0, gen=1, logic=UNDECIDED))}
    settled = settle_chains(chains, [0], {}, NOW)
    assert settled[0][0].end_offset == 4 and settled[0][-1].logic_offset != UNDECIDED


def test_settling_drops_segments_whose_data_retention_removed_but_never_the_leader() -> None:
    chains = {0: (item("b0", 0, end=5), item("b1", 0, gen=1, logic=10000))}
    plan = plan_remap_steps("t", 1, 3, chains, ["b0"], {"b0": 1, "b1": 1}, ["b0", "b1"], NOW)
    assert plan is not None
    lows = {("b0", 0): 5, ("b1", 0): 0}
    copies = plan_settled_copies(plan, {("b1", 0): PhysicalBounds(0, 2)}, lows, NOW)
    assert [(i.bname, i.gen) for i in copies["b0"].hosted[0]] == [("b1", 1), ("b0", 2)]


# ---------------------------------------------------------------------------- the applier


def states_holding(copies: dict[str, TopicQueueMapping]) -> dict[str, BrokerState]:
    store = RecordingStore(list(copies))
    for name, mapping in copies.items():
        store.write_mapping(store.state("t", name), mapping)
    return store.gather("t")


class RecordingStore:
    """A MappingStore over dicts that records every write in order."""

    def __init__(self, brokers: Sequence[str]) -> None:
        self.mappings: dict[str, TopicQueueMapping] = {}
        self.bounds: dict[str, dict[int, PhysicalBounds]] = {b: {} for b in brokers}
        self.writes: list[str] = []
        self.gathered: list[list[str] | None] = []

    def state(self, topic: str, name: str) -> BrokerState:
        mapping = self.mappings.get(name)
        config = None
        if mapping is not None:
            ids = [i.queue for c in mapping.hosted.values() for i in c if i.bname == name]
            n = max([*ids, -1]) + 1
            config = TopicConfig(topic, n, n, is_static=True, total_queues=mapping.total_queues)
        return BrokerState(name, f"addr-{name}", mapping, "", config, dict(self.bounds[name]))

    def gather(self, topic: str, brokers: Sequence[str] | None = None) -> dict[str, BrokerState]:
        self.gathered.append(None if brokers is None else list(brokers))
        return {n: self.state(topic, n) for n in sorted(brokers or self.bounds)}

    def write_mapping(self, broker: BrokerState, mapping: TopicQueueMapping) -> None:
        assert broker.addr == f"addr-{broker.name}"
        self.mappings[broker.name] = mapping
        self.writes.append(broker.name)


def test_the_applier_creates_through_the_port_leaders_first() -> None:
    store = RecordingStore(BROKERS)
    result = steps.create_or_grow(store, "t", 2, ["b1", "b2"], NOW)
    assert store.writes == ["b1", "b2", "b0"]
    assert result.created == {0: "b1", 1: "b2"} and result.message == "2 logic queue(s) created"
    assert check_states("t", store.gather("t")).ok


def test_the_applier_remaps_switch_fence_settle_in_order_and_reads_only_the_fenced_brokers() -> None:
    store = RecordingStore(BROKERS)
    steps.create_or_grow(store, "t", 2, ["b0"], NOW)
    store.bounds["b0"] = {0: PhysicalBounds(0, 7, 99), 1: PhysicalBounds(0, 3, 98)}
    store.writes.clear()
    seen: list[tuple[str, list[str]]] = []
    result = steps.remap(store, "t", ["b1"], NOW + 1, lambda s: seen.append((s, list(store.writes))))
    assert [s for s, _ in seen] == ["switched", "fenced", "settled", "done"]
    assert [w for _, w in seen] == [["b1"], ["b1", "b0"], ["b1", "b0", "b1"], ["b1", "b0", "b1", "b0", "b2"]]
    assert store.gathered[-1] == ["b0"]
    assert result.moved == {0: ("b0", "b1"), 1: ("b0", "b1")} and result.message == "2 logic queue(s) moved"
    report = check_states("t", store.gather("t"))
    assert report.ok and [c[-1].logic_offset for _, c in sorted(report.chains.items())] == [10000, 10000]


def test_the_applier_remap_onto_the_current_layout_writes_nothing() -> None:
    store = RecordingStore(BROKERS)
    created = steps.create_or_grow(store, "t", 2, ["b0"], NOW)
    store.writes.clear()
    result = steps.remap(store, "t", ["b0"], NOW + 1)
    assert store.writes == [] and result.message == "nothing to move" and result.epoch == created.epoch


def test_the_applier_refuses_to_remap_a_topic_no_broker_holds() -> None:
    with pytest.raises(TopicNotFoundError, match="does not exist"):
        steps.remap(RecordingStore(BROKERS), "t", ["b0"], NOW)


def test_the_applier_refuses_to_grow_or_remap_an_inconsistent_topic_and_writes_nothing() -> None:
    store = RecordingStore(BROKERS)
    steps.create_or_grow(store, "t", 2, ["b0", "b1"], NOW)
    stale = store.mappings["b2"]
    store.mappings["b2"] = TopicQueueMapping("t", "b2", stale.epoch - 1, stale.total_queues, {})  # half-done
    store.writes.clear()
    with pytest.raises(InconsistentTopicError, match=r"epochs differ.*Run repairStaticTopic"):
        steps.create_or_grow(store, "t", 4, ["b0"], NOW + 1)
    with pytest.raises(InconsistentTopicError):
        steps.remap(store, "t", ["b2"], NOW + 1)
    assert store.writes == []
