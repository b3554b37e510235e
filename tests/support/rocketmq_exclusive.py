"""What the ExclusiveConsumer tests on a real Apache RocketMQ share: names, sends, waiting for a
group's allocation to settle, draining a consumer, child consumer processes whose lines are
collected as they come, and the check that no queue had two live holders at once."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from staticmq_spark.backends import open_backend
from staticmq_spark.backends.rocketmq.backend import RocketMQBackend
from staticmq_spark.backends.rocketmq.wire.frames import RemotingCommand
from staticmq_spark.client import ExclusiveConsumer, Producer, PullResult
from staticmq_spark.local_clusters.rocketmq import LocalRocketMQ
from tests.support.rocketmq_tools import compile_client
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
ORDERLY = ROOT / "tests" / "support" / "java" / "OrderlyConsumer.java"
BROKER_LOCK_S = 60  # RocketMQ's broker keeps a queue lock this long after its last renewal
_n = itertools.count()


def names(what: str) -> tuple[str, str]:
    """A fresh topic and group name for one test."""
    n = next(_n)
    return f"rmq-excl-{what}-{n}-{int(time.time())}", f"rmq-excl-g-{what}-{n}-{int(time.time())}"


def send(ns: str, topic: str, queues: int, prefix: str, per_queue: int) -> None:
    with Producer(ns) as producer:
        for q in range(queues):
            producer.send_batch(topic, [f"{prefix}-{q}-{i}" for i in range(per_queue)], queue=q)


def broker_call(
    cluster: LocalRocketMQ, broker: str, code: int, ext: dict[str, object], body: bytes = b""
) -> RemotingCommand:
    """One remoting request to `broker` from a client of its own (not any consumer's)."""
    backend = open_backend(cluster.address)
    assert isinstance(backend, RocketMQBackend)
    try:
        return backend.instance.remoting.call(cluster.broker_addr(broker), code, ext, body)
    finally:
        backend.close()


def held_ids(consumer: ExclusiveConsumer) -> set[int]:
    return {q.queue_id for q in consumer.held}


def settle(consumers: list[ExclusiveConsumer], want: list[set[int]], timeout_s: float = 30.0) -> None:
    """Wait until each consumer holds exactly its queues in `want` (renewing and re-balancing)."""

    def settled() -> bool:
        for c in consumers:
            c.renew()
        return [held_ids(c) for c in consumers] == want

    wait_until(
        settled, timeout_s, interval_s=0.2, message=lambda: f"held {[held_ids(c) for c in consumers]}, want {want}"
    )


def rows(result: PullResult) -> list[tuple[int, bytes]]:
    columns = result.batch.column("queue_offset").to_pylist(), result.batch.column("body").to_pylist()
    return list(zip(*columns, strict=True))


def drain(consumer: ExclusiveConsumer, into: dict[int, list[tuple[int, bytes]]], until: int, timeout_s: float) -> None:
    """Poll until `into` holds `until` messages in all or time runs out."""
    deadline = time.monotonic() + timeout_s
    while sum(len(v) for v in into.values()) < until and time.monotonic() < deadline:
        for result in consumer.poll(max_messages=16, wait_s=0.3):
            into.setdefault(result.queue_id, []).extend(rows(result))


class ChildLines:
    """A child process whose stdout lines a thread collects with the wall-clock time each arrived."""

    def __init__(self, cmd: Sequence[str]) -> None:
        self.proc = subprocess.Popen(list(cmd), cwd=ROOT, stdout=subprocess.PIPE, text=True)
        self.lines: list[tuple[float, str]] = []
        self.texts: list[str] = []  # the same lines without their times
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout or ():
            self.lines.append((time.time(), line.strip()))
            self.texts.append(line.strip())

    def kill(self) -> None:
        """kill -9 (a no-op once it has exited)."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def close(self) -> None:
        self.kill()
        self._reader.join(5)


def exclusive_worker(ns: str, group: str, topic: str, lease_s: float, client_id: str) -> ChildLines:
    """tests/support/exclusive_worker.py in a process of its own."""
    return ChildLines(
        [sys.executable, "-m", "tests.support.exclusive_worker", ns, group, topic, str(lease_s), client_id]
    )


def java_orderly(namesrv: str, topic: str, group: str, classes: Path, timeout_s: int = 300) -> ChildLines:
    """RocketMQ's own orderly consumer (tests/support/java/OrderlyConsumer.java) in a JVM."""
    java = ["java", "-Xmx256m", "-cp", compile_client(ORDERLY, classes), "OrderlyConsumer"]
    return ChildLines([*java, namesrv, topic, group, str(timeout_s)])


@dataclass(frozen=True, slots=True)
class Delivery:
    """One message handed out to a consumer: when (wall clock), to whom, and where from."""

    at: float
    who: str
    queue: int
    offset: int
    body: str


def worker_deliveries(who: str, child: ChildLines) -> list[Delivery]:
    """The batches an exclusive_worker printed, in the order it handed them out."""
    out: list[Delivery] = []
    for _, line in list(child.lines):
        batch = json.loads(line)
        if "offsets" in batch:
            for offset, body in zip(batch["offsets"], batch["bodies"], strict=True):
                out.append(Delivery(batch["at"], who, batch["queue"], offset, body))
    return out


def java_deliveries(who: str, child: ChildLines) -> list[Delivery]:
    """The "MSG queue offset body" lines of OrderlyConsumer.java, with the time each arrived."""
    out: list[Delivery] = []
    for at, line in list(child.lines):
        if line.startswith("MSG "):
            _, q, offset, body = line.split(" ", 3)
            out.append(Delivery(at, who, int(q), int(offset), body))
    return out


def holder_runs(deliveries: Sequence[Delivery], killed: set[str]) -> list[tuple[str, int, int]]:
    """Check that one queue's deliveries came from one live holder at a time, and return its runs
    (holder, first offset, last offset) in time order.

    Each consumer's offsets strictly increase; the time-ordered deliveries form runs of one
    consumer each that read consecutive offsets of the queue (the offsets anyone was given); a run
    starts right after the previous one ended, or earlier only when the previous holder was killed
    (it had not committed all it was given: at-least-once across a kill). Two live holders taking
    turns would break the runs' contiguity."""
    for who in {d.who for d in deliveries}:
        mine = [d.offset for d in deliveries if d.who == who]
        assert all(a < b for a, b in itertools.pairwise(mine)), f"{who}'s offsets are out of order: {mine}"
    index = {o: i for i, o in enumerate(sorted({d.offset for d in deliveries}))}
    runs: list[tuple[str, list[int]]] = []
    for d in sorted(deliveries, key=lambda d: (d.at, d.who, d.offset)):
        if runs and runs[-1][0] == d.who:
            runs[-1][1].append(index[d.offset])
        else:
            runs.append((d.who, [index[d.offset]]))
    for who, ids in runs:
        assert ids == list(range(ids[0], ids[0] + len(ids))), f"{who} skipped offsets within one run: {runs}"
    for (before, ids), (after, nxt) in itertools.pairwise(runs):
        handover_ok = nxt[0] == ids[-1] + 1 or (before in killed and ids[0] <= nxt[0] <= ids[-1] + 1)
        assert handover_ok, f"{after} started at #{nxt[0]} after {before} ended at #{ids[-1]}: {runs}"
    assert runs[0][1][0] == 0
    by_index = sorted(index, key=index.__getitem__)
    return [(who, by_index[ids[0]], by_index[ids[-1]]) for who, ids in runs]
