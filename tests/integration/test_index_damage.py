"""A damaged consume-queue (index) file never hides intact messages or hands out an acknowledged
offset again: at start the index is checked (impossible entries, or shorter than the checkpoint
says) and rebuilt from the commit log."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from staticmq_spark.client import Admin, Producer, PullConsumer
from staticmq_spark.local_clusters import LocalCluster
from tests.support.static_helpers import read_queue


def _stored_index(data: Path, topic: str, sent: list[bytes]) -> Path:
    """`sent` stored in a one-queue `topic` by a one-broker cluster in `data` (stopped again), in
    batches of 100; the path of that queue's first consume-queue (index) file."""
    with LocalCluster(brokers=1, data_dir=data) as cluster:
        with Admin(cluster.namesrv) as admin:
            admin.update_topic(topic, cluster=cluster.cluster_name, read_queues=1, write_queues=1)
        with Producer(cluster.namesrv, active_detection=False) as producer:
            for start in range(0, len(sent), 100):
                producer.send_batch(topic, sent[start : start + 100], queue=0)
    files = sorted((data / "broker-0" / "store" / "consumequeue" / topic / "0").iterdir())
    return next(f for f in files if f.suffix != ".json")


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
    damage(_stored_index(data, "indexed", sent))

    with LocalCluster(brokers=1, data_dir=data) as cluster:
        with PullConsumer(cluster.namesrv) as consumer:
            assert [body for _, body in read_queue(consumer, "indexed", 0)] == sent, "every message, in order"
        with Producer(cluster.namesrv, active_detection=False) as producer:
            assert producer.send("indexed", b"next", queue=0).queue_offset == 300, "no offset handed out twice"


def _shift_entry(path: Path, entry: int, by: int) -> None:
    """Entry `entry` points `by` bytes off: still inside the log, so no start-up check can tell."""
    raw = bytearray(path.read_bytes())
    at = 24 * entry
    pos = int.from_bytes(raw[at : at + 8], "little", signed=True)
    raw[at : at + 8] = (pos + by).to_bytes(8, "little", signed=True)
    path.write_bytes(bytes(raw))


@pytest.mark.parametrize("by", [5, -3, 512])
def test_an_index_entry_pointing_at_the_wrong_bytes_is_refused_then_rebuilt(tmp_path: Path, by: int) -> None:
    """A plausible but wrong position (a bit flip in an index entry): the read that meets it is
    refused naming the queue and offset (never served as a message), and the next start rebuilds the
    index from the commit log, so every message reads back intact."""
    from staticmq_spark.errors import DataCorruptError

    data = tmp_path / "cluster"
    sent = [f"message-{i:04d}".encode() for i in range(300)]
    _shift_entry(_stored_index(data, "shifted", sent), 150, by)

    with LocalCluster(brokers=1, data_dir=data) as cluster, PullConsumer(cluster.namesrv) as consumer:
        assert consumer.pull("shifted", 0, 0, max_messages=100).status.name == "FOUND", "before it: served"
        with pytest.raises(DataCorruptError, match="consume queue shifted/0: the entry of offset 150"):
            consumer.pull("shifted", 0, 120, max_messages=100)
    with LocalCluster(brokers=1, data_dir=data) as cluster, PullConsumer(cluster.namesrv) as consumer:
        assert [body for _, body in read_queue(consumer, "shifted", 0)] == sent, "rebuilt: every message, in order"
