"""A bit flip in a commit-log file is never served: after a restart the damaged record is refused
with an error naming the file and the byte offset, the records around it are still read intact."""

from __future__ import annotations

from pathlib import Path

import pytest

from staticmq_spark.client import Admin, Producer, PullConsumer, PullStatus
from staticmq_spark.errors import DataCorruptError
from staticmq_spark.local_clusters import LocalCluster


def test_a_flipped_bit_in_a_record_is_refused_and_its_neighbours_are_served(tmp_path: Path) -> None:
    data = tmp_path / "cluster"
    with LocalCluster(brokers=1, data_dir=data) as cluster:
        with Admin(cluster.namesrv) as admin:
            admin.update_topic("bits", cluster=cluster.cluster_name, read_queues=1, write_queues=1)
        with Producer(cluster.namesrv, active_detection=False) as producer:
            for r in range(3):  # three batches: three commit-log records
                producer.send_batch("bits", [f"record-{r}-message-{i:02d}".encode() for i in range(10)], queue=0)
    logs = sorted((data / "broker-0" / "store" / "commitlog").glob("*.log"))
    target = next(p for p in logs if b"record-1-message-05" in p.read_bytes())
    raw = bytearray(target.read_bytes())
    at = raw.index(b"record-1-message-05") + 7
    raw[at] ^= 0x01  # one bit
    target.write_bytes(bytes(raw))

    with LocalCluster(brokers=1, data_dir=data) as cluster, PullConsumer(cluster.namesrv) as consumer:
        first = consumer.pull("bits", 0, 0, max_messages=10)
        assert first.status is PullStatus.FOUND
        assert first.batch.column("body").to_pylist() == [f"record-0-message-{i:02d}".encode() for i in range(10)]
        with pytest.raises(DataCorruptError, match=rf"damaged record in commit log file .*{target.name} at byte \d+"):
            consumer.pull("bits", 0, 10, max_messages=10)
        with pytest.raises(DataCorruptError):
            consumer.pull("bits", 0, 0, max_messages=30)  # a read that spans it is refused whole
        last = consumer.pull("bits", 0, 20, max_messages=10)
        assert last.batch.column("body").to_pylist() == [f"record-2-message-{i:02d}".encode() for i in range(10)]
