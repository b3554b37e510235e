"""Topic and consumer-group listings of a staticmq cluster (RocketMQ's `topicList`, `groupList`),
asked from every live broker."""

from __future__ import annotations

from staticmq_spark.backends.staticmq.rpc import BrokerCalls
from staticmq_spark.backends.types import GroupSummary, TopicSummary
from staticmq_spark.protocol.pb import staticmq_pb2 as pb


def topic_list(admin: BrokerCalls) -> list[TopicSummary]:
    found: dict[str, list[tuple[str, int, bool, int]]] = {}
    for b in admin.cluster_info():
        for cfg in admin.topic_configs(b.addr):
            found.setdefault(cfg.name, []).append((b.name, cfg.write_queues, cfg.is_static, cfg.total_queues))
    out = []
    for topic, held in sorted(found.items()):
        static = any(s for _, _, s, _ in held)
        total = max(t for *_, t in held) if static else sum(w for _, w, _, _ in held)
        out.append(TopicSummary(topic, static, total, tuple(sorted(n for n, *_ in held))))
    return out


def group_list(admin: BrokerCalls) -> list[GroupSummary]:
    topics: dict[str, set[str]] = {}
    last: dict[str, int] = {}
    for b in admin.cluster_info():
        req = pb.ConsumerOffsetsRequest(group="", topic="")
        for e in admin.call(b.name, admin.stub(b.addr).ListConsumerOffsets, req).entries:
            topics.setdefault(e.group, set()).add(e.topic)
            last[e.group] = max(last.get(e.group, 0), e.update_timestamp)
    return [GroupSummary(g, tuple(sorted(t)), last[g]) for g, t in sorted(topics.items())]
