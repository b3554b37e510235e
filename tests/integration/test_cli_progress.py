"""`staticmq admin consumerProgress` and `topicStatus` as users read them: one row per logic queue
of a static topic with logic offsets (also after a remap), queues without commits shown as such,
unknown groups and missing topics refused with a non-zero exit status."""

from __future__ import annotations

import json

from staticmq_spark.client import Admin, Producer, PullConsumer
from tests.support.cli import staticmq
from tests.support.static_helpers import send_numbered


def test_consumer_progress_of_a_static_topic_has_one_logic_row_per_queue_after_a_remap(
    cluster_process, unique_topic
) -> None:
    c = cluster_process(brokers=2)
    topic = unique_topic("progress")
    with Admin(c.namesrv) as admin, Producer(c.namesrv) as producer, PullConsumer(c.namesrv, group="g1") as consumer:
        admin.update_static_topic(topic, 12, cluster="DefaultCluster")
        for q in range(12):
            send_numbered(producer, topic, q, f"a{q}", 3)
        for q in range(6):
            consumer.commit(topic, q, 2)
        admin.remapping_static_topic(topic, brokers=["broker-0"])
        for q in range(12):
            send_numbered(producer, topic, q, f"b{q}", 2)
    out = staticmq("admin", "consumerProgress", "-n", c.namesrv, "-g", "g1", "-t", topic, "--json")
    assert out.returncode == 0, out.stderr
    progress = json.loads(out.stdout)
    rows = progress["queues"]
    assert [r["queueId"] for r in rows] == list(range(12))
    moved = [r for r in rows if r["brokerOffset"] > 5]  # logic offsets jump after a remap
    assert moved and all(r["brokerOffset"] >= 10_000 for r in moved)
    for r in rows[:6]:
        assert r["consumerOffset"] == 2 and r["lag"] == 3  # one old message, two after the remap
        assert r["lastCommitTime"].endswith("Z")
    assert all(r["consumerOffset"] is None and r["lag"] is None for r in rows[6:])
    assert progress["totalLag"] == sum(r["lag"] for r in rows[:6])
    text = staticmq("admin", "consumerProgress", "-n", c.namesrv, "-g", "g1", "-t", topic)
    assert text.returncode == 0 and "no commit" in text.stdout and "total lag" in text.stdout


def test_unknown_group_and_missing_topic_exit_non_zero_with_a_clear_message(cluster_process) -> None:
    c = cluster_process(brokers=1)
    brokers = json.loads(staticmq("admin", "clusterList", "-n", c.namesrv, "--json").stdout)
    assert {"lastHeartbeat", "lastHeartbeatTime"} <= set(brokers[0]) and brokers[0]["lastHeartbeatTime"].endswith("Z")
    by_env = staticmq("admin", "clusterList", env={"NAMESRV_ADDR": c.namesrv})
    assert by_env.returncode == 0 and "broker-0" in by_env.stdout, by_env.stderr
    out = staticmq("admin", "consumerProgress", "-n", c.namesrv, "-g", "nobody")
    assert out.returncode != 0 and "consumer group 'nobody' is unknown" in out.stderr
    out = staticmq("admin", "topicStatus", "-n", c.namesrv, "-t", "no-such-topic")
    assert out.returncode != 0 and "no-such-topic" in out.stderr and "does not exist" in out.stderr
