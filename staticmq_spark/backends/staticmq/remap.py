"""Static-topic admin operations, adapted on the admin side: the admin reads every live broker's
state directly, plans with the pure mapping math, and writes each broker's copy itself.

Every operation starts with the global epoch check and refuses to go on when the brokers'
copies are inconsistent (repairStaticTopic completes a half-finished operation). A remap uses
"switch to new, fence old, then settle new": write the new leader items (logicOffset -1, already
writable), fence the old leaders, read their final max offsets, decide the new logic offsets,
write the map-in brokers again, then every other broker. All writes of one operation share one
epoch; the mapping is always written before the topic config (inside each broker's write).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

from staticmq_spark.backends.staticmq.answers import bounds_from_pb
from staticmq_spark.backends.staticmq.rpc import BrokerCalls
from staticmq_spark.backends.types import OperationResult
from staticmq_spark.errors import (
    InconsistentTopicError,
    InvalidArgumentError,
    TopicNotFoundError,
)
from staticmq_spark.mapping import (
    BrokerState,
    Chain,
    ConsistencyReport,
    TopicQueueMapping,
    check_states,
    copies_for,
    drop_expired,
    leaders_of,
    new_items,
    next_epoch,
    plan_allocation,
    plan_remap_steps,
    settled_chain,
)
from staticmq_spark.protocol.pb import staticmq_pb2 as pb
from staticmq_spark.protocol.wire.topic_config import config_from_pb


def _now_ms() -> int:
    return int(time.time() * 1000)


class StaticTopicAdmin:
    def __init__(self, admin: BrokerCalls) -> None:
        self.admin = admin

    # ------------------------------------------------------------------ gathering

    def gather(self, topic: str, brokers: dict[str, str] | None = None) -> dict[str, BrokerState]:
        brokers = brokers or {b.name: b.addr for b in self.admin.cluster_info()}
        out = {}
        for name, addr in sorted(brokers.items()):
            st = self.admin.call(name, self.admin.stub(addr).GetStaticTopicState, pb.TopicName(topic=topic))
            out[name] = BrokerState(
                name,
                addr,
                TopicQueueMapping.from_json(st.mapping_json) if st.has_mapping else None,
                st.foreign_bname,
                config_from_pb(st.config) if st.has_config else None,
                {q.queue_id: bounds_from_pb(q) for q in st.physical_queues},
            )
        return out

    def check(self, topic: str, states: dict[str, BrokerState]) -> ConsistencyReport:
        """The global epoch check over every live broker that takes part in the topic."""
        return check_states(topic, states)

    def _require_consistent(self, topic: str, report: ConsistencyReport) -> None:
        if not report.ok:
            raise InconsistentTopicError(
                f"static topic {topic!r} is inconsistent: {report.describe()}. Run repairStaticTopic"
            )

    # ------------------------------------------------------------------ writes

    def _write(self, states: dict[str, BrokerState], copies: dict[str, TopicQueueMapping], order: list[str]) -> None:
        for name in order:
            req = pb.WriteMappingRequest(mapping_json=copies[name].to_json())
            self.admin.call(name, self.admin.stub(states[name].addr).WriteMapping, req)

    # ------------------------------------------------------------------ create / grow

    def update(
        self, topic: str, total_queues: int, *, cluster: str | None = None, brokers: list[str] | None = None
    ) -> OperationResult:
        if total_queues <= 0:
            raise InvalidArgumentError(f"-qn must be positive, got {total_queues}")
        targets = list(self.admin.target_brokers(cluster=cluster, brokers=brokers))
        states = self.gather(topic)
        report = self.check(topic, states)
        chains: dict[int, Chain] = {}
        if report.exists:
            self._require_consistent(topic, report)
            chains = dict(report.chains)
            if total_queues < report.total_queues:
                raise InvalidArgumentError(
                    f"static topic {topic!r} has {report.total_queues} logic queues; shrinking to {total_queues} "
                    "is refused (a key's logic queue must never change)"
                )
        now = _now_ms()
        placements = plan_allocation(total_queues, targets, leaders_of(chains))
        next_ids = {n: s.physical_count for n, s in states.items()}
        for q, item in new_items(placements, next_ids, gens={}, logic_offset=0, now_ms=now).items():
            chains[q] = (item,)
        epoch = next_epoch(report.epoch, now)
        copies = copies_for(topic, epoch, total_queues, chains, states)
        hosting = sorted({c[-1].bname for c in chains.values()})
        self._write(states, copies, hosting + [n for n in sorted(states) if n not in hosting])
        return OperationResult(
            topic, epoch, total_queues, {}, dict(placements), f"{len(placements)} logic queue(s) created"
        )

    # ------------------------------------------------------------------ remap

    def remap(
        self,
        topic: str,
        *,
        cluster: str | None = None,
        brokers: list[str] | None = None,
        on_step: Callable[[str], None] | None = None,
    ) -> OperationResult:
        """`on_step` is called after each step ("switched", "fenced", "settled", "done"): a hook for
        progress reports and for fault-injection tests."""
        step = on_step or (lambda _name: None)
        targets = list(self.admin.target_brokers(cluster=cluster, brokers=brokers))
        states = self.gather(topic)
        report = self.check(topic, states)
        if not report.exists:
            raise TopicNotFoundError(f"static topic {topic!r} does not exist")
        self._require_consistent(topic, report)
        chains = dict(report.chains)
        now = _now_ms()
        counts = {n: st.physical_count for n, st in states.items()}
        plan = plan_remap_steps(topic, report.total_queues, report.epoch, chains, targets, counts, states, now)
        if plan is None:
            return OperationResult(topic, report.epoch, report.total_queues, {}, {}, "nothing to move")
        moves, epoch, pending, map_in, map_out = plan.moves, plan.epoch, plan.pending, plan.map_in, plan.map_out
        self._write(states, plan.copies, map_in)  # 1. switch to new: new leaders writable, offsets undecided
        step("switched")
        self._write(states, plan.copies, map_out)  # 2. fence old: no more writes to the old leaders
        step("fenced")
        settled = self._settle(topic, pending, list(moves), now)  # 3. settle new
        final = self._cleaned(topic, {**chains, **settled}, states)
        copies = copies_for(topic, epoch, report.total_queues, final, states)
        self._write(states, copies, map_in)
        step("settled")
        self._write(states, copies, [n for n in sorted(states) if n not in map_in])
        step("done")
        moved = {q: (chains[q][-1].bname, moves[q]) for q in moves}
        return OperationResult(topic, epoch, report.total_queues, moved, {}, f"{len(moves)} logic queue(s) moved")

    def _settle(self, topic: str, chains: dict[int, Chain], queues: list[int], now: int) -> dict[int, Chain]:
        """Decide each undecided leader's logic offset from its fenced predecessor's final max."""
        olds = {q: chains[q][-2] for q in queues}
        fenced = self.gather(topic, {n: self.admin.broker_addr(n) for n in sorted({o.bname for o in olds.values()})})
        out = {}
        for q in queues:
            old = olds[q]
            bounds = fenced[old.bname].physical.get(old.queue)
            final_max = bounds.max_offset if bounds is not None else old.start_offset
            last_ts = bounds.last_store_timestamp if bounds is not None else 0
            out[q] = settled_chain(chains[q], final_max, last_ts, now)
        return out

    def _cleaned(self, topic: str, chains: dict[int, Chain], states: dict[str, BrokerState]) -> dict[int, Chain]:
        """Drop items whose physical data retention has removed (never the leader)."""
        lows = {(n, q): o.min_offset for n, s in states.items() for q, o in s.physical.items()}
        return {q: drop_expired(chain, lows) for q, chain in chains.items()}

    # ------------------------------------------------------------------ repair

    def repair(self, topic: str) -> OperationResult:
        states = self.gather(topic)
        report = self.check(topic, states)
        if not report.exists:
            raise TopicNotFoundError(f"static topic {topic!r} does not exist")
        if report.ok:
            return OperationResult(topic, report.epoch, report.total_queues, {}, {}, "consistent: nothing to repair")
        fatal = [p for p in report.problems if "not alive" in p or "no live broker" in p or "conflicting" in p]
        if fatal or len(report.chains) < report.total_queues:
            raise InconsistentTopicError(
                f"static topic {topic!r} cannot be repaired while: {'; '.join(fatal) or 'logic queues are missing'}. "
                "Bring the missing brokers back first"
            )
        now = _now_ms()
        epoch = next_epoch(report.epoch, now)
        chains = dict(report.chains)
        if report.undecided:
            fence = copies_for(topic, epoch, report.total_queues, chains, states)
            olds = sorted({chains[q][-2].bname for q in report.undecided if len(chains[q]) > 1})
            self._write(states, fence, olds)  # make sure the old leaders are fenced before settling
            chains.update(self._settle(topic, chains, [q for q in report.undecided if len(chains[q]) > 1], now))
            for q in report.undecided:
                if len(chains[q]) == 1:  # an undecided first item: nothing before it, start at 0
                    chains[q] = (replace(chains[q][0], logic_offset=0, update_time=now),)
        copies = copies_for(topic, epoch, report.total_queues, self._cleaned(topic, chains, states), states)
        leaders = sorted({c[-1].bname for c in chains.values()})
        self._write(states, copies, leaders + [n for n in sorted(states) if n not in leaders])
        return OperationResult(topic, epoch, report.total_queues, {}, {}, f"repaired: {report.describe()}")

    # ------------------------------------------------------------------ status / delete

    def status(self, topic: str) -> tuple[ConsistencyReport, dict[str, BrokerState]]:
        states = self.gather(topic)
        return self.check(topic, states), states

    def delete(self, topic: str) -> list[str]:
        states = self.gather(topic)
        holders = [n for n, s in states.items() if s.mapping is not None or s.config is not None or s.foreign_bname]
        if not holders:
            raise TopicNotFoundError(f"no live broker has static topic {topic!r}")
        for name in holders:
            self.admin.call(name, self.admin.stub(states[name].addr).DeleteStaticTopic, pb.TopicName(topic=topic))
        return holders
