"""kill -9 of a broker in the middle of a remap: the consistency check sees the half-done
operation, repair completes it, and every acknowledged message is read back in order."""

from __future__ import annotations

import threading
import time

import pytest

from staticmq_spark.client import Admin, Producer, PullConsumer
from staticmq_spark.errors import StaticMQError
from tests.support.static_helpers import read_queue
from tests.support.waiting import wait_until


@pytest.mark.slow
@pytest.mark.parametrize("victim", ["broker-1", "broker-0"], ids=["new-leader-killed", "old-leader-killed"])
def test_remap_interrupted_by_sigkill_is_detected_and_repaired(local_cluster, unique_topic, victim: str) -> None:
    c = local_cluster(brokers=2, heartbeat_ms=300, broker_timeout_ms=3000)
    topic = unique_topic("static")
    acked: list[bytes] = []
    stop = threading.Event()

    def produce() -> None:
        i = 0
        with Producer(c.namesrv, send_timeout_s=3, retries=1, active_detection=False) as producer:
            while not stop.is_set():
                body = f"m{i}".encode()
                try:
                    producer.send(topic, body, queue=0)
                except StaticMQError:
                    time.sleep(0.05)  # pacing: no tight retry loop while the queue is unavailable (not a wait)
                else:
                    acked.append(body)
                i += 1

    with Admin(c.namesrv) as admin:
        admin.update_static_topic(topic, 1, brokers=["broker-0"])
        worker = threading.Thread(target=produce)
        worker.start()
        wait_until(lambda: len(acked) >= 10, 30, message=lambda: f"10 sends acknowledged before the remap; {acked}")

        def crash(step: str) -> None:
            if step == "switched":
                c.kill_broker(victim)

        try:
            with pytest.raises(StaticMQError):
                admin.remapping_static_topic(topic, brokers=["broker-1"], on_step=crash)
            time.sleep(0.3)  # not a wait: the producer keeps sending while the victim is down
            c.start_broker(victim)
            report, _ = admin.static_topic_status(topic)
            assert not report.ok
            assert report.undecided == [0]
            result = admin.repair_static_topic(topic)
            assert "repaired" in result.message
            assert admin.static_topic_status(topic)[0].ok
            repaired_at = len(acked)
            wait_until(
                lambda: len(acked) >= repaired_at + 10,
                30,
                message=lambda: f"10 sends acknowledged after the repair; {len(acked) - repaired_at} so far",
            )
        finally:
            stop.set()
            worker.join(30)
    assert len(acked) > 10
    with PullConsumer(c.namesrv) as consumer:
        rows = read_queue(consumer, topic, 0)
    bodies = [b for _, b in rows]
    offsets = [o for o, _ in rows]
    assert offsets == sorted(set(offsets)), "logic offsets must increase"
    position = {b: i for i, b in enumerate(bodies)}
    missing = [b for b in acked if b not in position]
    assert not missing, f"acknowledged messages lost: {missing[:5]}"
    order = [position[b] for b in acked]
    assert order == sorted(order), "acknowledged messages must be read in the order they were sent"


def test_read_ahead_lost_to_a_broker_kill_is_read_again_after_restart(local_cluster, unique_topic) -> None:
    """A planned read asks for its next range before the current one is decoded; when the broker
    dies with that request outstanding, the next read retries it and gets the same messages."""
    from staticmq_spark.backends import open_backend
    from staticmq_spark.protocol.consume.pull_status import PullStatus

    c = local_cluster(brokers=1, flush="sync")
    topic = unique_topic("ahead")
    bodies = [f"m{i}".encode() for i in range(3000)]
    with Admin(c.namesrv) as admin, Producer(c.namesrv, active_detection=False) as producer:
        admin.update_static_topic(topic, 1, brokers=["broker-0"])
        wait_until(lambda: producer.topic_is_static(topic), 30, message="a static route")
        for i in range(0, len(bodies), 500):
            producer.send_batch(topic, bodies[i : i + 500], queue=0)
    access = open_backend(c.namesrv).reader()
    try:
        addr = c.broker_addr("broker-0")
        first = access.pull_physical(topic, "broker-0", addr, 0, 0, 1000, 30.0, until=3000)
        assert first.status is PullStatus.FOUND and first.next_offset == 1000
        c.restart_broker("broker-0")  # kill -9: the read-ahead of [1000, 2000) is lost or answered
        second = access.pull_physical(topic, "broker-0", addr, 0, 1000, 1000, 30.0, until=3000)
        third = access.pull_physical(topic, "broker-0", c.broker_addr("broker-0"), 0, 2000, 1000, 30.0, until=3000)
    finally:
        access.close()
    got = [b for read in (first, second, third) for b in read.messages.columns.column("body").to_pylist()]
    assert got == bodies
