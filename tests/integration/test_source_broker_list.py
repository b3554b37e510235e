"""The source's driver keeps the name server's list of live brokers between triggers
(source/live_brokers.py): on real broker processes, a remap onto a broker that registered after the
list was kept, and a broker killed while it is on the list, are seen at the next trigger."""

from __future__ import annotations

import signal
from typing import Any

from staticmq_spark.client import Admin, Producer
from staticmq_spark.session.features import ReadAllAvailable
from staticmq_spark.source.executor import read_partition
from staticmq_spark.source.options import parse_source_options
from staticmq_spark.source.stream_reader import StaticMQStreamReader
from tests.support.waiting import wait_until


def _reader(namesrv: str, topic: str) -> StaticMQStreamReader:
    opts = {"namesrv": namesrv, "topic": topic, "startingOffsets": "earliest", "retryTimeoutMs": "20000"}
    return StaticMQStreamReader(parse_source_options(opts, streaming=True))


def _trigger(reader: StaticMQStreamReader, start: dict[str, Any]) -> tuple[dict[str, Any], list[bytes]]:
    """One micro-batch as Spark asks for it: its end, then its partitions read."""
    end = reader.latestOffset(start, ReadAllAvailable())
    rows = [v for p in reader.partitions(start, end) for b in read_partition(p) for v in b.column("value").to_pylist()]
    return end, sorted(rows)


def _wait_leaders(admin: Admin, topic: str, broker: str) -> None:
    def led() -> bool:
        view = admin.route_view(topic)
        return all(view.write_queues[q].broker == broker for q in (0, 1))

    wait_until(led, 10, message=f"the route of {topic} to lead both queues on {broker}")


def _send(namesrv: str, topic: str, prefix: str, n: int) -> list[bytes]:
    values = [f"{prefix}-{i}".encode() for i in range(n)]
    with Producer(namesrv) as producer:
        for i, v in enumerate(values):
            producer.send(topic, v, queue=i % 2)
    return sorted(values)


def _reading(local_cluster, unique_topic, brokers: int) -> tuple[Any, str, StaticMQStreamReader, dict[str, Any]]:
    """A cluster of `brokers`, a static topic of 2 logic queues on broker-0 and a reader past its
    first (empty) micro-batch, which keeps the name server's list: (cluster, topic, reader, end)."""
    c = local_cluster(brokers=brokers)
    topic = unique_topic("kept")
    with Admin(c.namesrv) as admin:
        admin.update_static_topic(topic, 2, brokers=["broker-0"])
    reader = _reader(c.namesrv, topic)
    end, rows = _trigger(reader, reader.initialOffset())
    assert rows == [] and reader._subscription.live.kept() is not None
    return c, topic, reader, end


def test_a_remap_onto_a_broker_registered_after_the_kept_list_is_read_at_the_next_trigger(
    local_cluster, unique_topic
) -> None:
    c, topic, reader, end = _reading(local_cluster, unique_topic, 1)
    before = _send(c.namesrv, topic, "before", 6)
    end, rows = _trigger(reader, end)
    assert rows == before
    new = c.add_broker()
    with Admin(c.namesrv) as admin:
        admin.remapping_static_topic(topic, brokers=[new])
        _wait_leaders(admin, topic, new)
    after = _send(c.namesrv, topic, "after", 6)
    end, rows = _trigger(reader, end)
    assert rows == after, "the messages on the new leader are in the next micro-batch"
    kept = reader._subscription.live.kept()
    assert kept is not None and new in kept
    reader.stop()


def test_a_broker_killed_while_on_the_kept_list_leaves_it_once_the_name_server_expires_it(
    local_cluster, unique_topic
) -> None:
    c, topic, reader, end = _reading(local_cluster, unique_topic, 2)
    assert set(reader._subscription.live.kept() or {}) == {"broker-0", "broker-1"}
    c.kill_broker("broker-1", signal.SIGKILL)  # holds no part of the topic; on the name server for 10 s more
    sent = _send(c.namesrv, topic, "m", 4)
    end, rows = _trigger(reader, end)  # retried until the name server has expired broker-1
    assert rows == sent
    assert set(reader._subscription.live.kept() or {}) == {"broker-0"}
    reader.stop()
