"""`staticmq send / pull / admin -n rocketmq://…` against a real Apache RocketMQ cluster."""

from __future__ import annotations

import itertools
import json

from staticmq_spark.hashing import queue_for_key
from staticmq_spark.local_clusters.rocketmq import LocalRocketMQ
from tests.support.cli import staticmq

_n = itertools.count()


def _topic(cluster: LocalRocketMQ, queues: int = 4) -> str:
    topic = f"rmq-cli-{next(_n)}"
    cluster.update_static_topic(topic, queues)
    return topic


def test_send_and_pull_with_a_rocketmq_address(rocketmq_cluster: LocalRocketMQ) -> None:
    topic = _topic(rocketmq_cluster)
    ns = rocketmq_cluster.address
    sent = staticmq("send", "-n", ns, "-t", topic, "--key", "user-7", "hello", "world")
    assert sent.returncode == 0, sent.stderr
    acks = [json.loads(line) for line in sent.stdout.splitlines()]
    assert [a["queueId"] for a in acks] == [queue_for_key("user-7", 4)] * 2
    assert [a["queueOffset"] for a in acks] == [0, 1]
    lines = '{"key": "a", "body": "x", "properties": {"p": "1"}}\n{"key": "b", "body": "y", "tags": "t"}\n'
    assert staticmq("send", "-n", ns, "-t", topic, "--stdin", "--json", stdin=lines).returncode == 0
    pulled = staticmq("pull", "-n", ns, "-t", topic, "--from", "earliest")
    assert pulled.returncode == 0, pulled.stderr
    rows = [json.loads(line) for line in pulled.stdout.splitlines()]
    assert sorted(r["body"] for r in rows) == ["hello", "world", "x", "y"]
    by_body = {r["body"]: r for r in rows}
    assert by_body["x"]["properties"] == {"p": "1"} and by_body["y"]["tags"] == "t"
    assert by_body["x"]["queueId"] == queue_for_key("a", 4)


def test_admin_reads_route_status_cluster_and_progress(rocketmq_cluster: LocalRocketMQ) -> None:
    topic = _topic(rocketmq_cluster, 2)
    ns = rocketmq_cluster.address
    assert staticmq("send", "-n", ns, "-t", topic, "--queue", "1", "a", "b", "c").returncode == 0
    route = json.loads(staticmq("admin", "topicRoute", "-n", ns, "-t", topic, "--json").stdout)
    assert route["static"] and route["totalQueues"] == 2
    status = json.loads(staticmq("admin", "topicStatus", "-n", ns, "-t", topic, "--json").stdout)
    assert [(q["queueId"], q["minOffset"], q["maxOffset"]) for q in status["queues"]] == [(0, 0, 0), (1, 0, 3)]
    brokers = json.loads(staticmq("admin", "clusterList", "-n", ns, "--json").stdout)
    assert {b["name"] for b in brokers} == {"broker-a", "broker-b"}
    progress = json.loads(staticmq("admin", "consumerProgress", "-n", ns, "-g", "nobody", "-t", topic, "--json").stdout)
    assert [q["consumerOffset"] for q in progress["queues"]] == [None, None]


def test_admin_commands_rocketmq_lacks_name_mqadmin(rocketmq_cluster: LocalRocketMQ) -> None:
    out = staticmq("admin", "updateTopic", "-n", rocketmq_cluster.address, "-t", "x", "-c", "DefaultCluster")
    assert out.returncode != 0
    assert "mqadmin updateTopic" in out.stderr


def test_pull_follows_a_mqadmin_remap_across_the_offset_jump(rocketmq_cluster: LocalRocketMQ) -> None:
    topic = f"rmq-cli-{next(_n)}"
    rocketmq_cluster.update_static_topic(topic, 2, ["broker-a"])
    ns = rocketmq_cluster.address
    assert staticmq("send", "-n", ns, "-t", topic, "--queue", "0", "a", "b").returncode == 0
    rocketmq_cluster.remap_static_topic(topic, ["broker-b"])
    assert staticmq("send", "-n", ns, "-t", topic, "--queue", "0", "c").returncode == 0
    pulled = staticmq(
        "pull", "-n", ns, "-t", topic, "-q", "0", "--from", "earliest", "--format", "{queueOffset} {body}"
    )
    assert pulled.returncode == 0, pulled.stderr
    assert pulled.stdout.split("\n")[:3] == ["0 a", "1 b", "10000 c"]
