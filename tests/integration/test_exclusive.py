"""Exclusive consumption: pull locks with leases, no overlap between consumers, take-over."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from staticmq_spark.backends.staticmq.rpc import Channels, invoke
from staticmq_spark.client import Admin, ExclusiveConsumer, Producer, PullConsumer, PullResult
from staticmq_spark.errors import LockHeldError
from staticmq_spark.protocol.pb import consume_pb2 as cpb
from tests.support.static_helpers import send_numbered
from tests.support.topics import create_topic
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]


def offsets_of(results: list[PullResult]) -> list[int]:
    return [o for r in results for o in r.batch.column("queue_offset").to_pylist()]


def produce_slowly(namesrv: str, topic: str, count: int, stop: threading.Event) -> None:
    with Producer(namesrv) as producer:
        for i in range(count):
            if stop.is_set():
                return
            producer.send(topic, f"m{i}".encode(), queue=0)
            time.sleep(0.01)  # pacing: messages keep arriving while the consumers run (not a wait)


def test_two_consumers_never_share_a_queue_and_the_survivor_takes_over_after_a_kill(
    local_cluster, unique_topic
) -> None:
    c = local_cluster(brokers=1)
    topic = unique_topic("excl")
    create_topic(c.namesrv, topic, queues=1)
    lease = 2.0
    worker = subprocess.Popen(
        [sys.executable, "-m", "tests.support.exclusive_worker", c.namesrv, "gx", topic, str(lease)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    lines: list[dict[str, object]] = []
    reader = threading.Thread(target=lambda: lines.extend(json.loads(line) for line in worker.stdout or ()))
    reader.start()
    stop = threading.Event()
    producer = threading.Thread(target=produce_slowly, args=(c.namesrv, topic, 400, stop))
    try:
        wait_until(lambda: lines, 20, message="the exclusive worker to start")
        producer.start()
        wait_until(
            lambda: any("offsets" in line for line in lines), 20, message=lambda: f"the worker's first offsets; {lines}"
        )
        survivor_got: list[int] = []
        with ExclusiveConsumer(c.namesrv, "gx", topic, lease_s=lease, client_id="survivor") as survivor:
            for _ in range(10):  # both alive: the worker holds the queue
                survivor_got += offsets_of(survivor.poll(max_messages=50, wait_s=0.1))
            assert survivor_got == [] and survivor.held == []
            worker.kill()
            killed_at = time.monotonic()
            worker.wait(10)
            reader.join(10)
            took_over_at = None
            while time.monotonic() - killed_at < lease + 5:
                got = offsets_of(survivor.poll(max_messages=50, wait_s=0.2))
                if got and took_over_at is None:
                    took_over_at = time.monotonic()
                survivor_got += got
            assert took_over_at is not None and took_over_at - killed_at < lease + 1.5
            stop.set()
            producer.join(30)
            while True:
                got = offsets_of(survivor.poll(max_messages=200, wait_s=0.3))
                if not got:
                    break
                survivor_got += got
        batches = [line["offsets"] for line in lines if "offsets" in line]
        worker_got = [o for b in batches for o in b]  # type: ignore[union-attr]
        assert worker_got == sorted(set(worker_got)) and survivor_got == sorted(set(survivor_got))
        overlap = set(worker_got) & set(survivor_got)
        assert overlap <= set(batches[-1]), "only the batch handed out at the kill (uncommitted) comes again"
        sent = PullConsumer(c.namesrv).max_offset(topic, 0)
        assert set(worker_got) | set(survivor_got) == set(range(sent)), "nothing was skipped"
    finally:
        stop.set()
        worker.kill()
        worker.wait(10)


def test_a_consumer_whose_lease_ended_hands_out_nothing_and_a_successor_takes_over(local_cluster, unique_topic) -> None:
    c = local_cluster(brokers=1)
    topic = unique_topic("excllease")
    create_topic(c.namesrv, topic, queues=2)
    with Producer(c.namesrv) as producer:
        producer.send_batch(topic, [f"a{i}" for i in range(10)], queue=0)
        producer.send_batch(topic, [f"b{i}" for i in range(10)], queue=1)
    first = ExclusiveConsumer(c.namesrv, "gl", topic, lease_s=1.0, client_id="first")
    second = ExclusiveConsumer(c.namesrv, "gl", topic, lease_s=1.0, client_id="second")
    try:
        got_first = first.poll(max_messages=4, wait_s=1)
        assert sorted(r.queue_id for r in got_first) == [0, 1] and len(first.held) == 2
        assert second.poll(max_messages=4, wait_s=0.3) == [] and second.held == []
        first.commit()
        time.sleep(1.2)  # not a wait: the first consumer stops renewing, its 1 s lease runs out
        assert first.held == []
        got_second = second.poll(max_messages=100, wait_s=2)
        assert sorted(r.queue_id for r in got_second) == [0, 1]
        assert sorted(offsets_of(got_second)) == sorted([*range(4, 10), *range(4, 10)])
        assert first.poll(max_messages=100, wait_s=0.3) == [], "a lost lease hands out nothing"
    finally:
        second.close()
        first.close()


def test_close_releases_the_lock_at_once(local_cluster, unique_topic) -> None:
    c = local_cluster(brokers=1)
    topic = unique_topic("exclclose")
    create_topic(c.namesrv, topic, queues=1)
    with Producer(c.namesrv) as producer:
        producer.send_batch(topic, [f"m{i}" for i in range(6)], queue=0)
    with ExclusiveConsumer(c.namesrv, "gc", topic, lease_s=60.0) as first:
        assert offsets_of(first.poll(max_messages=3, wait_s=1)) == [0, 1, 2]
    with ExclusiveConsumer(c.namesrv, "gc", topic, lease_s=60.0) as second:
        started = time.monotonic()
        assert offsets_of(second.poll(max_messages=10, wait_s=2)) == [3, 4, 5]
        assert time.monotonic() - started < 1.5


def test_only_the_lock_holder_may_pull_or_commit(local_cluster, unique_topic) -> None:
    c = local_cluster(brokers=1)
    topic = unique_topic("exclraw")
    create_topic(c.namesrv, topic, queues=1)
    addr = c.broker_addr("broker-0")
    channels = Channels()
    try:
        stub = channels.consume(addr)
        lock = cpb.LockRequest(group="gr", topic=topic, client_id="a", queue_ids=[0], lease_ms=5000)
        assert list(invoke("broker-0", stub.LockQueues, lock, 5).locked) == [0]
        lock.client_id = "b"
        assert list(invoke("broker-0", stub.LockQueues, lock, 5).locked) == []
        pull = cpb.ExclusivePullRequest(
            group="gr", topic=topic, client_id="b", queue_id=0, max_messages=1, lease_ms=5000
        )
        with pytest.raises(LockHeldError, match="held by client 'a'"):
            invoke("broker-0", stub.ExclusivePull, pull, 5)
        commit = cpb.ExclusiveCommitRequest(group="gr", topic=topic, client_id="b", queue_id=0, offset=3)
        with pytest.raises(LockHeldError):
            invoke("broker-0", stub.ExclusiveCommit, commit, 5)
    finally:
        channels.close()


def test_exclusive_consumption_of_a_static_topic_follows_its_leader(local_cluster, unique_topic) -> None:
    c = local_cluster(brokers=2)
    topic = unique_topic("exclstatic")
    with Admin(c.namesrv) as admin, Producer(c.namesrv) as producer:
        admin.update_static_topic(topic, 2, cluster="DefaultCluster")
        send_numbered(producer, topic, 0, "q0", 5)
        send_numbered(producer, topic, 1, "q1", 5)
        with ExclusiveConsumer(c.namesrv, "gs", topic, lease_s=5.0) as consumer:
            results = consumer.poll(max_messages=10, wait_s=2)
            results += consumer.poll(max_messages=10, wait_s=0.5)
    assert sorted((r.queue_id, tuple(r.batch.column("queue_offset").to_pylist())) for r in results) == [
        (0, (0, 1, 2, 3, 4)),
        (1, (0, 1, 2, 3, 4)),
    ]
