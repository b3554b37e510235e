"""Two Python ExclusiveConsumers (processes of their own) and one RocketMQ Java orderly consumer in
one group on a real Apache RocketMQ, while a producer keeps sending keyed messages, through a remap
of the static topic and a kill -9 of one of each kind: one holder per queue at a time, each key in
order, takeover once the killed members' broker locks expire, and the group's offsets at the end of
every queue in RocketMQ's own `mqadmin consumerProgress`."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from staticmq_spark.client import Producer, PullConsumer
from staticmq_spark.errors import StaticMQError
from staticmq_spark.local_clusters.rocketmq import LocalRocketMQ
from tests.support.rocketmq_exclusive import (
    BROKER_LOCK_S,
    ChildLines,
    Delivery,
    exclusive_worker,
    holder_runs,
    java_deliveries,
    java_orderly,
    names,
    worker_deliveries,
)
from tests.support.waiting import wait_until

QUEUES = 4
LEASE_S = 10  # the Python workers renew every 5 s
JAVA_RENEW_S = 20  # RocketMQ's orderly consumer renews its locks every 20 s
PACE_S = 0.1
NEW_SEGMENT_START = 10000  # the remap's segment starts at the next multiple of 10000 after the old end + 5000


class KeyedProducer:
    """Sends `k{queue}-{seq}` to every logic queue, one round every PACE_S, until stopped; `sent`
    holds what the brokers acknowledged. A send refused while a remap moves the queues is not
    sent again (its seq is skipped)."""

    def __init__(self, ns: str, topic: str) -> None:
        self.sent: dict[int, list[str]] = {q: [] for q in range(QUEUES)}
        self.refused: list[str] = []
        self.seq = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(ns, topic), daemon=True)
        self._thread.start()

    def _run(self, ns: str, topic: str) -> None:
        with Producer(ns) as producer:
            while not self._stop.is_set():
                for q, sent in self.sent.items():
                    body = f"k{q}-{self.seq}"
                    try:
                        producer.send_batch(topic, [body], queue=q)
                    except StaticMQError as exc:
                        self.refused.append(f"{body}: {exc.message}")
                    else:
                        sent.append(body)
                self.seq += 1
                self._stop.wait(PACE_S)  # the producer's pace

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)


def _seq(body: str) -> int:
    return int(body.rsplit("-", 1)[1])


def _takeovers(deliveries: list[Delivery], who: str, after: float) -> dict[int, float]:
    """When `who` first handed out each queue's messages after `after`."""
    first: dict[int, float] = {}
    for d in sorted(deliveries, key=lambda d: d.at):
        if d.who == who and d.at > after:
            first.setdefault(d.queue, d.at)
    return first


def _missing(deliveries: list[Delivery], sent: dict[int, list[str]]) -> dict[int, list[str]]:
    """Per queue, the sent bodies nobody was handed yet (the first few, and how many)."""
    out: dict[int, list[str]] = {}
    for q, bodies in sent.items():
        seen = {d.body for d in deliveries if d.queue == q}
        left = [b for b in bodies if b not in seen]
        if left:
            out[q] = [*left[:3], f"... {len(left)} in all"]
    return out


def _exits(workers: dict[str, ChildLines]) -> str:
    codes = {who: child.proc.poll() for who, child in workers.items()}
    return f"worker exit codes {codes}"


def _last_holders(deliveries: list[Delivery]) -> dict[int, str]:
    return {d.queue: d.who for d in sorted(deliveries, key=lambda d: d.at)}


def test_two_python_and_one_java_orderly_consumer_keep_each_key_in_order_through_a_kill_of_each_and_a_remap(
    rocketmq_cluster: LocalRocketMQ, tmp_path: Path
) -> None:
    ns = rocketmq_cluster.address
    topic, group = names("scenario")
    rocketmq_cluster.update_static_topic(topic, QUEUES, ["broker-a"])
    java = java_orderly(rocketmq_cluster.namesrv, topic, group, tmp_path)
    workers: dict[str, ChildLines] = {}
    producer = KeyedProducer(ns, topic)

    def got() -> list[Delivery]:
        out = java_deliveries("java", java)
        for who, child in workers.items():
            out += worker_deliveries(who, child)
        return out

    def queues_of(who: str, after: float = 0.0) -> set[int]:
        return {d.queue for d in got() if d.who == who and d.at > after}

    try:
        # alone in the group, the Java consumer locks and consumes every queue
        wait_until(
            lambda: queues_of("java") == set(range(QUEUES)) or java.proc.poll() is not None,
            90,
            interval_s=0.5,
            message=lambda: f"the Java consumer's first messages {java.lines[-5:]}",
        )
        assert java.proc.poll() is None, f"the Java consumer exited with {java.proc.returncode}"
        for who in ("py-a", "py-b"):  # client ids sorting after Java's ("ip@orderly-pid")
            workers[who] = exclusive_worker(ns, group, topic, LEASE_S, who)
        joined = time.time()
        # the group re-balances (Java commits and unlocks what the workers are allocated)
        wait_until(
            lambda: all(queues_of(who, joined) for who in ("java", "py-a", "py-b")),
            90,
            interval_s=0.5,
            message=lambda: f"each member's share; last holders {_last_holders(got())}, {_exits(workers)}",
        )
        rocketmq_cluster.remap_static_topic(topic, ["broker-b"])
        after_remap = producer.seq
        # every member goes on with its queues at their new leader
        wait_until(
            lambda: {d.who for d in got() if _seq(d.body) > after_remap} == {"java", "py-a", "py-b"},
            60,
            interval_s=0.5,
            message=lambda: f"each member past the remap; last holders {_last_holders(got())}, {_exits(workers)}",
        )
        java.kill()  # kill -9 of one of each kind at once: their locks stay on the brokers until they expire
        workers["py-b"].kill()
        killed_at = time.time()
        killed = {"java", "py-b"}
        orphaned = {q: who for q, who in _last_holders(got()).items() if who in killed}
        assert set(orphaned.values()) == killed, orphaned
        # the survivor takes over every queue once the dead members' locks expired at the brokers
        wait_until(
            lambda: queues_of("py-a", killed_at) == set(range(QUEUES)),
            BROKER_LOCK_S + 30,
            interval_s=0.5,
            message=lambda: f"the survivor's takeover; it has {queues_of('py-a', killed_at)}",
        )
        producer.stop()
        # ... and consumes to the end of every queue
        wait_until(
            lambda: not _missing(got(), producer.sent),
            60,
            interval_s=0.5,
            message=lambda: f"the survivor to consume every message sent; missing {_missing(got(), producer.sent)}",
        )
        deliveries = got()
        for q in range(QUEUES):
            mine = [d for d in deliveries if d.queue == q]
            runs = holder_runs(mine, killed)  # (1) one live holder at a time, each in offset order
            assert runs[-1][0] == "py-a", runs
            by_offset = {d.offset: d.body for d in mine}
            assert len(by_offset) == len({d.body for d in mine}), f"queue {q}: one offset, two bodies"
            seqs = [_seq(by_offset[o]) for o in sorted(by_offset)]
            assert seqs == sorted(seqs), f"queue {q} is out of key order"  # (2) per key order
            assert {d.body for d in mine} >= set(producer.sent[q])  # (2) nothing lost
        # (3) takeover after the killed members' lock expiry, within it and a margin
        takeover = _takeovers(deliveries, "py-a", killed_at)
        for q, who in orphaned.items():
            renewed_within = JAVA_RENEW_S if who == "java" else LEASE_S / 2
            waited = takeover[q] - killed_at
            assert BROKER_LOCK_S - renewed_within - 2 < waited < BROKER_LOCK_S + 15, (q, who, waited)
        # (4) the group's offsets at the end of each queue, in RocketMQ's own tool
        with PullConsumer(ns, group=group) as puller:
            ends = {q: puller.max_offset(topic, q) for q in range(QUEUES)}
            wait_until(
                lambda: all(puller.committed(topic, q) == ends[q] for q in range(QUEUES)),
                20,
                message="the survivor's commits",
            )
        # one row per logic queue: the broker offset in logic space, the consumer offset as RocketMQ
        # stores it, physical within the new segment (docs/rocketmq.md)
        rows = [line.split() for line in rocketmq_cluster.mqadmin("consumerProgress", "-g", group).splitlines()]
        progress = {int(r[2]): (int(r[3]), int(r[4])) for r in rows if r and r[0] == topic}
        assert progress == {q: (end, end - NEW_SEGMENT_START) for q, end in ends.items()}
    finally:
        producer.stop()
        java.close()
        for child in workers.values():
            child.close()
