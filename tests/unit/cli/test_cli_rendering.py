"""`staticmq admin` rendering, written once for every backend, checked fast against the in-memory
backend (the same commands run against real clusters in tests/integration/test_cli*.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from staticmq_spark.backends import open_backend
from staticmq_spark.backends.memory import MemoryCluster
from staticmq_spark.cli.main import build_parser
from staticmq_spark.errors import UnsupportedOperationError


@pytest.fixture
def cluster() -> Iterator[MemoryCluster]:
    c = MemoryCluster("cli-rendering", ["broker-0", "broker-1", "broker-2"])
    c.create_static_topic("orders", 4, ["broker-0", "broker-1"])
    c.send("orders", [f"user-{i}" for i in range(40)])
    yield c
    c.close()


def admin(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    parsed = build_parser().parse_args(["admin", args[0], "-n", "memory://cli-rendering", *args[1:]])
    assert parsed.handler(parsed) == 0
    return capsys.readouterr().out


def test_topic_status_shows_every_logic_queue_with_its_leader_bounds_and_segments(cluster, capsys) -> None:
    status = json.loads(admin(capsys, "topicStatus", "-t", "orders", "--json"))
    assert (status["totalQueues"], status["consistent"]) == (4, True)
    assert sum(q["maxOffset"] - q["minOffset"] for q in status["queues"]) == 40
    assert {q["leader"] for q in status["queues"]} == {"broker-0", "broker-1"}
    text = admin(capsys, "topicStatus", "-t", "orders")
    assert text.startswith("static topic orders: 4 logic queues, epoch ") and "consistent" in text
    assert len(text.splitlines()) == 2 + 4


def test_topic_status_after_a_remap_shows_both_segments_and_the_offset_jump(cluster, capsys) -> None:
    cluster.remap("orders", ["broker-2"])
    status = json.loads(admin(capsys, "topicStatus", "-t", "orders", "--json"))
    assert {q["leader"] for q in status["queues"]} == {"broker-2"}
    for q in status["queues"]:
        old, new = q["segments"]
        assert new["bname"] == "broker-2" and new["logicOffset"] >= old["physicalMax"]
        assert q["minOffset"] == 0 and q["maxOffset"] == new["logicOffset"]


def test_topic_route_lists_each_logic_queue_and_its_broker(cluster, capsys) -> None:
    route = json.loads(admin(capsys, "topicRoute", "-t", "orders", "--json"))
    assert (route["static"], route["totalQueues"]) == (True, 4)
    assert [q["queueId"] for q in route["queues"]] == [0, 1, 2, 3]
    lines = admin(capsys, "topicRoute", "-t", "orders").splitlines()
    assert lines[0] == "topic orders (static, 4 logic queues)"
    assert sum(line.startswith("  queue ") for line in lines) == 4


def test_cluster_list_and_topic_list_render_as_tables_and_json(cluster, capsys) -> None:
    brokers = json.loads(admin(capsys, "clusterList", "--json"))
    assert [b["name"] for b in brokers] == ["broker-0", "broker-1", "broker-2"]
    topics = json.loads(admin(capsys, "topicList", "--json"))
    assert topics == [{"topic": "orders", "static": True, "totalQueues": 4, "brokers": ["broker-0", "broker-1"]}]
    assert admin(capsys, "topicList").splitlines()[1].split()[:3] == ["orders", "static", "4"]


def test_consumer_progress_counts_lag_per_logic_queue_and_marks_queues_without_commit(cluster, capsys) -> None:
    reader = open_backend("memory://cli-rendering").reader()
    reader.commit_offset("etl", "orders", 0, 1)
    progress = json.loads(admin(capsys, "consumerProgress", "-g", "etl", "-t", "orders", "--json"))
    rows = {q["queueId"]: q for q in progress["queues"]}
    assert rows[0]["consumerOffset"] == 1 and rows[0]["lag"] == rows[0]["brokerOffset"] - 1
    assert all(rows[q]["consumerOffset"] is None and rows[q]["lag"] is None for q in (1, 2, 3))
    assert progress["queuesWithoutCommit"] == 3 and progress["totalLag"] == rows[0]["lag"]


def test_a_command_the_backend_cannot_do_fails_naming_it(cluster) -> None:
    parsed = build_parser().parse_args(["admin", "deleteTopic", "-n", "memory://cli-rendering", "-t", "orders"])
    with pytest.raises(UnsupportedOperationError, match="deleteTopic"):
        parsed.handler(parsed)
