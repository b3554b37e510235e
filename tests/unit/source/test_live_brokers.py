"""The driver's kept list of live brokers (source/live_brokers.py): snapshots from the brokers on it,
the name server asked again when the list is old or the answers may be missing a broker. Over the
memory:// backend (real static-topic semantics in this process); the reader is wrapped to count
the name server's answers."""

from __future__ import annotations

import itertools
import pickle
from collections.abc import Iterator, Mapping

import pytest

from staticmq_spark.backends import BrokerState, ClusterReader, open_backend
from staticmq_spark.backends.memory import MemoryCluster
from staticmq_spark.backends.memory.cluster import MemoryBroker
from staticmq_spark.errors import BrokerUnavailableError
from staticmq_spark.source.live_brokers import MAX_AGE_S, LiveBrokers
from staticmq_spark.source.snapshot import take_snapshot

_names = itertools.count()


class Counted:
    """A reader whose name-server answers are counted; `down` names brokers that do not answer."""

    def __init__(self, reader: ClusterReader) -> None:
        self.reader = reader
        self.asked = 0
        self.down: set[str] = set()

    def live_brokers(self) -> dict[str, str]:
        self.asked += 1
        return {n: a for n, a in self.reader.live_brokers().items() if n not in self.down}

    def gather(self, topic: str, brokers: Mapping[str, str] | None = None) -> dict[str, BrokerState]:
        asked = self.live_brokers() if brokers is None else brokers
        if self.down & set(asked):
            raise BrokerUnavailableError(f"broker(s) {sorted(self.down & set(asked))} do not answer")
        return self.reader.gather(topic, asked)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def cluster() -> Iterator[MemoryCluster]:
    c = MemoryCluster(f"live{next(_names)}", ["b0", "b1"])
    c.create_static_topic("orders", 4, ["b0", "b1"])
    c.send("orders", [f"k{i}" for i in range(8)], [b"x"] * 8)
    yield c
    c.close()


def counted(cluster: MemoryCluster) -> Counted:
    return Counted(open_backend(f"memory://{cluster.name}").reader())


def test_snapshots_ask_the_brokers_on_the_kept_list_until_it_is_older_than_max_age(cluster: MemoryCluster) -> None:
    access, clock = counted(cluster), Clock()
    live = LiveBrokers(clock=clock)
    first = take_snapshot(access, "orders", live)  # type: ignore[arg-type]
    clock.now += MAX_AGE_S - 0.5
    cluster.send("orders", ["k1"], [b"y"])
    again = take_snapshot(access, "orders", live)  # type: ignore[arg-type]
    assert access.asked == 1, "one name-server answer for both snapshots"
    assert sum(again.latest().values()) == sum(first.latest().values()) + 1, "the brokers' state is asked every time"
    clock.now += 1.0
    take_snapshot(access, "orders", live)  # type: ignore[arg-type]
    assert access.asked == 2, "a list older than max age is asked for again"


def test_a_remap_onto_a_broker_registered_after_the_list_was_kept_is_seen_at_the_next_snapshot(
    cluster: MemoryCluster,
) -> None:
    access, live = counted(cluster), LiveBrokers(clock=Clock())
    before = take_snapshot(access, "orders", live)  # type: ignore[arg-type]
    with cluster.lock:
        cluster.brokers["b2"] = MemoryBroker("b2")
    moved = cluster.remap("orders", ["b2"]).moved
    assert moved, "the remap moved logic queues onto b2"
    after = take_snapshot(access, "orders", live)  # type: ignore[arg-type]
    assert access.asked == 2, "a leader missing from the kept list makes the snapshot ask the name server"
    assert {chain[-1].bname for chain in after.chains.values()} == {"b2"}
    assert "b2" in after.addrs
    assert all(after.latest()[q] >= before.latest()[q] for q in before.latest()), "offsets never go back"


def test_a_broker_on_the_kept_list_that_does_not_answer_makes_the_snapshot_ask_the_name_server(
    cluster: MemoryCluster,
) -> None:
    cluster.remap("orders", ["b0"])  # every queue led by b0; b1 holds only sealed segments
    access, live = counted(cluster), LiveBrokers(clock=Clock())
    take_snapshot(access, "orders", live)  # type: ignore[arg-type]
    access.down.add("b1")  # gone from the name server too
    snap = take_snapshot(access, "orders", live)  # type: ignore[arg-type]
    assert access.asked == 2
    assert "b1" not in snap.addrs
    assert live.kept() == {"b0": "memory:b0"}


def test_an_answer_that_leaves_out_an_asked_broker_makes_the_snapshot_ask_the_name_server(
    cluster: MemoryCluster,
) -> None:
    cluster.remap("orders", ["b0"])
    access, live = counted(cluster), LiveBrokers(clock=Clock())
    take_snapshot(access, "orders", live)  # type: ignore[arg-type]
    with cluster.lock:
        del cluster.brokers["b1"]  # the memory reader leaves out a broker that is gone, as RocketMQ's does
    snap = take_snapshot(access, "orders", live)  # type: ignore[arg-type]
    assert access.asked == 2
    assert set(snap.addrs) == {"b0"}


def test_a_pickled_reader_starts_without_a_kept_list(cluster: MemoryCluster) -> None:
    live = LiveBrokers()
    live.ask(open_backend(f"memory://{cluster.name}").reader())
    assert live.kept() is not None
    copy = pickle.loads(pickle.dumps(live))
    assert copy.kept() is None
    assert copy.max_age_s == live.max_age_s
