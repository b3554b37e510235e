"""Creating, growing and remapping a static topic on Apache RocketMQ the way its `mqadmin` does
(`TopicQueueMappingUtils.createTopicConfigMapping` / `remappingStaticTopic`, `MQAdminUtils`): pure
plans over each broker's TopicConfigAndQueueMapping, which the admin then writes in mqadmin's order.

Unlike staticmq's own brokers, RocketMQ keeps every list a broker was given (it never sets an old
item's endOffset, and its clean service drops stale lists later), so a plan edits each broker's
current detail instead of rebuilding it: a moved logic queue's full list goes to both the map-in and
the map-out broker. Where mqadmin leaves copies undecided (the map-out broker's, which its own later
remaps then refuse), these plans write the settled list to both brokers and refresh every stale copy
from the leader's list.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from staticmq_spark.errors import InconsistentTopicError, InvalidArgumentError
from staticmq_spark.mapping import (
    UNDECIDED,
    Chain,
    MappingItem,
    TopicQueueMapping,
    check_total_queues,
    leaders_of,
    next_epoch,
    plan_allocation,
    plan_remap,
    settle_logic_offset,
)
from staticmq_spark.protocol.topics.config import TopicConfig

SCOPE = "__global__"


@dataclass(frozen=True, slots=True)
class BrokerTopic:
    """One broker's TopicConfigAndQueueMapping of a static topic."""

    config: TopicConfig
    detail: TopicQueueMapping


@dataclass(frozen=True, slots=True)
class Plan:
    topic: str
    epoch: int
    brokers: dict[str, BrokerTopic]  # what each broker is to hold
    created: dict[int, str]  # logic queue -> broker (create/grow)
    moved: dict[int, tuple[str, str]]  # logic queue -> (map-out broker, map-in broker) (remap)

    @property
    def map_in(self) -> list[str]:
        return sorted({new for _, new in self.moved.values()})

    @property
    def map_out(self) -> list[str]:
        return sorted({old for old, _ in self.moved.values()})


def _empty(topic: str, broker: str, total: int, epoch: int) -> BrokerTopic:
    """`new TopicConfig(topic, 0, 0)` and an empty detail (completeNoTargetBrokers)."""
    return BrokerTopic(TopicConfig(topic, 0, 0, is_static=True), TopicQueueMapping(topic, broker, epoch, total, {}))


def _one_more_queue(bt: BrokerTopic) -> tuple[BrokerTopic, int]:
    """The broker's read and write queue counts grown by one; the new physical queue's id."""
    cfg = replace(bt.config, read_queues=bt.config.read_queues + 1, write_queues=bt.config.write_queues + 1)
    return replace(bt, config=cfg), cfg.write_queues - 1


def _hosting(bt: BrokerTopic, queue: int, chain: Chain) -> BrokerTopic:
    hosted = {**bt.detail.hosted, queue: tuple(chain)}
    return replace(bt, detail=replace(bt.detail, hosted=hosted))


def _stamped(brokers: dict[str, BrokerTopic], epoch: int, total: int) -> dict[str, BrokerTopic]:
    return {
        n: replace(bt, detail=replace(bt.detail, epoch=epoch, total_queues=total), config=_static(bt.config, total))
        for n, bt in brokers.items()
    }


def _static(cfg: TopicConfig, total: int) -> TopicConfig:
    return replace(cfg, is_static=True, total_queues=total)


def plan_create(
    topic: str,
    total_queues: int,
    targets: Sequence[str],
    current: Mapping[str, BrokerTopic],
    chains: Mapping[int, Chain],
    epoch: int,
    cluster_brokers: Sequence[str],
    now_ms: int,
) -> Plan:
    """Create the topic or grow it to `total_queues` logic queues: each new logic queue gets a new
    physical queue (gen 0, logic and start offset 0) on a least-loaded target broker; existing
    ones stay. `chains`/`epoch`: the current topic (empty/0 when it does not exist yet)."""
    check_total_queues(total_queues)
    holders = sorted(n for n, bt in current.items() if bt.detail.hosted)
    outside = [n for n in holders if n not in targets]
    if outside:
        raise InvalidArgumentError(
            f"static topic {topic!r} has logic queues on {outside}, which are not among the target brokers "
            f"{list(targets)} (RocketMQ grows a static topic over brokers that include every current one)"
        )
    if total_queues == len(chains):
        raise InvalidArgumentError(f"static topic {topic!r} already has {total_queues} logic queues: nothing to do")
    placements = plan_allocation(total_queues, targets, leaders_of(chains))  # refuses to shrink
    new_epoch = next_epoch(epoch, now_ms)
    brokers = _refreshed(current, chains)
    for q, broker in sorted(placements.items()):
        bt = brokers.get(broker) or _empty(topic, broker, total_queues, new_epoch)
        bt, physical = _one_more_queue(bt)
        brokers[broker] = _hosting(bt, q, (MappingItem(physical, broker, 0, 0, 0, -1, -1, -1),))
    for broker in cluster_brokers:
        brokers.setdefault(broker, _empty(topic, broker, total_queues, new_epoch))
    return Plan(topic, new_epoch, _stamped(brokers, new_epoch, total_queues), dict(placements), {})


def plan_remapping(
    topic: str,
    targets: Sequence[str],
    current: Mapping[str, BrokerTopic],
    chains: Mapping[int, Chain],
    total_queues: int,
    epoch: int,
    now_ms: int,
) -> Plan:
    """Move logic queues so that the target brokers lead them evenly: a moved queue's list gets a
    new item (gen + 1, a new physical queue on the map-in broker, logic offset undecided) and is
    given to both its map-in and its map-out broker. A broker either maps in or maps out."""
    moves = plan_remap(total_queues, targets, leaders_of(chains))
    new_epoch = next_epoch(epoch, now_ms)
    brokers = _refreshed(current, chains)
    moved = {}
    for q, broker in sorted(moves.items()):
        old = chains[q][-1]
        bt = brokers.get(broker) or _empty(topic, broker, total_queues, new_epoch)
        bt, physical = _one_more_queue(bt)
        chain = (*chains[q], MappingItem(physical, broker, old.gen + 1, UNDECIDED, 0, -1, -1, -1))
        brokers[broker] = _hosting(bt, q, chain)
        brokers[old.bname] = _hosting(brokers[old.bname], q, chain)
        moved[q] = (old.bname, broker)
    return Plan(topic, new_epoch, _stamped(brokers, new_epoch, total_queues), {}, moved)


def settled(plan: Plan, old_max: Mapping[tuple[str, int], int]) -> Plan:
    """Step 3 of a remap: each new leader's logic offset from its fenced predecessor's physical
    max (`old_max[(broker, physical queue)]`), as `blockSeqRoundUp`, in the lists of both the
    map-in and the map-out broker. (mqadmin writes only the map-in broker again and leaves the
    map-out broker's copy undecided; a later remap of RocketMQ 5.5's mqadmin then fails its own
    check, "The non-latest item has negative logic offset". Both brokers are written again here.)"""
    brokers = dict(plan.brokers)
    for q, (_, new_broker) in sorted(plan.moved.items()):
        chain = brokers[new_broker].detail.hosted[q]
        old, new = chain[-2], chain[-1]
        top = old_max.get((old.bname, old.queue))
        if top is None:
            raise InvalidArgumentError(f"cannot settle logic queue {q}: no max offset of {old.bname}/{old.queue}")
        if top < old.start_offset:
            raise InvalidArgumentError(f"the max offset {top} of {old.bname}/{old.queue} is below its start offset")
        end = old.logic_offset + max(top, old.start_offset) - old.start_offset  # computeStaticQueueOffsetStrictly
        decided = (*chain[:-1], replace(new, logic_offset=settle_logic_offset(end)))
        for broker in (new_broker, old.bname):
            brokers[broker] = _hosting(brokers[broker], q, decided)
    return replace(plan, brokers=brokers)


def _refreshed(current: Mapping[str, BrokerTopic], chains: Mapping[int, Chain]) -> dict[str, BrokerTopic]:
    """Every copy a broker holds of a logic queue it does not lead replaced by the leader's own list:
    a copy left undecided by an earlier remap (mqadmin's) would fail RocketMQ's item checks."""
    out = {}
    for name, bt in current.items():
        hosted = {
            q: chains[q] if q in chains and chain[-1].bname != name else chain for q, chain in bt.detail.hosted.items()
        }
        out[name] = replace(bt, detail=replace(bt.detail, hosted=hosted))
    return out


def detail_json(detail: TopicQueueMapping) -> bytes:
    """A TopicQueueMappingDetail body (standard JSON; the broker accepts quoted integer keys)."""
    hosted = {
        str(q): [
            {
                "gen": i.gen,
                "queueId": i.queue,
                "bname": i.bname,
                "logicOffset": i.logic_offset,
                "startOffset": i.start_offset,
                "endOffset": i.end_offset,
                "timeOfStart": i.time_of_start,
                "timeOfEnd": i.time_of_end,
            }
            for i in chain
        ]
        for q, chain in sorted(detail.hosted.items())
    }
    leading = {str(q): chain[-1].queue for q, chain in sorted(detail.hosted.items()) if chain[-1].bname == detail.bname}
    body = {
        "topic": detail.topic,
        "scope": SCOPE,
        "totalQueues": detail.total_queues,
        "bname": detail.bname,
        "epoch": detail.epoch,
        "dirty": False,
        "currIdMap": leading,
        "hostedQueues": hosted,
    }
    return json.dumps(body, separators=(",", ":")).encode()


def current_topic(topic: str, current: Mapping[str, BrokerTopic]) -> tuple[dict[int, Chain], int, int]:
    """(chains, epoch, total queues) of the topic the brokers hold, checked as mqadmin does
    (`checkNameEpochNumConsistence`, `checkAndBuildMappingItems`): one epoch and one totalQueues
    on every broker, and each logic queue led by exactly one broker's own list; ({}, 0, 0) when no
    broker holds the topic."""
    details = {n: bt.detail for n, bt in current.items()}
    if not details:
        return {}, 0, 0
    epochs = {d.epoch for d in details.values()}
    totals = {d.total_queues for d in details.values()}
    if len(epochs) > 1 or len(totals) > 1:
        raise InconsistentTopicError(
            f"static topic {topic!r}: the brokers disagree on its epoch {sorted(epochs)} or totalQueues "
            f"{sorted(totals)} (a half-written operation: finish it with RocketMQ's mqadmin)"
        )
    chains: dict[int, Chain] = {}
    for name, detail in sorted(details.items()):
        for q, chain in detail.hosted.items():
            if chain and chain[-1].bname == name:
                if q in chains:
                    raise InconsistentTopicError(f"static topic {topic!r}: logic queue {q} has two leaders")
                chains[q] = chain
    total = totals.pop()
    missing = [q for q in range(total) if q not in chains]
    if missing:
        raise InconsistentTopicError(f"static topic {topic!r}: logic queue(s) {missing} have no leader")
    return chains, epochs.pop(), total
