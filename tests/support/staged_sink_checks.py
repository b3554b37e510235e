"""What the staged exactly-once sink tests on a real Apache RocketMQ share: rows to write, the
topic read back with staticmq's PullConsumer and with RocketMQ's own Java push consumer
(tests/support/java/PropertiesConsumer.java), and the check that every row landed once, in order,
in murmur3(key) mod totalQueues."""

from __future__ import annotations

import itertools
import os
import subprocess
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa

from staticmq_spark.backends.api import TaskWrite
from staticmq_spark.backends.rocketmq.sinks.staged_sink import RocketMQStagedSink
from staticmq_spark.backends.types import WriteSettings
from staticmq_spark.client import PullConsumer
from staticmq_spark.hashing import queue_for_key
from staticmq_spark.local_clusters.rocketmq import LocalRocketMQ
from tests.support.sink_tasks import write_task
from tests.support.waiting import wait_until

_n = itertools.count()
QUEUES = 4
ROOT = Path(__file__).resolve().parents[2]
JAVA_CONSUMER = ROOT / "tests" / "support" / "java" / "PropertiesConsumer.java"


def java_read(namesrv: str, topic: str, expected: int, classpath: str, workdir: Path) -> list[list[str]]:
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


def batch_of(label: str, n: int, props: bool = False) -> pa.RecordBatch:
    data: dict[str, object] = {
        "key": [f"user-{i % 23}" for i in range(n)],
        "value": [f"{label}-{i}".encode() for i in range(n)],
    }
    if props:
        data["properties"] = pa.array([[("color", f"c{i % 3}")] for i in range(n)], pa.map_(pa.string(), pa.string()))
    return pa.RecordBatch.from_pydict(data)


def visible(ns: str, topic: str) -> list[tuple[int, str, str]]:
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


def want(label: str, parts: int, n: int) -> Counter[str]:
    return Counter(f"{label}{p}-{i}" for p in range(parts) for i in range(n))


def settled(ns: str, topic: str, want: Counter[str] | None = None) -> list[tuple[int, str, str]]:
    """visible once the brokers have dispatched what they stored (a message is in the commit log
    before it is in its consume queue): after `want`'s count of rows is readable (at most 20 s),
    or after 1 s when no count is wanted, read once more a moment later."""
    if want is not None:
        wait_until(lambda: len(visible(ns, topic)) >= want.total(), 20, message=f"{want.total()} rows readable")
    else:
        time.sleep(1.0)
    time.sleep(0.5)
    return visible(ns, topic)


def assert_once_in_order(seen: list[tuple[int, str, str]], want: Counter[str]) -> None:
    assert Counter(body for _, _, body in seen) == want, "every row exactly once"
    assert all(queue_for_key(key, QUEUES) == q for q, key, _ in seen), "rows sit in murmur3(key) mod totalQueues"
    for q in range(QUEUES):
        order = [(b.split("-")[0], int(b.split("-")[1])) for qq, _, b in seen if qq == q]
        assert order == sorted(order), f"queue {q}: rows in forwarding order (partition, then row)"


def assert_once_for_both_consumers(
    cluster: LocalRocketMQ, topic: str, want: Counter[str], java: str, workdir: Path
) -> None:
    """Every row once, in order, in murmur3(key) mod totalQueues as staticmq's PullConsumer reads the
    topic, and once as RocketMQ's own Java consumer reads it."""
    assert_once_in_order(settled(cluster.address, topic, want), want)
    bodies = Counter(body for _, _, body, _ in java_read(cluster.namesrv, topic, want.total(), java, workdir))
    assert bodies == want, "RocketMQ's Java consumer reads every row once"


def stage(
    sink: RocketMQStagedSink, settings: WriteSettings, writer: str, label: str, parts: int, n: int
) -> list[TaskWrite]:
    return [write_task(sink, settings, writer, 0, p, [batch_of(f"{label}{p}", n)]) for p in range(parts)]
