"""What users of kcat and mqadmin expect: `pull --follow` with `--format`, `pull -L`,
`admin topicList`, `groupList` and `resetOffsetByTime` on a static topic (logic offsets)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

from staticmq_spark.client import Admin, Producer, PullConsumer
from tests.support.cli import read_line, staticmq
from tests.support.static_helpers import send_numbered


def test_pull_follow_prints_new_messages_in_the_format_and_stops_on_sigterm(cluster_process, unique_topic) -> None:
    c = cluster_process(brokers=1)
    topic = unique_topic("follow")
    with Admin(c.namesrv) as admin:
        admin.update_static_topic(topic, 2, cluster="DefaultCluster")
    args = ["pull", "-n", c.namesrv, "-t", topic, "--follow", "-f", "{queueId}/{queueOffset} {key}={body}"]
    proc = subprocess.Popen([sys.executable, "-m", "staticmq_spark.cli", *args], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    try:
        with Producer(c.namesrv) as producer:
            for i in range(3):
                producer.send(topic, f"v{i}".encode(), key=f"k{i}", queue=1)
                assert read_line(proc.stdout).decode() == f"1/{i} k{i}=v{i}\n"
        assert proc.poll() is None, "--follow keeps polling"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    bad = staticmq("pull", "-n", c.namesrv, "-t", topic, "-f", "{nope}")
    assert bad.returncode != 0 and "unknown field" in bad.stderr


def next_ms() -> int:
    """The next millisecond of the clock (waits for it, at most 1 ms)."""
    now = time.time_ns() // 1_000_000
    while time.time_ns() // 1_000_000 <= now:
        pass
    return now + 1


def test_topic_and_group_lists_and_resetting_a_group_on_a_static_topic(cluster_process, unique_topic) -> None:
    c = cluster_process(brokers=2)
    topic = unique_topic("reset")
    with Admin(c.namesrv) as admin, Producer(c.namesrv) as producer, PullConsumer(c.namesrv, group="readers") as pc:
        admin.update_static_topic(topic, 3, cluster="DefaultCluster")
        for q in range(3):
            send_numbered(producer, topic, q, "early", 4)
        middle = next_ms()  # store timestamps are ms: strictly after the early messages, before the late
        next_ms()
        for q in range(3):
            send_numbered(producer, topic, q, "late", 2)
            pc.commit(topic, q, 6)
    topics = json.loads(staticmq("admin", "topicList", "-n", c.namesrv, "--json").stdout)
    assert {"topic": topic, "static": True, "totalQueues": 3, "brokers": ["broker-0", "broker-1"]} in topics
    groups = json.loads(staticmq("admin", "groupList", "-n", c.namesrv, "--json").stdout)
    assert [g["topics"] for g in groups if g["group"] == "readers"] == [[topic]]
    listing = staticmq("pull", "-n", c.namesrv, "-L")
    assert listing.returncode == 0 and f'topic "{topic}" (static, 3 logic queues)' in listing.stdout

    def consumer_offsets() -> list[int]:
        out = staticmq("admin", "consumerProgress", "-n", c.namesrv, "-g", "readers", "-t", topic, "--json")
        return [r["consumerOffset"] for r in json.loads(out.stdout)["queues"]]

    def reset(*how: str) -> None:
        out = staticmq("admin", "resetOffsetByTime", "-n", c.namesrv, "-g", "readers", "-t", topic, *how)
        assert out.returncode == 0, out.stderr

    reset("-s", "earliest")
    assert consumer_offsets() == [0, 0, 0]
    reset("-s", str(middle))
    assert consumer_offsets() == [4, 4, 4]
    reset("-s", "latest")
    assert consumer_offsets() == [6, 6, 6]
    reset("-o", "2")
    assert consumer_offsets() == [2, 2, 2]
    bad = staticmq("admin", "resetOffsetByTime", "-n", c.namesrv, "-g", "readers", "-t", topic, "-s", "yesterday")
    assert bad.returncode != 0 and "-s must be" in bad.stderr


def test_output_piped_into_head_ends_quietly(cluster_process, unique_topic) -> None:  # type: ignore[no-untyped-def]
    c = cluster_process(brokers=1)
    topic = unique_topic("pipe")
    with Admin(c.namesrv) as admin:
        admin.update_static_topic(topic, 1, cluster="DefaultCluster")
    with Producer(c.namesrv) as producer:
        producer.send_batch(topic, [f"m{i}" for i in range(3000)], queue=0)
    done = subprocess.run(
        f"{sys.executable} -m staticmq_spark.cli pull -n {c.namesrv} -t {topic} --from earliest | head -n 2",
        shell=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert len(done.stdout.splitlines()) == 2
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr


def test_pull_follow_picks_up_a_queue_whose_broker_comes_back(local_cluster, unique_topic) -> None:  # type: ignore[no-untyped-def]
    c = local_cluster(brokers=2, heartbeat_ms=300, broker_timeout_ms=2000)
    topic = unique_topic("comeback")
    with Admin(c.namesrv) as admin:
        admin.update_static_topic(topic, 2, cluster="DefaultCluster")
        leaders = {q.queue_id: q.broker for q in admin.route_view(topic).write_queues}
    down = leaders[1]
    c.kill_broker(down)
    args = [
        "pull",
        "-n",
        c.namesrv,
        "-t",
        topic,
        "--from",
        "earliest",
        "--follow",
        "-f",
        "{queueId}/{queueOffset} {body}",
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "staticmq_spark.cli", *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    assert proc.stdout is not None
    try:
        c.start_broker(down)
        with Producer(c.namesrv) as producer:
            producer.send(topic, b"back", queue=1)
        assert read_line(proc.stdout, timeout=60).decode() == "1/0 back\n"
    finally:
        proc.terminate()
        proc.wait(20)
