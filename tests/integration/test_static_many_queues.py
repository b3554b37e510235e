"""Static topics with many logic queues (more than 10, so that string order and number order of
the logic queues differ): create, grow and remap on a real 3-broker cluster."""

from __future__ import annotations

import pytest

from staticmq_spark.client import Admin


@pytest.mark.parametrize("queues", [12, 16, 64, 256])
def test_static_topic_with_many_logic_queues_can_be_created_grown_and_remapped(
    local_cluster, unique_topic, queues: int
) -> None:
    c = local_cluster(brokers=3)
    topic = unique_topic("many")
    with Admin(c.namesrv) as admin:
        created = admin.update_static_topic(topic, queues, cluster="DefaultCluster")
        assert sorted(created.created) == list(range(queues))
        grown = admin.update_static_topic(topic, queues + 5, cluster="DefaultCluster")
        assert sorted(grown.created) == list(range(queues, queues + 5))
        moved = admin.remapping_static_topic(topic, brokers=["broker-0", "broker-1"])
        assert moved.moved and all(to != "broker-2" for _, to in moved.moved.values())
        report, _ = admin.static_topic_status(topic)
        assert report.ok and len(report.chains) == queues + 5
        assert {chain[-1].bname for chain in report.chains.values()} == {"broker-0", "broker-1"}
        view = admin.route_view(topic)
        assert view.total_queues == queues + 5
        assert all(view.write_queues[q].broker != "broker-2" for q in range(queues + 5))
