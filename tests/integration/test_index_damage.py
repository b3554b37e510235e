"""A damaged consume-queue (index) file never hides intact messages or hands out an acknowledged
offset again: at start the index is checked (impossible entries, or shorter than the checkpoint
says) and rebuilt from the commit log."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from staticmq_spark.client import Admin, Producer, PullConsumer
from staticmq_spark.testing import LocalCluster
from tests.static_helpers import read_queue


def _overwrite_entries(path: Path) -> None:
    raw = bytearray(path.read_bytes())
    raw[24 * 100 : 24 * 110] = b"\xff" * (24 * 10)  # entries 100..109: negative positions and sizes
    path.write_bytes(bytes(raw))


def _cut_file(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: 24 * 50])  # the index lost its last 250 entries


@pytest.mark.parametrize("damage", [_overwrite_entries, _cut_file], ids=["garbage-entries", "cut-short"])
def test_a_damaged_index_is_rebuilt_from_the_commit_log(tmp_path: Path, damage: Callable[[Path], None]) -> None:
    data = tmp_path / "cluster"
    sent = [f"m{i:03d}".encode() for i in range(300)]
    with LocalCluster(brokers=1, data_dir=data) as cluster:
        with Admin(cluster.namesrv) as admin:
            admin.update_topic("indexed", cluster=cluster.cluster_name, read_queues=1, write_queues=1)
        with Producer(cluster.namesrv, active_detection=False) as producer:
            for start in range(0, 300, 100):
                producer.send_batch("indexed", sent[start : start + 100], queue=0)
    files = sorted((data / "broker-0" / "store" / "consumequeue" / "indexed" / "0").iterdir())
    damage(next(f for f in files if f.suffix != ".json"))

    with LocalCluster(brokers=1, data_dir=data) as cluster:
        with PullConsumer(cluster.namesrv) as consumer:
            assert [body for _, body in read_queue(consumer, "indexed", 0)] == sent, "every message, in order"
        with Producer(cluster.namesrv, active_detection=False) as producer:
            assert producer.send("indexed", b"next", queue=0).queue_offset == 300, "no offset handed out twice"
