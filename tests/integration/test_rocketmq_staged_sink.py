"""The staged exactly-once sink on a real Apache RocketMQ (issue 38): tasks stage encoded batches on
the staging topic, the driver records the decision and forwards each staged body unchanged.

Rows are invisible before the decision and visible once after; a replayed commit writes nothing
twice; a driver killed (os._exit in a process of its own, tests/support/staged_commit_child.py)
before the decision, right after it, mid-forward with a send unanswered, and again during the
recovery, ends with every row once, in order, in murmur3(key) mod totalQueues; chunks of attempts
the commit does not name are never forwarded; a queue remapped before or during the copy gets its
rows once in its new segment; RocketMQ's Java consumer sees only the rows' own properties; a target
broker killed mid-copy and a staging broker killed between staging and copy (on a cluster of their
own) end with every row once, read back with staticmq's PullConsumer and with RocketMQ's own Java
push consumer (tests/support/java/PropertiesConsumer.java).
These drive the backend's sink directly; tests/spark/test_rocketmq.py runs it through Spark."""

from __future__ import annotations

import itertools
import os
import pickle
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from staticmq_spark.backends.api import TaskWrite
from staticmq_spark.backends.registry import open_backend
from staticmq_spark.backends.rocketmq.backend import RocketMQBackend
from staticmq_spark.backends.rocketmq.staged_chunks import StagedChunk
from staticmq_spark.backends.rocketmq.staged_sink import RocketMQStagedSink
from staticmq_spark.backends.rocketmq.stored_messages import SYSTEM_PROPERTIES
from staticmq_spark.backends.types import WriteSettings
from staticmq_spark.client import Admin, PullConsumer
from staticmq_spark.errors import StaticMQError
from staticmq_spark.hashing import queue_for_key
from staticmq_spark.local_clusters.rocketmq import LocalRocketMQ
from tests.support.rocketmq_tools import compile_client
from tests.support.sink_tasks import write_task
from tests.support.waiting import wait_until

_n = itertools.count()
QUEUES = 4
ROOT = Path(__file__).parents[2]
JAVA_CONSUMER = ROOT / "tests" / "support" / "java" / "PropertiesConsumer.java"


@pytest.fixture(scope="module")
def java_consumer(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The classpath of tests/support/java/PropertiesConsumer.java (RocketMQ's own push consumer),
    compiled once for this file."""
    return compile_client(JAVA_CONSUMER, tmp_path_factory.mktemp("java-consumer"))


def _java_read(namesrv: str, topic: str, expected: int, classpath: str, workdir: Path) -> list[list[str]]:
    """[queueId, msgId, body, properties] of every message RocketMQ's own Java push consumer reads
    from the topic's first offset in a new group (waits for `expected`, then 1 s for duplicates)."""
    consumed = subprocess.run(
        ["java", "-Xmx256m", "-cp", classpath, "PropertiesConsumer", namesrv, topic, f"java-{topic}-{next(_n)}",
         str(expected), "120"],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=workdir,
        env={**os.environ, "ROCKETMQ_HOME": str(workdir), "HOME": str(workdir)},
    )  # fmt: skip
    assert consumed.returncode == 0, consumed.stdout[-2000:] + consumed.stderr[-2000:]
    return [line.split(" ", 4)[1:] for line in consumed.stdout.splitlines() if line.startswith("MSG ")]


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


def _rows(label: str, n: int, props: bool = False) -> pa.RecordBatch:
    data: dict[str, object] = {
        "key": [f"user-{i % 23}" for i in range(n)],
        "value": [f"{label}-{i}".encode() for i in range(n)],
    }
    if props:
        data["properties"] = pa.array([[("color", f"c{i % 3}")] for i in range(n)], pa.map_(pa.string(), pa.string()))
    return pa.RecordBatch.from_pydict(data)


def _visible(ns: str, topic: str) -> list[tuple[int, str, str]]:
    """(logic queue, key, body) of every readable message, in queue order, across segments
    (staticmq's own PullConsumer)."""
    found = []
    with PullConsumer(ns) as consumer:
        for q in range(QUEUES):
            offset, end = consumer.min_offset(topic, q), consumer.max_offset(topic, q)
            while offset < end:
                got = consumer.pull(topic, q, offset, max_messages=256)
                found += [(q, m["key"], m["body"].decode()) for m in got.messages()]
                if got.next_offset <= offset:
                    break
                offset = got.next_offset
    return found


def _want(label: str, parts: int, n: int) -> Counter[str]:
    return Counter(f"{label}{p}-{i}" for p in range(parts) for i in range(n))


def _settled(ns: str, topic: str, want: Counter[str] | None = None) -> list[tuple[int, str, str]]:
    """_visible once the brokers have dispatched what they stored (a message is in the commit log
    before it is in its consume queue): after `want`'s count of rows is readable (at most 20 s),
    or after 1 s when no count is wanted, read once more a moment later."""
    if want is not None:
        wait_until(lambda: len(_visible(ns, topic)) >= want.total(), 20, message=f"{want.total()} rows readable")
    else:
        time.sleep(1.0)
    time.sleep(0.5)
    return _visible(ns, topic)


def _assert_once_in_order(seen: list[tuple[int, str, str]], want: Counter[str]) -> None:
    assert Counter(body for _, _, body in seen) == want, "every row exactly once"
    assert all(queue_for_key(key, QUEUES) == q for q, key, _ in seen), "rows sit in murmur3(key) mod totalQueues"
    for q in range(QUEUES):
        order = [(b.split("-")[0], int(b.split("-")[1])) for qq, _, b in seen if qq == q]
        assert order == sorted(order), f"queue {q}: rows in forwarding order (partition, then row)"


def _assert_once_for_both_consumers(
    cluster: LocalRocketMQ, topic: str, want: Counter[str], java: str, workdir: Path
) -> None:
    """Every row once, in order, in murmur3(key) mod totalQueues as staticmq's PullConsumer reads the
    topic, and once as RocketMQ's own Java consumer reads it."""
    _assert_once_in_order(_settled(cluster.address, topic, want), want)
    bodies = Counter(body for _, _, body, _ in _java_read(cluster.namesrv, topic, want.total(), java, workdir))
    assert bodies == want, "RocketMQ's Java consumer reads every row once"


def _settings(ns: str, topic: str, request_bytes: int = 8 << 20) -> WriteSettings:
    return WriteSettings(namesrv=ns, topic=topic, request_bytes=request_bytes, send_timeout_ms=30_000)


def _stage(
    sink: RocketMQStagedSink, settings: WriteSettings, writer: str, label: str, parts: int, n: int
) -> list[TaskWrite]:
    return [write_task(sink, settings, writer, 0, p, [_rows(f"{label}{p}", n)]) for p in range(parts)]


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


def test_staged_rows_are_invisible_before_the_decision_and_visible_once_after_the_commit(
    rocketmq_cluster: LocalRocketMQ, topic: str, sink: RocketMQStagedSink
) -> None:
    ns, settings = rocketmq_cluster.address, _settings(rocketmq_cluster.address, topic)
    tasks = _stage(sink, settings, "q-visible", "p", 3, 400)
    assert sum(t.rows for t in tasks) == 1200
    assert _visible(ns, topic) == [], "staged rows are not readable before the commit"
    assert sink.commit(settings, "q-visible", 0, tasks) == 1200
    _assert_once_in_order(_settled(ns, topic, _want("p", 3, 400)), _want("p", 3, 400))


def test_each_staged_chunk_is_one_encoded_batch_of_one_target_queue(
    rocketmq_cluster: LocalRocketMQ, topic: str, sink: RocketMQStagedSink
) -> None:
    settings = _settings(rocketmq_cluster.address, topic, request_bytes=2000)
    (task,) = _stage(sink, settings, "q-chunks", "c", 1, 300)
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
    tasks = _stage(sink, settings, "q-replay", "r", 2, 250)
    assert sink.commit(settings, "q-replay", 0, tasks) == 500
    replay = _stage(sink, settings, "q-replay", "x", 2, 250)  # a replay computing other rows
    assert sink.commit(settings, "q-replay", 0, replay) == 0, "the recorded decision is complete: nothing sent"
    assert sink.commit(settings, "q-replay", 0, tasks) == 0
    _assert_once_in_order(_settled(ns, topic, _want("r", 2, 250)), _want("r", 2, 250))


def test_chunks_of_an_attempt_not_named_in_the_commit_are_never_forwarded(
    rocketmq_cluster: LocalRocketMQ, topic: str, sink: RocketMQStagedSink
) -> None:
    ns, settings = rocketmq_cluster.address, _settings(rocketmq_cluster.address, topic)
    _stage(sink, settings, "q-attempts", "zombie", 2, 150)  # failed / speculative attempts: staged, not named
    retried = _stage(sink, settings, "q-attempts", "a", 2, 150)
    assert sink.commit(settings, "q-attempts", 0, retried) == 300
    _stage(sink, settings, "q-attempts", "late", 2, 150)  # an attempt finishing after the commit
    _assert_once_in_order(_settled(ns, topic, _want("a", 2, 150)), _want("a", 2, 150))


def test_a_rocketmq_java_consumer_sees_only_the_rows_own_properties(
    rocketmq_cluster: LocalRocketMQ, topic: str, sink: RocketMQStagedSink, java_consumer: str, tmp_path: Path
) -> None:
    settings = _settings(rocketmq_cluster.address, topic)
    tasks = [write_task(sink, settings, "q-props", 0, p, [_rows(f"j{p}", 300, props=True)]) for p in range(2)]
    assert sink.commit(settings, "q-props", 0, tasks) == 600
    lines = _java_read(rocketmq_cluster.namesrv, topic, 600, java_consumer, tmp_path)
    assert Counter(body for _, _, body, _ in lines) == _want("j", 2, 300), "every row once"
    assert len({msg_id for _, msg_id, _, _ in lines}) == 600, "each row its own UNIQ_KEY (the Java msgId)"
    for queue, _, body, props in lines:
        named = dict(kv.split("=", 1) for kv in props.split(","))
        user = {k: v for k, v in named.items() if k not in SYSTEM_PROPERTIES}
        i = int(body.split("-")[1])
        assert user == {"color": f"c{i % 3}"}, f"{body}: properties {named}"
        assert named["KEYS"] == f"user-{i % 23}"
        assert int(queue) == queue_for_key(named["KEYS"], QUEUES)


# ---------------------------------------------------------------------------- driver kill points


def test_driver_killed_before_the_decision_is_recorded_leaves_nothing_visible_and_the_replay_commits(
    rocketmq_cluster: LocalRocketMQ, topic: str, sink: RocketMQStagedSink, java_consumer: str, tmp_path: Path
) -> None:
    ns, settings = rocketmq_cluster.address, _settings(rocketmq_cluster.address, topic)
    first = _stage(sink, settings, "q-kill-before", "f", 2, 200)
    _child(ns, tmp_path, settings, "q-kill-before", first, "deciding")
    assert _visible(ns, topic) == []
    assert sink.recorded(settings, "q-kill-before", 0) is None
    replay = _stage(sink, settings, "q-kill-before", "s", 2, 200)  # nothing decided: the replay's rows count
    _child(ns, tmp_path, settings, "q-kill-before", replay, "none")
    _assert_once_for_both_consumers(rocketmq_cluster, topic, _want("s", 2, 200), java_consumer, tmp_path)


def test_driver_killed_right_after_the_decision_lands_the_first_runs_rows_once_despite_a_different_replay(
    rocketmq_cluster: LocalRocketMQ, topic: str, sink: RocketMQStagedSink, java_consumer: str, tmp_path: Path
) -> None:
    ns, settings = rocketmq_cluster.address, _settings(rocketmq_cluster.address, topic, request_bytes=3000)
    first = _stage(sink, settings, "q-kill-decided", "f", 2, 300)
    _child(ns, tmp_path, settings, "q-kill-decided", first, "decided")
    assert _visible(ns, topic) == [], "decided, nothing forwarded yet"
    replay = _stage(sink, settings, "q-kill-decided", "s", 2, 300)  # a replay computing different rows
    _child(ns, tmp_path, settings, "q-kill-decided", replay, "none")
    _assert_once_for_both_consumers(rocketmq_cluster, topic, _want("f", 2, 300), java_consumer, tmp_path)


def test_driver_killed_mid_forward_with_a_send_unanswered_recovers_copying_only_what_is_missing_in_order(
    rocketmq_cluster: LocalRocketMQ, topic: str, sink: RocketMQStagedSink, java_consumer: str, tmp_path: Path
) -> None:
    ns, settings = rocketmq_cluster.address, _settings(rocketmq_cluster.address, topic, request_bytes=3000)
    first = _stage(sink, settings, "q-kill-mid", "f", 2, 300)
    chunks = sum(len(t.detail) for t in first)
    _child(ns, tmp_path, settings, "q-kill-mid", first, "sent", n=chunks // 2)
    before = _settled(ns, topic)
    assert 0 < len(before) < 600, f"{len(before)} rows landed before the kill"
    recovered = sink.commit(settings, "q-kill-mid", 0, _stage(sink, settings, "q-kill-mid", "s", 2, 300))
    assert recovered == 600 - len(before), "the recovery sent only the rows that had not landed"
    _assert_once_for_both_consumers(rocketmq_cluster, topic, _want("f", 2, 300), java_consumer, tmp_path)


def test_a_second_driver_crash_during_the_recovery_copy_is_safe_too(
    rocketmq_cluster: LocalRocketMQ, topic: str, sink: RocketMQStagedSink, java_consumer: str, tmp_path: Path
) -> None:
    ns, settings = rocketmq_cluster.address, _settings(rocketmq_cluster.address, topic, request_bytes=2500)
    first = _stage(sink, settings, "q-kill-twice", "f", 2, 300)
    chunks = sum(len(t.detail) for t in first)
    _child(ns, tmp_path, settings, "q-kill-twice", first, "sent", n=chunks // 3)
    landed_once = len(_settled(ns, topic))
    replay = _stage(sink, settings, "q-kill-twice", "s", 2, 300)
    _child(ns, tmp_path, settings, "q-kill-twice", replay, "sent", n=2)  # the recovery dies mid-copy too
    landed_twice = len(_settled(ns, topic))
    assert landed_once < landed_twice < 600
    _child(ns, tmp_path, settings, "q-kill-twice", replay, "none")
    _assert_once_for_both_consumers(rocketmq_cluster, topic, _want("f", 2, 300), java_consumer, tmp_path)


# ---------------------------------------------------------------------------- remaps


def test_a_target_queue_remapped_between_staging_and_commit_gets_its_rows_once_in_its_new_segment(
    rocketmq_cluster: LocalRocketMQ, topic: str, sink: RocketMQStagedSink, java_consumer: str, tmp_path: Path
) -> None:
    ns, settings = rocketmq_cluster.address, _settings(rocketmq_cluster.address, topic)
    brokers = sorted(rocketmq_cluster.broker_names)
    tasks = _stage(sink, settings, "q-remap", "m", 2, 200)
    with Admin(ns) as admin:
        admin.remapping_static_topic(topic, brokers=brokers[:1])
    assert sink.commit(settings, "q-remap", 0, tasks) == 400
    _assert_once_for_both_consumers(rocketmq_cluster, topic, _want("m", 2, 200), java_consumer, tmp_path)
    _, leaders = sink.leaders.of(topic)
    assert {lead.bname for lead in leaders.values()} == {brokers[0]}


def test_a_target_queue_remapped_during_the_copy_gets_its_rows_once_and_the_commit_succeeds(
    rocketmq_cluster: LocalRocketMQ, topic: str, sink: RocketMQStagedSink, java_consumer: str, tmp_path: Path
) -> None:
    """After a queue's first chunk is forwarded, every queue moves to the broker that did not lead that
    queue: its later chunks meet a stale route (the old leader refuses them) and go to the new segment."""
    ns, settings = rocketmq_cluster.address, _settings(rocketmq_cluster.address, topic, request_bytes=3000)
    brokers = sorted(rocketmq_cluster.broker_names)
    tasks = _stage(sink, settings, "q-remap-mid", "m", 2, 300)
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
    _assert_once_for_both_consumers(rocketmq_cluster, topic, _want("m", 2, 300), java_consumer, tmp_path)
    chain = sink.leaders.chain(topic, moved[0])
    assert len(chain) == 2, "the queue was remapped mid-copy"
    with PullConsumer(ns) as consumer:
        new_start = chain[-1].logic_offset
        assert new_start > 0 and consumer.max_offset(topic, moved[0]) > new_start, "rows in the new segment too"


# ---------------------------------------------------------------------------- broker kills (own cluster)


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
        tasks = _stage(sink, settings, "q-target-kill", "t", 2, 300)
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
        _assert_once_for_both_consumers(killable, topic, _want("t", 2, 300), java_consumer, tmp_path)
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
        tasks = _stage(sink, settings, "q-staging-kill", "s", 2, 250)
        victim = sorted(killable.broker_names)[-1]
        assert victim in {c.bname for t in tasks for c in t.detail}, "some chunks are staged on the victim"
        killable.kill(victim)
        with pytest.raises(StaticMQError):
            sink.commit(settings, "q-staging-kill", 0, tasks)
        killable.start_broker(victim)
        killable.wait_registered()
        wait_until(lambda: _commits(sink, settings, tasks), 120, message="a commit after the broker's restart")
        _assert_once_for_both_consumers(killable, topic, _want("s", 2, 250), java_consumer, tmp_path)
    finally:
        backend.close()


def _commits(sink: RocketMQStagedSink, settings: WriteSettings, tasks: list[TaskWrite]) -> bool:
    try:
        sink.commit(settings, "q-staging-kill", 0, tasks)
    except StaticMQError:
        return False
    return True
