"""The static-topic create/grow and remap sequences, written once: the pure plans of `mapping`
(`plan_create_steps`, `plan_remap_steps`, `plan_settled_copies`) applied through a `MappingStore`,
the small port each backend with staticmq's storage model implements (staticmq over gRPC, memory
in process): gather every live broker's state of a topic, write one broker's mapping copy.

Every operation starts with the global epoch check and refuses to go on when the brokers' copies
are inconsistent. A remap is "switch to new, fence old, then settle new": write the new leaders
(logicOffset -1, already writable) to the map-in brokers, fence the old leaders by writing the
map-out brokers, read the fenced leaders' final max offsets, then write the settled copies to the
map-in brokers and every other one. All writes of one operation share one epoch; a broker writes
its mapping before its topic config.

(RocketMQ's brokers keep every list they were given and take config and mapping in one call, so
backends/rocketmq/static_topics.py plans edits of each broker's current detail instead.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Protocol

from staticmq_spark.backends.types import BrokerState, OperationResult, PhysicalBounds
from staticmq_spark.errors import InconsistentTopicError, TopicNotFoundError
from staticmq_spark.mapping import (
    Chain,
    ConsistencyReport,
    TopicQueueMapping,
    check_states,
    plan_create_steps,
    plan_remap_steps,
    plan_settled_copies,
    settle_chains,
)


class MappingStore(Protocol):
    """What the static-topic steps need of a cluster."""

    def gather(self, topic: str, brokers: Sequence[str] | None = None) -> dict[str, BrokerState]:
        """Each live broker's (or each of `brokers`') mapping copy, topic config and physical bounds."""
        ...

    def write_mapping(self, broker: BrokerState, mapping: TopicQueueMapping) -> None:
        """Store `mapping` on `broker`: the mapping first, then the topic config it implies."""
        ...


def require_consistent(topic: str, report: ConsistencyReport) -> None:
    if not report.ok:
        raise InconsistentTopicError(
            f"static topic {topic!r} is inconsistent: {report.describe()}. Run repairStaticTopic"
        )


def write_copies(
    store: MappingStore,
    states: Mapping[str, BrokerState],
    copies: Mapping[str, TopicQueueMapping],
    order: Iterable[str],
) -> None:
    for name in order:
        store.write_mapping(states[name], copies[name])


def create_or_grow(
    store: MappingStore, topic: str, total_queues: int, targets: Sequence[str], now_ms: int
) -> OperationResult:
    """updateStaticTopic: create `topic` with `total_queues` logic queues over `targets`, or grow it."""
    states = store.gather(topic)
    report = check_states(topic, states)
    if report.exists:
        require_consistent(topic, report)
    current = (report.total_queues, report.epoch, dict(report.chains)) if report.exists else (0, report.epoch, {})
    counts = {n: s.physical_count for n, s in states.items()}
    plan = plan_create_steps(topic, total_queues, *current, targets, counts, now_ms)
    write_copies(store, states, plan.copies, plan.order)
    made = f"{len(plan.placements)} logic queue(s) created"
    return OperationResult(topic, plan.epoch, total_queues, {}, plan.placements, made)


def physical_lows(states: Mapping[str, BrokerState]) -> dict[tuple[str, int], int]:
    """(broker, physical queue) -> its min offset: what `drop_expired` reads to drop items whose
    data retention has removed."""
    return {(n, q): b.min_offset for n, s in states.items() for q, b in s.physical.items()}


def fenced_bounds(
    store: MappingStore, topic: str, chains: Mapping[int, Chain], queues: Sequence[int]
) -> dict[tuple[str, int], PhysicalBounds]:
    """The physical bounds, read now, of the brokers holding the old (fenced) leaders of `queues`."""
    fenced = store.gather(topic, sorted({chains[q][-2].bname for q in queues}))
    return {(n, q): b for n, s in fenced.items() for q, b in s.physical.items()}


def settle_fenced(
    store: MappingStore, topic: str, chains: Mapping[int, Chain], queues: Sequence[int], now_ms: int
) -> dict[int, Chain]:
    """Settle each of `queues`' pending chains from its fenced old leader's final bounds."""
    return settle_chains(chains, queues, fenced_bounds(store, topic, chains, queues), now_ms)


def remap(
    store: MappingStore,
    topic: str,
    targets: Sequence[str],
    now_ms: int,
    on_step: Callable[[str], None] | None = None,
) -> OperationResult:
    """remappingStaticTopic: move logic queue leaders onto `targets`. `on_step` is called after each
    step ("switched", "fenced", "settled", "done"): progress reports and fault-injection tests."""
    step = on_step or (lambda _name: None)
    states = store.gather(topic)
    report = check_states(topic, states)
    if not report.exists:
        raise TopicNotFoundError(f"static topic {topic!r} does not exist")
    require_consistent(topic, report)
    chains = dict(report.chains)
    counts = {n: st.physical_count for n, st in states.items()}
    plan = plan_remap_steps(topic, report.total_queues, report.epoch, chains, targets, counts, states, now_ms)
    if plan is None:
        return OperationResult(topic, report.epoch, report.total_queues, {}, {}, "nothing to move")
    write_copies(store, states, plan.copies, plan.map_in)  # 1. switch to new: new leaders writable
    step("switched")
    write_copies(store, states, plan.copies, plan.map_out)  # 2. fence old: no more writes to old leaders
    step("fenced")
    bounds = fenced_bounds(store, topic, plan.pending, sorted(plan.moves))  # 3. settle new
    copies = plan_settled_copies(plan, bounds, physical_lows(states), now_ms)
    write_copies(store, states, copies, plan.map_in)
    step("settled")
    write_copies(store, states, copies, [n for n in sorted(states) if n not in plan.map_in])
    step("done")
    moved = {q: (chains[q][-1].bname, plan.moves[q]) for q in plan.moves}
    made = f"{len(plan.moves)} logic queue(s) moved"
    return OperationResult(topic, plan.epoch, report.total_queues, moved, {}, made)
