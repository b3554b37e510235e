"""The staged exactly-once sink on a real Apache RocketMQ (issue 38): tasks stage encoded batches on
the staging topic, the driver records the decision and forwards each staged body unchanged.

Rows are invisible before the decision and visible once after; a replayed commit writes nothing
twice; a driver killed (os._exit in a process of its own, tests/support/staged_commit_child.py)
before the decision, right after it, mid-forward with a send unanswered, and again during the
recovery, ends with every row once, in order, in murmur3(key) mod totalQueues; chunks of attempts
the commit does not name are never forwarded; a queue remapped before or during the copy gets its
rows once in its new segment; RocketMQ's Java consumer sees only the rows' own properties. Each
read back with staticmq's PullConsumer and with RocketMQ's own Java push consumer
(tests/support/staged_sink_checks.py). Broker kills: test_rocketmq_staged_sink_broker_kills.py.
These drive the backend's sink directly; tests/spark/test_rocketmq.py runs it through Spark."""

from __future__ import annotations

import itertools
import os
import pickle
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from staticmq_spark.backends.api import TaskWrite
from staticmq_spark.backends.registry import open_backend
from staticmq_spark.backends.rocketmq.backend import RocketMQBackend
from staticmq_spark.backends.rocketmq.sinks.staged_chunks import StagedChunk
from staticmq_spark.backends.rocketmq.sinks.staged_sink import RocketMQStagedSink
from staticmq_spark.backends.rocketmq.wire.stored_messages import SYSTEM_PROPERTIES
from staticmq_spark.backends.types import WriteSettings
from staticmq_spark.client import Admin, PullConsumer
from staticmq_spark.hashing import queue_for_key
from staticmq_spark.local_clusters.rocketmq import LocalRocketMQ
from tests.support.sink_tasks import write_task
from tests.support.staged_sink_checks import (
    QUEUES,
    ROOT,
    assert_once_for_both_consumers,
    assert_once_in_order,
    batch_of,
    java_read,
    settled,
    stage,
    visible,
    want,
)

_n = itertools.count()


@pytest.fixture
def topic(rocketmq_cluster: LocalRocketMQ) -> str:
    name = f"rmq-staged-{os.getpid()}-{next(_n)}"
    with Admin(rocketmq_cluster.address) as admin:
        admin.update_static_topic(name, QUEUES, brokers=sorted(rocketmq_cluster.broker_names))
    return name


@pytest.fixture
def sink(rocketmq_cluster: LocalRocketMQ) -> Iterator[RocketMQStagedSink]:
    backend = open_backend(rocketmq_cluster.address)
    assert isinstance(backend, RocketMQBackend)
    sink = backend.sink()
    assert isinstance(sink, RocketMQStagedSink), "the staged sink is RocketMQ's exactly-once default"
    yield sink
    backend.close()


def _settings(ns: str, topic: str, request_bytes: int = 8 << 20) -> WriteSettings:
    return WriteSettings(namesrv=ns, topic=topic, request_bytes=request_bytes, send_timeout_ms=30_000)


def _child(
    ns: str, tmp: Path, settings: WriteSettings, writer: str, tasks: list[TaskWrite], step: str, n: int = 1
) -> int:
    """The commit in a process of its own, killed at the n-th `step` ("none": not killed): its exit code."""
    path = tmp / f"tasks-{next(_n)}.pkl"
    path.write_bytes(pickle.dumps((settings, writer, 0, tasks)))
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.staged_commit_child", ns, str(path), step, str(n), "0.3"],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    if step == "none":
        assert done.returncode == 0, done.stderr[-3000:]
    else:
        assert done.returncode == 9, f"the driver was to die at {step} #{n}: {done.stdout[-500:]} {done.stderr[-3000:]}"
    return done.returncode


# ---------------------------------------------------------------------------- normal commits


def test_staged_rows_are_invisible_before_the_decision_andvisible_once_after_the_commit(
    rocketmq_cluster: LocalRocketMQ, topic: str, sink: RocketMQStagedSink
) -> None:
    ns, settings = rocketmq_cluster.address, _settings(rocketmq_cluster.address, topic)
    tasks = stage(sink, settings, "q-visible", "p", 3, 400)
    assert sum(t.rows for t in tasks) == 1200
    assert visible(ns, topic) == [], "staged rows are not readable before the commit"
    assert sink.commit(settings, "q-visible", 0, tasks) == 1200
    assert_once_in_order(settled(ns, topic, want("p", 3, 400)), want("p", 3, 400))


def test_each_staged_chunk_is_one_encoded_batch_of_one_target_queue(
    rocketmq_cluster: LocalRocketMQ, topic: str, sink: RocketMQStagedSink
) -> None:
    settings = _settings(rocketmq_cluster.address, topic, request_bytes=2000)
    (task,) = stage(sink, settings, "q-chunks", "c", 1, 300)
    chunks = task.detail
    assert sum(c.count for c in chunks) == 300
    assert {c.logic for c in chunks} == set(range(QUEUES))
    assert len(chunks) > QUEUES, "requestBytes bounds a chunk: several per queue"
    assert [c.seq for c in chunks] == list(range(len(chunks)))
    assert len({(c.bname, c.queue, c.offset) for c in chunks}) == len(chunks), "one staged message per chunk"


def test_a_replayed_commit_writes_nothing_twice(
    rocketmq_cluster: LocalRocketMQ, topic: str, sink: RocketMQStagedSink
) -> None:
    ns, settings = rocketmq_cluster.address, _settings(rocketmq_cluster.address, topic)
    tasks = stage(sink, settings, "q-replay", "r", 2, 250)
    assert sink.commit(settings, "q-replay", 0, tasks) == 500
    replay = stage(sink, settings, "q-replay", "x", 2, 250)  # a replay computing other rows
    assert sink.commit(settings, "q-replay", 0, replay) == 0, "the recorded decision is complete: nothing sent"
    assert sink.commit(settings, "q-replay", 0, tasks) == 0
    assert_once_in_order(settled(ns, topic, want("r", 2, 250)), want("r", 2, 250))


def test_chunks_of_an_attempt_not_named_in_the_commit_are_never_forwarded(
    rocketmq_cluster: LocalRocketMQ, topic: str, sink: RocketMQStagedSink
) -> None:
    ns, settings = rocketmq_cluster.address, _settings(rocketmq_cluster.address, topic)
    stage(sink, settings, "q-attempts", "zombie", 2, 150)  # failed / speculative attempts: staged, not named
    retried = stage(sink, settings, "q-attempts", "a", 2, 150)
    assert sink.commit(settings, "q-attempts", 0, retried) == 300
    stage(sink, settings, "q-attempts", "late", 2, 150)  # an attempt finishing after the commit
    assert_once_in_order(settled(ns, topic, want("a", 2, 150)), want("a", 2, 150))


def test_a_rocketmq_java_consumer_sees_only_the_rows_own_properties(
    rocketmq_cluster: LocalRocketMQ, topic: str, sink: RocketMQStagedSink, java_consumer: str, tmp_path: Path
) -> None:
    settings = _settings(rocketmq_cluster.address, topic)
    tasks = [write_task(sink, settings, "q-props", 0, p, [batch_of(f"j{p}", 300, props=True)]) for p in range(2)]
    assert sink.commit(settings, "q-props", 0, tasks) == 600
    lines = java_read(rocketmq_cluster.namesrv, topic, 600, java_consumer, tmp_path)
    assert Counter(body for _, _, body, _ in lines) == want("j", 2, 300), "every row once"
    assert len({msg_id for _, msg_id, _, _ in lines}) == 600, "each row its own UNIQ_KEY (the Java msgId)"
    for queue, _, body, props in lines:
        named = dict(kv.split("=", 1) for kv in props.split(","))
        user = {k: v for k, v in named.items() if k not in SYSTEM_PROPERTIES}
        i = int(body.split("-")[1])
        assert user == {"color": f"c{i % 3}"}, f"{body}: properties {named}"
        assert named["KEYS"] == f"user-{i % 23}"
        assert int(queue) == queue_for_key(named["KEYS"], QUEUES)


# ---------------------------------------------------------------------------- driver kill points


def test_driver_killed_before_the_decision_is_recorded_leaves_nothingvisible_and_the_replay_commits(
    rocketmq_cluster: LocalRocketMQ, topic: str, sink: RocketMQStagedSink, java_consumer: str, tmp_path: Path
) -> None:
    ns, settings = rocketmq_cluster.address, _settings(rocketmq_cluster.address, topic)
    first = stage(sink, settings, "q-kill-before", "f", 2, 200)
    _child(ns, tmp_path, settings, "q-kill-before", first, "deciding")
    assert visible(ns, topic) == []
    assert sink.recorded(settings, "q-kill-before", 0) is None
    replay = stage(sink, settings, "q-kill-before", "s", 2, 200)  # nothing decided: the replay's rows count
    _child(ns, tmp_path, settings, "q-kill-before", replay, "none")
    assert_once_for_both_consumers(rocketmq_cluster, topic, want("s", 2, 200), java_consumer, tmp_path)


def test_driver_killed_right_after_the_decision_lands_the_first_runs_rows_once_despite_a_different_replay(
    rocketmq_cluster: LocalRocketMQ, topic: str, sink: RocketMQStagedSink, java_consumer: str, tmp_path: Path
) -> None:
    ns, settings = rocketmq_cluster.address, _settings(rocketmq_cluster.address, topic, request_bytes=3000)
    first = stage(sink, settings, "q-kill-decided", "f", 2, 300)
    _child(ns, tmp_path, settings, "q-kill-decided", first, "decided")
    assert visible(ns, topic) == [], "decided, nothing forwarded yet"
    replay = stage(sink, settings, "q-kill-decided", "s", 2, 300)  # a replay computing different rows
    _child(ns, tmp_path, settings, "q-kill-decided", replay, "none")
    assert_once_for_both_consumers(rocketmq_cluster, topic, want("f", 2, 300), java_consumer, tmp_path)


def test_driver_killed_mid_forward_with_a_send_unanswered_recovers_copying_only_what_is_missing_in_order(
    rocketmq_cluster: LocalRocketMQ, topic: str, sink: RocketMQStagedSink, java_consumer: str, tmp_path: Path
) -> None:
    ns, settings = rocketmq_cluster.address, _settings(rocketmq_cluster.address, topic, request_bytes=3000)
    first = stage(sink, settings, "q-kill-mid", "f", 2, 300)
    chunks = sum(len(t.detail) for t in first)
    _child(ns, tmp_path, settings, "q-kill-mid", first, "sent", n=chunks // 2)
    before = settled(ns, topic)
    assert 0 < len(before) < 600, f"{len(before)} rows landed before the kill"
    recovered = sink.commit(settings, "q-kill-mid", 0, stage(sink, settings, "q-kill-mid", "s", 2, 300))
    assert recovered == 600 - len(before), "the recovery sent only the rows that had not landed"
    assert_once_for_both_consumers(rocketmq_cluster, topic, want("f", 2, 300), java_consumer, tmp_path)


def test_a_second_driver_crash_during_the_recovery_copy_is_safe_too(
    rocketmq_cluster: LocalRocketMQ, topic: str, sink: RocketMQStagedSink, java_consumer: str, tmp_path: Path
) -> None:
    ns, settings = rocketmq_cluster.address, _settings(rocketmq_cluster.address, topic, request_bytes=2500)
    first = stage(sink, settings, "q-kill-twice", "f", 2, 300)
    chunks = sum(len(t.detail) for t in first)
    _child(ns, tmp_path, settings, "q-kill-twice", first, "sent", n=chunks // 3)
    landed_once = len(settled(ns, topic))
    replay = stage(sink, settings, "q-kill-twice", "s", 2, 300)
    _child(ns, tmp_path, settings, "q-kill-twice", replay, "sent", n=2)  # the recovery dies mid-copy too
    landed_twice = len(settled(ns, topic))
    assert landed_once < landed_twice < 600
    _child(ns, tmp_path, settings, "q-kill-twice", replay, "none")
    assert_once_for_both_consumers(rocketmq_cluster, topic, want("f", 2, 300), java_consumer, tmp_path)


# ---------------------------------------------------------------------------- remaps


def test_a_target_queue_remapped_between_staging_and_commit_gets_its_rows_once_in_its_new_segment(
    rocketmq_cluster: LocalRocketMQ, topic: str, sink: RocketMQStagedSink, java_consumer: str, tmp_path: Path
) -> None:
    ns, settings = rocketmq_cluster.address, _settings(rocketmq_cluster.address, topic)
    brokers = sorted(rocketmq_cluster.broker_names)
    tasks = stage(sink, settings, "q-remap", "m", 2, 200)
    with Admin(ns) as admin:
        admin.remapping_static_topic(topic, brokers=brokers[:1])
    assert sink.commit(settings, "q-remap", 0, tasks) == 400
    assert_once_for_both_consumers(rocketmq_cluster, topic, want("m", 2, 200), java_consumer, tmp_path)
    _, leaders = sink.leaders.of(topic)
    assert {lead.bname for lead in leaders.values()} == {brokers[0]}


def test_a_target_queue_remapped_during_the_copy_gets_its_rows_once_and_the_commit_succeeds(
    rocketmq_cluster: LocalRocketMQ, topic: str, sink: RocketMQStagedSink, java_consumer: str, tmp_path: Path
) -> None:
    """After a queue's first chunk is forwarded, every queue moves to the broker that did not lead that
    queue: its later chunks meet a stale route (the old leader refuses them) and go to the new segment."""
    ns, settings = rocketmq_cluster.address, _settings(rocketmq_cluster.address, topic, request_bytes=3000)
    brokers = sorted(rocketmq_cluster.broker_names)
    tasks = stage(sink, settings, "q-remap-mid", "m", 2, 300)
    moved: list[int] = []
    lock = threading.Lock()

    def remap_once(step: str, what: object) -> None:
        assert isinstance(what, StagedChunk) or step in ("deciding", "decided")
        with lock:
            if step != "forwarded" or moved:
                return
            assert isinstance(what, StagedChunk)
            moved.append(what.logic)
            _, leaders = sink.leaders.of(topic)
            to = next(b for b in brokers if b != leaders[what.logic].bname)
            with Admin(ns) as admin:
                admin.remapping_static_topic(topic, brokers=[to])

    sink.hook = remap_once
    try:
        assert sink.commit(settings, "q-remap-mid", 0, tasks) == 600
    finally:
        sink.hook = lambda step, what: None
    assert_once_for_both_consumers(rocketmq_cluster, topic, want("m", 2, 300), java_consumer, tmp_path)
    chain = sink.leaders.chain(topic, moved[0])
    assert len(chain) == 2, "the queue was remapped mid-copy"
    with PullConsumer(ns) as consumer:
        new_start = chain[-1].logic_offset
        assert new_start > 0 and consumer.max_offset(topic, moved[0]) > new_start, "rows in the new segment too"
