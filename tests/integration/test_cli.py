"""The `staticmq` command as scripts use it: JSON lines out, errors on stderr, exit statuses."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.cli import staticmq
from tests.support.waiting import wait_until


def test_admin_update_topic_route_status_and_delete(cluster_process, unique_topic) -> None:
    c = cluster_process(brokers=2)
    topic = unique_topic()
    out = staticmq("admin", "updateTopic", "-n", c.namesrv, "-t", topic, "-c", "DefaultCluster", "-r", "3", "-w", "3")
    assert out.returncode == 0, out.stderr
    route = json.loads(staticmq("admin", "topicRoute", "-n", c.namesrv, "-t", topic, "--json").stdout)
    assert {b["broker"] for b in route["brokers"]} == {"broker-0", "broker-1"}
    assert len(route["queues"]) == 6
    status = json.loads(staticmq("admin", "topicStatus", "-n", c.namesrv, "-t", topic, "--json").stdout)
    assert len(status["queues"]) == 6
    assert staticmq("admin", "deleteTopic", "-n", c.namesrv, "-t", topic).returncode == 0
    gone = staticmq("admin", "topicRoute", "-n", c.namesrv, "-t", topic)
    assert gone.returncode != 0 and topic in gone.stderr


def test_send_prints_one_json_line_per_message_and_pull_reads_them_back(cluster_process, unique_topic) -> None:
    c = cluster_process(brokers=1)
    topic = unique_topic()
    staticmq("admin", "updateTopic", "-n", c.namesrv, "-t", topic, "-b", "broker-0", "-r", "2", "-w", "2")
    sent = staticmq("send", "-n", c.namesrv, "-t", topic, "--key", "k1", "--tags", "T", "hello", "world")
    assert sent.returncode == 0, sent.stderr
    lines = [json.loads(line) for line in sent.stdout.splitlines()]
    assert [line["queueOffset"] for line in lines] == [0, 1]
    assert len({line["queueId"] for line in lines}) == 1
    stdin = "\n".join(json.dumps({"key": f"k{i}", "body": f"b{i}", "properties": {"p": str(i)}}) for i in range(5))
    sent = staticmq("send", "-n", c.namesrv, "-t", topic, "--stdin", "--json", stdin=stdin)
    assert sent.returncode == 0 and len(sent.stdout.splitlines()) == 5
    pulled = staticmq("pull", "-n", c.namesrv, "-t", topic)
    rows = [json.loads(line) for line in pulled.stdout.splitlines()]
    assert len(rows) == 7
    assert {"topic", "queueId", "queueOffset", "key", "tags", "body", "properties", "storeTimestamp"} <= set(rows[0])
    hello = next(r for r in rows if r["body"] == "hello")
    assert (hello["key"], hello["tags"]) == ("k1", "T")
    assert next(r for r in rows if r["body"] == "b3")["properties"] == {"p": "3"}
    limited = staticmq("pull", "-n", c.namesrv, "-t", topic, "--max", "3")
    assert len(limited.stdout.splitlines()) == 3


def test_send_to_a_missing_topic_fails_with_a_message_on_stderr(cluster_process) -> None:
    c = cluster_process(brokers=1)
    out = staticmq("send", "-n", c.namesrv, "-t", "missing", "x")
    assert out.returncode != 0
    assert "missing" in out.stdout + out.stderr


def test_bad_arguments_are_refused(cluster_process) -> None:
    c = cluster_process(brokers=1)
    out = staticmq("admin", "updateTopic", "-n", c.namesrv, "-t", "t")
    assert out.returncode != 0 and "-c CLUSTER or -b" in out.stderr
    out = staticmq("pull", "-n", c.namesrv, "-t", "t", "--from", "yesterday")
    assert out.returncode != 0


def test_cluster_started_from_the_example_config_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import signal
    from pathlib import Path

    example = (Path(__file__).resolve().parents[2] / "conf" / "cluster.toml").read_text()
    config = tmp_path / "cluster.toml"
    config.write_text(
        example.replace('data_dir = "./staticmq-data"', f'data_dir = "{tmp_path / "data"}"').replace(
            "namesrv_port = 9876", "namesrv_port = 0"
        )
    )
    ready = tmp_path / "ready.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "staticmq_spark.cli", "cluster", "--config", str(config), "--ready-file", str(ready)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:

        def is_ready() -> bool:
            if ready.exists():
                return True
            assert proc.poll() is None, f"staticmq cluster --config exited with {proc.returncode} before it was ready"
            return False

        wait_until(is_ready, 60, interval_s=0.1, message=f"staticmq cluster --config to write {ready}")
        info = json.loads(ready.read_text())
        assert sorted(info["brokers"]) == ["broker-0", "broker-1", "broker-2"]
        assert (tmp_path / "data" / "broker-2" / "broker.json").exists()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0


def test_pull_tags_prints_only_messages_with_those_tags_at_their_offsets(cluster_process, unique_topic) -> None:
    c = cluster_process(brokers=1)
    topic = unique_topic()
    created = staticmq("admin", "updateStaticTopic", "-n", c.namesrv, "-t", topic, "-qn", "1", "-c", "DefaultCluster")
    assert created.returncode == 0, created.stderr
    for tag, body in [("A", "a0"), ("B", "b0"), ("A", "a1"), ("C", "c0"), ("B", "b1")]:
        assert staticmq("send", "-n", c.namesrv, "-t", topic, "--tags", tag, body).returncode == 0
    pulled = staticmq("pull", "-n", c.namesrv, "-t", topic, "--tags", "A || C")
    assert pulled.returncode == 0, pulled.stderr
    lines = [json.loads(line) for line in pulled.stdout.splitlines()]
    assert [(m["body"], m["queueOffset"]) for m in lines] == [("a0", 0), ("a1", 2), ("c0", 3)]
    bad = staticmq("pull", "-n", c.namesrv, "-t", topic, "--tags", "||")
    assert bad.returncode != 0 and "--tags" in bad.stderr
