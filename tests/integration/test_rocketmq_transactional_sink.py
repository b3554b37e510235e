"""The exactly-once sink on a real Apache RocketMQ: half messages sent by tasks stay invisible until
the driver's commit, a recorded decision is completed after a driver died mid-commit without
committing any half twice, and a remap between prepare and commit rolls the micro-batch back.

These drive the backend's sink directly (write_task on the executor side, commit on the driver's);
tests/spark/test_rocketmq.py runs the same sink through Spark with a driver killed by kill -9."""

from __future__ import annotations

import itertools
import logging
import time
from collections import Counter
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pytest

from staticmq_spark.backends.api import EXACTLY_ONCE_TRANSACTIONAL
from staticmq_spark.backends.registry import open_backend
from staticmq_spark.backends.rocketmq.backend import RocketMQBackend
from staticmq_spark.backends.rocketmq.sinks.decisions import Decision
from staticmq_spark.backends.rocketmq.sinks.transactional_sink import PRODUCER_GROUP, RocketMQTransactionalSink
from staticmq_spark.backends.rocketmq.sinks.transactions import PreparedHalves, end_halves
from staticmq_spark.backends.rocketmq.wire.remoting import RemotingClient
from staticmq_spark.backends.types import WriteSettings
from staticmq_spark.client import Admin, PullConsumer
from staticmq_spark.errors import ConflictError
from staticmq_spark.hashing import queue_for_key
from staticmq_spark.local_clusters.rocketmq import TRANSACTION_TIMEOUT_MS, LocalRocketMQ
from tests.support.rocketmq_tools import update_broker_config
from tests.support.sink_tasks import write_task
from tests.support.staged_sink_checks import QUEUES, batch_of, visible
from tests.support.static_helpers import read_queue
from tests.support.waiting import wait_until

_n = itertools.count()
HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"  # RocketMQ's queue of half messages, one queue per broker


@pytest.fixture
def topic(rocketmq_cluster: LocalRocketMQ) -> str:
    name = f"rmq-txn-{next(_n)}"
    with Admin(rocketmq_cluster.address) as admin:
        admin.update_static_topic(name, QUEUES, brokers=sorted(rocketmq_cluster.broker_names))
    return name


@pytest.fixture
def sink(rocketmq_cluster: LocalRocketMQ) -> Iterator[RocketMQTransactionalSink]:
    backend = open_backend(rocketmq_cluster.address)
    assert isinstance(backend, RocketMQBackend)
    sink = backend.sink(EXACTLY_ONCE_TRANSACTIONAL)
    assert isinstance(sink, RocketMQTransactionalSink)
    yield sink
    backend.close()


def _settings(ns: str, topic: str) -> WriteSettings:
    return WriteSettings(namesrv=ns, topic=topic)


def test_half_messages_stay_invisible_until_the_commit_and_are_visible_once_after(
    rocketmq_cluster: LocalRocketMQ, topic: str, sink: RocketMQTransactionalSink
) -> None:
    ns, settings = rocketmq_cluster.address, _settings(rocketmq_cluster.address, topic)
    tasks = [write_task(sink, settings, "q-visible", 0, p, [batch_of(f"p{p}", 300)]) for p in range(2)]
    assert sum(t.rows for t in tasks) == 600
    assert visible(ns, topic) == [], "halves are not readable before the commit"
    assert sink.commit(settings, "q-visible", 0, tasks) == 600
    seen = visible(ns, topic)
    assert Counter(body for _, _, body in seen) == Counter(f"p{p}-{i}" for p in range(2) for i in range(300))
    assert all(queue_for_key(key, QUEUES) == q for q, key, _ in seen), "rows sit in murmur3(key) mod totalQueues"


def test_a_replayed_batch_completes_the_recorded_decision_without_committing_any_half_twice(
    rocketmq_cluster: LocalRocketMQ, topic: str, sink: RocketMQTransactionalSink
) -> None:
    """A driver recorded the decision and committed some halves, then died: the restarted query
    replays the batch (new halves), and its commit completes the old decision instead."""
    ns, settings = rocketmq_cluster.address, _settings(rocketmq_cluster.address, topic)
    first = [write_task(sink, settings, "q-replay", 7, p, [batch_of(f"p{p}", 200)]) for p in range(2)]
    runs = [run for t in first for run in t.detail]
    decision = Decision(topic, "q-replay", 7, runs, sink._tails(topic, runs))
    sink.decisions.of(settings.decision_topic).record(decision)
    masters = sink.instance.route(topic, refresh=True).masters
    half_done = runs[0]  # one participant fully committed, another half of its halves, the rest none
    end_halves(
        sink.client,
        masters[half_done.bname],
        topic,
        PRODUCER_GROUP,
        PreparedHalves(half_done.commit_log_offsets, half_done.table_offsets),
        half_done.uniq_keys(),
        commit=True,
    )
    partly = runs[1]
    k = partly.count // 2
    end_halves(
        sink.client,
        masters[partly.bname],
        topic,
        PRODUCER_GROUP,
        PreparedHalves(partly.commit_log_offsets[:k], partly.table_offsets[:k]),
        partly.uniq_keys()[:k],
        commit=True,
    )
    already = half_done.count + k
    replay = [write_task(sink, settings, "q-replay", 7, p, [batch_of(f"p{p}", 200)]) for p in range(2)]
    assert sink.commit(settings, "q-replay", 7, replay) == 400 - already
    seen = Counter(body for _, _, body in visible(ns, topic))
    assert seen == Counter(f"p{p}-{i}" for p in range(2) for i in range(200)), "every row exactly once"
    assert sink.commit(settings, "q-replay", 7, replay) == 0, "a second replay commits nothing"
    assert Counter(body for _, _, body in visible(ns, topic)) == seen


def test_halves_of_a_task_attempt_that_never_reached_the_driver_are_nevervisible(
    rocketmq_cluster: LocalRocketMQ, topic: str, sink: RocketMQTransactionalSink
) -> None:
    ns, settings = rocketmq_cluster.address, _settings(rocketmq_cluster.address, topic)
    write_task(sink, settings, "q-attempts", 0, 0, [batch_of("lost", 150)])  # its executor "died"
    retried = write_task(sink, settings, "q-attempts", 0, 0, [batch_of("lost", 150)])
    assert sink.commit(settings, "q-attempts", 0, [retried]) == 150
    assert Counter(body for _, _, body in visible(ns, topic)) == Counter(f"lost-{i}" for i in range(150))


def test_a_queue_remapped_between_prepare_and_commit_rolls_the_batch_back_and_a_replay_lands_on_the_new_leader(
    rocketmq_cluster: LocalRocketMQ, topic: str, sink: RocketMQTransactionalSink
) -> None:
    ns, settings = rocketmq_cluster.address, _settings(rocketmq_cluster.address, topic)
    brokers = sorted(rocketmq_cluster.broker_names)
    tasks = [write_task(sink, settings, "q-remap", 3, 0, [batch_of("r", 120)])]
    with Admin(ns) as admin:
        admin.remapping_static_topic(topic, brokers=brokers[:1])
    with pytest.raises(ConflictError, match="remapped while micro-batch 3"):
        sink.commit(settings, "q-remap", 3, tasks)
    assert visible(ns, topic) == [], "nothing of the rolled-back batch is visible"
    replay = [write_task(sink, settings, "q-remap", 3, 0, [batch_of("r", 120)])]
    assert {run.bname for run in replay[0].detail} == {brokers[0]}
    assert sink.commit(settings, "q-remap", 3, replay) == 120
    seen = visible(ns, topic)
    assert Counter(body for _, _, body in seen) == Counter(f"r-{i}" for i in range(120))
    assert all(queue_for_key(key, QUEUES) == q for q, key, _ in seen)


def test_keyless_rows_go_to_the_same_queues_on_a_replay(
    rocketmq_cluster: LocalRocketMQ, topic: str, sink: RocketMQTransactionalSink
) -> None:
    settings = _settings(rocketmq_cluster.address, topic)
    rows = pa.RecordBatch.from_pydict({"value": [f"x{i}".encode() for i in range(40)]})
    a = write_task(sink, settings, "q-keyless", 0, 5, [rows])
    b = write_task(sink, settings, "q-keyless", 0, 5, [rows])
    placed = [{run.logic: np.sort(run.rows).tolist() for run in t.detail} for t in (a, b)]
    assert placed[0] == placed[1]
    assert len(placed[0]) == QUEUES
    sink._end(topic, [run for t in (a, b) for run in t.detail], commit=False)


def test_a_broker_killed_and_restarted_between_prepare_and_commit_keeps_its_halves(
    rocketmq_cluster: LocalRocketMQ, topic: str, sink: RocketMQTransactionalSink
) -> None:
    ns, settings = rocketmq_cluster.address, _settings(rocketmq_cluster.address, topic)
    tasks = [write_task(sink, settings, "q-restart", 0, p, [batch_of(f"k{p}", 250)]) for p in range(2)]
    victim = sorted(rocketmq_cluster.broker_names)[-1]
    assert victim in {run.bname for t in tasks for run in t.detail}
    rocketmq_cluster.kill(victim)  # kill -9 of the broker's JVM
    rocketmq_cluster.start_broker(victim)
    rocketmq_cluster.wait_registered()
    assert sink.commit(settings, "q-restart", 0, tasks) == 500
    seen = visible(ns, topic)
    assert Counter(body for _, _, body in seen) == Counter(f"k{p}-{i}" for p in range(2) for i in range(250))
    assert all(queue_for_key(key, QUEUES) == q for q, key, _ in seen)


def test_a_half_the_broker_discarded_after_its_checks_is_still_committed_by_a_decided_batch(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The sink answers no CHECK_TRANSACTION_STATE: past transactionCheckMax checks the broker moves a
    half to TRANS_CHECK_MAX_TIME_TOPIC. A decided batch (a slow commit, or a driver restarted long
    after deciding) must still commit it: END_TRANSACTION reads the half from the commit log."""
    fast_checks = {"transactionTimeOut": "500", "transactionCheckInterval": "500", "transactionCheckMax": "1"}
    cluster = LocalRocketMQ(tmp_path_factory.mktemp("rocketmq-checks"), brokers=1, broker_settings=fast_checks)
    try:
        cluster.start()
        ns = cluster.address
        with Admin(ns) as admin:
            admin.update_static_topic("slow", 2, cluster="DefaultCluster")
        backend = open_backend(ns)
        sink = backend.sink(EXACTLY_ONCE_TRANSACTIONAL)
        assert isinstance(sink, RocketMQTransactionalSink)
        settings = _settings(ns, "slow")
        tasks = [write_task(sink, settings, "q-slow", 0, 0, [batch_of("late", 80)])]
        discarded = cluster.root / "broker-a" / "home" / "logs" / "rocketmqlogs" / "transaction.log"
        wait_until(
            lambda: discarded.exists() and "TRANS_CHECK_MAXTIME" in discarded.read_text(errors="replace"),
            60,
            message="the broker discarding the halves after their checks",
        )
        assert sink.commit(settings, "q-slow", 0, tasks) == 80
        with PullConsumer(ns) as consumer:
            seen = [b for q in range(2) for _, b in read_queue(consumer, "slow", q)]
        assert Counter(b.decode() for b in seen) == Counter(f"late-{i}" for i in range(80))
        backend.close()
    finally:
        cluster.close()


@pytest.fixture(scope="module")
def checked_often(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRocketMQ]:
    """A RocketMQ whose transaction check runs every 0.5 s (RocketMQ's default: 30 s)."""
    cluster = LocalRocketMQ(
        tmp_path_factory.mktemp("rocketmq-timeout"), brokers=1, broker_settings={"transactionCheckInterval": "500"}
    )
    try:
        cluster.start()
        with Admin(cluster.address) as admin:
            admin.update_static_topic("waits", 2, cluster="DefaultCluster")
        yield cluster
    finally:
        cluster.close()


def _half_queue_entries(cluster: LocalRocketMQ) -> int:
    client = RemotingClient((cluster.address,))
    try:
        return client.max_offset(cluster.broker_addr("broker-a"), HALF_TOPIC, 0, logic=False)
    finally:
        client.close()


def _write_then_commit(cluster: LocalRocketMQ, label: str, rows: int, wait_s: float) -> None:
    """`rows` halves from one task, committed by a new sink `wait_s` after they were sent."""
    backend = open_backend(cluster.address)
    try:
        sink = backend.sink(EXACTLY_ONCE_TRANSACTIONAL)
        assert isinstance(sink, RocketMQTransactionalSink)
        settings = _settings(cluster.address, "waits")
        tasks = [write_task(sink, settings, f"q-{label}", 0, 0, [batch_of(label, rows)])]
        time.sleep(wait_s)
        assert sink.commit(settings, f"q-{label}", 0, tasks) == rows
    finally:
        backend.close()


def test_halves_committed_after_rocketmqs_default_transaction_timeout_are_not_copied_by_its_checks(
    checked_often: LocalRocketMQ, caplog: pytest.LogCaptureFixture
) -> None:
    """RocketMQ's transaction check copies each half older than transactionTimeOut (6 s by default)
    that has no op message yet into the half queue again, then each copy at every check up to
    transactionCheckMax times: halves waiting more than 6 s for the driver's commit were each written
    up to 16 times. LocalRocketMQ sets the timeout to TRANSACTION_TIMEOUT_MS (docs/rocketmq.md tells
    operators the same): halves committed within it are never copied. The commit comes 8 s after the
    halves, checks every 0.5 s: with RocketMQ's default timeout the half queue grows past them."""
    before = _half_queue_entries(checked_often)
    with caplog.at_level(logging.WARNING):
        _write_then_commit(checked_often, "wait", 200, 8.0)
    time.sleep(2.0)  # 4 more checks
    halves = _half_queue_entries(checked_often) - before
    assert halves == 200, f"the half queue took {halves} entries for 200 halves: the checks copied them"
    assert "transactionTimeOut" not in caplog.text
    with PullConsumer(checked_often.address) as consumer:
        seen = [b.decode() for q in range(2) for _, b in read_queue(consumer, "waits", q)]
    assert Counter(b for b in seen if b.startswith("wait-")) == Counter(f"wait-{i}" for i in range(200))


def test_the_sink_warns_once_per_broker_when_its_halves_waited_longer_than_the_transaction_timeout(
    checked_often: LocalRocketMQ, caplog: pytest.LogCaptureFixture
) -> None:
    """With a broker's transactionTimeOut below a micro-batch's time from its first half to its
    commit, the driver says so, naming the broker, the setting and what it costs."""
    update_broker_config(checked_often, "transactionTimeOut", 1000)
    try:
        with caplog.at_level(logging.WARNING):
            _write_then_commit(checked_often, "late", 50, 1.5)
        warned = [r.getMessage() for r in caplog.records if "transactionTimeOut" in r.getMessage()]
        assert len(warned) == 1, caplog.text
        assert "broker broker-a waited" in warned[0] and "(1000 ms)" in warned[0], warned[0]
    finally:
        update_broker_config(checked_often, "transactionTimeOut", TRANSACTION_TIMEOUT_MS)
