"""A RocketMQ broker whose per-pull limits allow it answers one pull with more than 16 MiB of
messages (up to its MAX_PULL_MSG_SIZE, 128 MiB). RocketMQ's own client refuses such frames; the
staticmq client reads them (it used to lose the connection and retry the same pull until it gave up)."""

from __future__ import annotations

from pathlib import Path

from staticmq_spark.client import Admin, Producer, PullConsumer
from staticmq_spark.local_clusters.rocketmq import LocalRocketMQ
from tests.support.waiting import wait_until

MESSAGES, SIZE = 24_000, 1024  # about 28 MB as stored: one answer, past 16 MiB
LARGE_PULLS = {
    "maxTransferCountOnMessageInMemory": "32768",
    "maxTransferBytesOnMessageInMemory": str(32 << 20),
    "maxTransferCountOnMessageInDisk": "32768",
    "maxTransferBytesOnMessageInDisk": str(32 << 20),
}


def test_a_pull_answer_larger_than_16_mib_is_read(tmp_path: Path) -> None:
    cluster = LocalRocketMQ(tmp_path / "rocketmq", brokers=1, broker_settings=LARGE_PULLS)
    try:
        cluster.start()
        ns = cluster.address
        with Admin(ns) as admin:
            admin.update_static_topic("large", 1, cluster="DefaultCluster")
        bodies = [i.to_bytes(4, "big") + bytes([i % 251]) * (SIZE - 4) for i in range(MESSAGES)]
        with Producer(ns) as producer:
            for start in range(0, MESSAGES, 2000):
                producer.send_batch("large", bodies[start : start + 2000], queue=0)
        with PullConsumer(ns) as consumer:
            # RocketMQ acknowledges a send once its commit log holds it and dispatches it to the
            # consume queue on its own thread: the one pull below must find every message there
            wait_until(
                lambda: consumer.max_offset("large", 0) == MESSAGES,
                30,
                message=f"the consume queue to hold all {MESSAGES} messages",
            )
            got = consumer.pull("large", 0, 0, max_messages=MESSAGES)
            seen = [m["body"] for m in got.messages()]
        assert got.next_offset == MESSAGES, f"one pull answered {len(seen)} messages"
        assert seen == bodies
    finally:
        cluster.close()
