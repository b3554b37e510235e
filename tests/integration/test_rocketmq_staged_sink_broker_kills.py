"""The staged exactly-once sink on a real Apache RocketMQ whose brokers are killed (issue 38): a
target broker killed with kill -9 mid-copy and a staging broker killed between staging and copy
end with every row once, read back with staticmq's PullConsumer and with RocketMQ's own Java push
consumer. A cluster of their own: the shared session cluster is never killed."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from staticmq_spark.backends.api import TaskWrite
from staticmq_spark.backends.registry import open_backend
from staticmq_spark.backends.rocketmq.sinks.staged_sink import RocketMQStagedSink
from staticmq_spark.backends.types import WriteSettings
from staticmq_spark.client import Admin
from staticmq_spark.errors import StaticMQError
from staticmq_spark.local_clusters.rocketmq import LocalRocketMQ
from tests.support.staged_sink_checks import QUEUES, assert_once_for_both_consumers, stage, want
from tests.support.waiting import wait_until

_n = itertools.count()


@pytest.fixture(scope="module")
def killable(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRocketMQ]:
    """Two brokers of their own: these tests kill -9 them (the shared session cluster is never killed)."""
    cluster = LocalRocketMQ(tmp_path_factory.mktemp("rocketmq-staged-kills"), brokers=2)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.close()


def _killable_topic(cluster: LocalRocketMQ) -> str:
    name = f"rmq-staged-kill-{next(_n)}"
    with Admin(cluster.address) as admin:
        admin.update_static_topic(name, QUEUES, brokers=sorted(cluster.broker_names))
    return name


def test_a_target_broker_killed_mid_copy_ends_with_every_row_once_after_its_restart(
    killable: LocalRocketMQ, java_consumer: str, tmp_path: Path
) -> None:
    ns, topic = killable.address, _killable_topic(killable)
    backend = open_backend(ns)
    try:
        sink = backend.sink()
        assert isinstance(sink, RocketMQStagedSink)
        settings = WriteSettings(namesrv=ns, topic=topic, request_bytes=3000, send_timeout_ms=120_000)
        tasks = stage(sink, settings, "q-target-kill", "t", 2, 300)
        victim = sorted(killable.broker_names)[-1]
        killed = threading.Event()
        lock = threading.Lock()

        def kill_once(step: str, what: object) -> None:
            with lock:
                if step != "forwarded" or killed.is_set():
                    return
                killable.kill(victim)  # kill -9 of the broker's JVM, sends to it in flight
                killed.set()

        sink.hook = kill_once
        outcome: dict[str, object] = {}

        def commit() -> None:
            try:
                outcome["rows"] = sink.commit(settings, "q-target-kill", 0, tasks)
            except Exception as exc:
                outcome["error"] = exc

        # the commit runs in a thread: the broker is restarted from the main thread (LocalRocketMQ's
        # JVMs die with the thread that started them, setpriv --pdeathsig)
        copying = threading.Thread(target=commit)
        copying.start()
        assert killed.wait(120), "the broker was killed mid-copy"
        killable.start_broker(victim)
        killable.wait_registered()
        copying.join(180)
        assert not copying.is_alive() and "error" not in outcome, outcome
        assert isinstance(outcome["rows"], int) and outcome["rows"] <= 600
        assert_once_for_both_consumers(killable, topic, want("t", 2, 300), java_consumer, tmp_path)
    finally:
        backend.close()


def test_a_staging_broker_killed_between_staging_and_copy_fails_the_commit_until_it_is_back_then_every_row_once(
    killable: LocalRocketMQ, java_consumer: str, tmp_path: Path
) -> None:
    ns, topic = killable.address, _killable_topic(killable)
    backend = open_backend(ns)
    try:
        sink = backend.sink()
        assert isinstance(sink, RocketMQStagedSink)
        settings = WriteSettings(namesrv=ns, topic=topic, send_timeout_ms=10_000)
        tasks = stage(sink, settings, "q-staging-kill", "s", 2, 250)
        victim = sorted(killable.broker_names)[-1]
        assert victim in {c.bname for t in tasks for c in t.detail}, "some chunks are staged on the victim"
        killable.kill(victim)
        with pytest.raises(StaticMQError):
            sink.commit(settings, "q-staging-kill", 0, tasks)
        killable.start_broker(victim)
        killable.wait_registered()
        wait_until(lambda: _commits(sink, settings, tasks), 120, message="a commit after the broker's restart")
        assert_once_for_both_consumers(killable, topic, want("s", 2, 250), java_consumer, tmp_path)
    finally:
        backend.close()


def _commits(sink: RocketMQStagedSink, settings: WriteSettings, tasks: list[TaskWrite]) -> bool:
    try:
        sink.commit(settings, "q-staging-kill", 0, tasks)
    except StaticMQError:
        return False
    return True
