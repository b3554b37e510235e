"""kill -9 of a broker while a producer sends with sync flush: every acknowledged message
survives byte for byte, offsets stay contiguous, and nothing corrupt is ever served."""

from __future__ import annotations

import hashlib
import random
import threading
import time

import pytest

from staticmq_spark.client import Producer, PullConsumer, PullStatus
from staticmq_spark.errors import StaticMQError
from tests.support.topics import create_topic
from tests.support.waiting import wait_until


def payload(seq: int) -> bytes:
    size = 20 + seq * 7919 % 3000
    return f"{seq}:".encode() + hashlib.sha256(str(seq).encode()).digest() * (size // 32 + 1)


@pytest.mark.slow
def test_acknowledged_messages_survive_repeated_sigkill(local_cluster, unique_topic) -> None:
    c = local_cluster(brokers=1, flush="sync", store={"segment_bytes": 1 << 20, "max_batch_bytes": 512 * 1024})
    topic = unique_topic("crash")
    create_topic(c.namesrv, topic, queues=1)
    acked: dict[int, int] = {}  # seq -> acknowledged offset
    stop = threading.Event()
    errors: list[str] = []

    def produce() -> None:
        seq = 0
        with Producer(c.namesrv, send_timeout_s=5, retries=1, active_detection=False) as producer:
            while not stop.is_set():
                batch = list(range(seq, seq + random.randint(1, 40)))
                try:
                    result = producer.send_batch(topic, [payload(s) for s in batch], queue=0)[0]
                except StaticMQError as exc:
                    errors.append(exc.message)
                    time.sleep(0.05)  # pacing: no tight retry loop while the broker is down (not a wait)
                else:
                    for i, s in enumerate(batch):
                        acked[s] = result.queue_offset + i
                seq = batch[-1] + 1

    worker = threading.Thread(target=produce)
    worker.start()
    try:
        for _ in range(4):
            time.sleep(random.uniform(0.4, 1.2))  # not a wait: the producer's load runs up to a random kill
            c.kill_broker("broker-0")
            c.start_broker("broker-0")
        restarted_at = len(acked)
        wait_until(
            lambda: len(acked) > restarted_at,
            30,
            message=lambda: f"a send acknowledged after the last restart; errors since: {errors[-3:]}",
        )
    finally:
        stop.set()
        worker.join(60)
    assert len(acked) > 100, "the producer should have been acknowledged between crashes"

    found: dict[int, bytes] = {}
    with PullConsumer(c.namesrv) as consumer:
        offset = 0
        while True:
            res = consumer.pull(topic, 0, offset, max_messages=500)
            if res.status is not PullStatus.FOUND:
                assert res.status is PullStatus.NO_NEW_MESSAGE
                break
            offsets = res.batch.column("queue_offset").to_pylist()
            assert offsets == list(range(offset, offset + len(offsets))), "offsets must be contiguous"
            found.update(zip(offsets, res.batch.column("body").to_pylist(), strict=True))
            offset = res.next_offset
    for seq, off in acked.items():
        assert found.get(off) == payload(seq), f"acknowledged message {seq} at offset {off} is missing or altered"
    for body in found.values():
        seq = int(body.split(b":", 1)[0])
        assert body == payload(seq), "a served message is corrupt"
