"""Static-topic admin operations, adapted on the admin side: the admin reads every live broker's
state directly and writes each broker's copy itself. Create/grow and remap are the shared steps
of backends/static_topic_steps.py (the pure plans of `mapping`, applied through this class, a
`MappingStore` over gRPC); repair, status and delete are staticmq's own.

Every operation starts with the global epoch check and refuses to go on when the brokers'
copies are inconsistent (repairStaticTopic completes a half-finished operation).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from staticmq_spark.backends import static_topic_steps as steps
from staticmq_spark.backends.staticmq.answers import bounds_from_pb
from staticmq_spark.backends.staticmq.rpc import BrokerCalls
from staticmq_spark.backends.types import OperationResult
from staticmq_spark.errors import InconsistentTopicError, TopicNotFoundError
from staticmq_spark.mapping import (
    BrokerState,
    Chain,
    ConsistencyReport,
    TopicQueueMapping,
    check_states,
    check_total_queues,
    copies_for,
    drop_expired,
    leaders_first,
    next_epoch,
)
from staticmq_spark.protocol.pb import staticmq_pb2 as pb
from staticmq_spark.protocol.wire.topic_config import config_from_pb


def _now_ms() -> int:
    return int(time.time() * 1000)


class StaticTopicAdmin:
    def __init__(self, admin: BrokerCalls) -> None:
        self.admin = admin

    # ------------------------------------------------------------------ the MappingStore port

    def gather(self, topic: str, brokers: Sequence[str] | None = None) -> dict[str, BrokerState]:
        """Every live broker's state of `topic` (or only `brokers`', each of which must be alive):
        the name server is asked once for the addresses."""
        if brokers is None:
            return self.gather_at(topic, {b.name: b.addr for b in self.admin.cluster_info()})
        return self.gather_at(topic, self.admin.target_brokers(brokers=list(brokers)))

    def gather_at(self, topic: str, addrs: Mapping[str, str]) -> dict[str, BrokerState]:
        """The state of `topic` on each broker of `addrs` (name -> address)."""
        out = {}
        for name, addr in sorted(addrs.items()):
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

    def write_mapping(self, broker: BrokerState, mapping: TopicQueueMapping) -> None:
        req = pb.WriteMappingRequest(mapping_json=mapping.to_json())
        self.admin.call(broker.name, self.admin.stub(broker.addr).WriteMapping, req)

    def check(self, topic: str, states: dict[str, BrokerState]) -> ConsistencyReport:
        """The global epoch check over every live broker that takes part in the topic."""
        return check_states(topic, states)

    # ------------------------------------------------------------------ create / grow, remap

    def update(
        self, topic: str, total_queues: int, *, cluster: str | None = None, brokers: list[str] | None = None
    ) -> OperationResult:
        check_total_queues(total_queues)
        targets = list(self.admin.target_brokers(cluster=cluster, brokers=brokers))
        return steps.create_or_grow(self, topic, total_queues, targets, _now_ms())

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
        targets = list(self.admin.target_brokers(cluster=cluster, brokers=brokers))
        return steps.remap(self, topic, targets, _now_ms(), on_step)

    def _cleaned(self, topic: str, chains: dict[int, Chain], states: dict[str, BrokerState]) -> dict[int, Chain]:
        """Drop items whose physical data retention has removed (never the leader)."""
        lows = steps.physical_lows(states)
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
            steps.write_copies(self, states, fence, olds)  # make sure the old leaders are fenced before settling
            moved = [q for q in report.undecided if len(chains[q]) > 1]
            chains.update(steps.settle_fenced(self, topic, chains, moved, now))
            for q in report.undecided:
                if len(chains[q]) == 1:  # an undecided first item: nothing before it, start at 0
                    chains[q] = (replace(chains[q][0], logic_offset=0, update_time=now),)
        copies = copies_for(topic, epoch, report.total_queues, self._cleaned(topic, chains, states), states)
        steps.write_copies(self, states, copies, leaders_first(chains, states))
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
