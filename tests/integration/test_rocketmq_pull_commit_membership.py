"""A PullConsumer that commits offsets on a real Apache RocketMQ is not a member of its group: it
sends no consumer heartbeat, so RocketMQ's orderly consumers and our exclusive consumers of the
same group do not allocate it queues that nobody reads. The group is still known to the brokers:
its commits are stored and `mqadmin consumerProgress` shows it."""

from __future__ import annotations

import time

from staticmq_spark.backends.rocketmq.consumer_groups import consumer_ids
from staticmq_spark.backends.rocketmq.wire.codes import RequestCode, ResponseCode
from staticmq_spark.client import ExclusiveConsumer, PullConsumer
from staticmq_spark.local_clusters.rocketmq import LocalRocketMQ
from tests.support.rocketmq_exclusive import broker_call, names, send, settle


def _members(cluster: LocalRocketMQ, group: str) -> dict[str, list[str]]:
    """GET_CONSUMER_LIST_BY_GROUP at every broker: the client ids each lists (none: no consumer)."""
    out: dict[str, list[str]] = {}
    for name in cluster.broker_names:
        resp = broker_call(cluster, name, RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group})
        out[name] = consumer_ids(resp.body) if resp.code == ResponseCode.SUCCESS else []
    return out


def test_a_committing_pull_consumer_is_not_a_member_and_the_exclusive_consumer_of_its_group_gets_every_queue(
    rocketmq_cluster: LocalRocketMQ,
) -> None:
    topic, group = names("pullmember")
    rocketmq_cluster.update_static_topic(topic, 4, rocketmq_cluster.broker_names)
    ns = rocketmq_cluster.address
    send(ns, topic, 4, "m", 3)
    with PullConsumer(ns, group=group) as puller:
        for q in range(4):
            puller.commit(topic, q, 1)
        assert [puller.committed(topic, q) for q in range(4)] == [1, 1, 1, 1]
        assert all(ids == [] for ids in _members(rocketmq_cluster, group).values())
        # the group is known without a member: RocketMQ's own tool shows its progress
        progress = rocketmq_cluster.mqadmin("consumerProgress", "-g", group)
        assert sorted(int(f[2]) for f in (line.split() for line in progress.splitlines()) if f[:1] == [topic]) == [
            0,
            1,
            2,
            3,
        ], progress
        with ExclusiveConsumer(ns, group, topic, lease_s=6, client_id="a-exclusive") as exclusive:
            settle([exclusive], [{0, 1, 2, 3}])
            puller.commit(topic, 0, 2)  # committing while the exclusive consumer runs changes nothing
            settle([exclusive], [{0, 1, 2, 3}])
            assert all(ids == ["a-exclusive"] for ids in _members(rocketmq_cluster, group).values())
            got: dict[int, list[int]] = {}
            deadline = time.monotonic() + 30
            while sum(len(v) for v in got.values()) < 7 and time.monotonic() < deadline:
                for result in exclusive.poll(max_messages=16, wait_s=2):
                    got.setdefault(result.queue_id, []).extend(result.batch.column("queue_offset").to_pylist())
            assert got == {0: [2], 1: [1, 2], 2: [1, 2], 3: [1, 2]}
