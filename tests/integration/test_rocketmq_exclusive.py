"""ExclusiveConsumer on a real Apache RocketMQ: members of a group divide the logic queues with
RocketMQ's averaged allocation, lock them with LOCK_BATCH_MQ as RocketMQ's orderly consumers do,
re-balance when a member comes or goes, keep logic offsets, and hold a remapped queue's lock at
its old and new leader."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from staticmq_spark.backends.rocketmq.consumer_groups import lock_body, locked_queues
from staticmq_spark.backends.rocketmq.wire.codes import RequestCode
from staticmq_spark.client import ExclusiveConsumer, PullConsumer
from staticmq_spark.errors import InvalidArgumentError
from staticmq_spark.local_clusters.rocketmq import LocalRocketMQ
from tests.support.rocketmq_exclusive import (
    BROKER_LOCK_S,
    broker_call,
    drain,
    exclusive_worker,
    held_ids,
    java_orderly,
    names,
    rows,
    send,
    settle,
)
from tests.support.waiting import wait_until


def _foreign_lock_at_leaders(cluster: LocalRocketMQ, group: str, topic: str) -> set[int]:
    """The logic queues another client of the group gets when it locks each at its leader."""
    with PullConsumer(cluster.address) as puller:
        leaders = {q.queue_id: q.broker for q in puller.queues(topic)}
    return {q for q, broker in leaders.items() if _foreign_lock(cluster, broker, group, topic, [q])}


def _foreign_lock(cluster: LocalRocketMQ, broker: str, group: str, topic: str, queues: list[int]) -> set[int]:
    """What a LOCK_BATCH_MQ from another client of the group is granted at `broker`."""
    body = lock_body(group, "someone-else@1", topic, queues)
    return locked_queues(broker_call(cluster, broker, RequestCode.LOCK_BATCH_MQ, {}, body).body, topic)


def test_two_consumers_of_one_group_split_the_logic_queues_and_neither_gets_the_others(
    rocketmq_cluster: LocalRocketMQ,
) -> None:
    ns = rocketmq_cluster.address
    topic, group = names("split")
    rocketmq_cluster.update_static_topic(topic, 4, rocketmq_cluster.broker_names)
    with (
        ExclusiveConsumer(ns, group, topic, lease_s=6, client_id="a-python") as first,
        ExclusiveConsumer(ns, group, topic, lease_s=6, client_id="b-python") as second,
    ):
        settle([first, second], [{0, 1}, {2, 3}])
        assert _foreign_lock_at_leaders(rocketmq_cluster, group, topic) == set()
        send(ns, topic, 4, "m", 5)
        got: list[dict[int, list[tuple[int, bytes]]]] = [{}, {}]
        for _ in range(100):
            drain(first, got[0], 10, 0.5)
            drain(second, got[1], 10, 0.5)
            if sum(len(v) for g in got for v in g.values()) == 20:
                break
        assert set(got[0]) == {0, 1} and set(got[1]) == {2, 3}
        for share in got:
            for q, delivered in share.items():
                assert delivered == [(i, f"m-{q}-{i}".encode()) for i in range(5)]


def test_a_closed_member_s_queues_go_to_the_others_with_its_committed_offsets(rocketmq_cluster: LocalRocketMQ) -> None:
    ns = rocketmq_cluster.address
    topic, group = names("close")
    rocketmq_cluster.update_static_topic(topic, 2, rocketmq_cluster.broker_names)
    survivor = ExclusiveConsumer(ns, group, topic, lease_s=6, client_id="a-stays")
    try:
        leaving = ExclusiveConsumer(ns, group, topic, lease_s=6, client_id="b-leaves")
        settle([survivor, leaving], [{0}, {1}])
        send(ns, topic, 2, "m", 4)
        got: dict[int, list[tuple[int, bytes]]] = {}
        drain(leaving, got, 4, 20)
        assert [o for o, _ in got[1]] == [0, 1, 2, 3]
        leaving.close()  # commits offset 4 of queue 1, unlocks it, leaves the group
        with PullConsumer(ns, group=group) as puller:
            assert puller.committed(topic, 1) == 4
        send(ns, topic, 2, "n", 2)
        wait_until(
            lambda: survivor.renew() and held_ids(survivor) == {0, 1}, 30, interval_s=0.2, message="the takeover"
        )
        mine: dict[int, list[tuple[int, bytes]]] = {}
        drain(survivor, mine, 6 + 2, 30)
        assert mine[1] == [(4, b"n-1-0"), (5, b"n-1-1")]  # from the leaver's commit on, nothing again
        assert [o for o, _ in mine[0]] == list(range(6))
    finally:
        survivor.close()


def test_a_queue_whose_lease_lapsed_is_unlocked_when_it_is_allocated_to_another_member(
    rocketmq_cluster: LocalRocketMQ,
) -> None:
    """A lease that lapsed on the client does not end the broker's lock (60 s after its last
    renewal): the consumer still unlocks the queue when the re-balance gives it to another member,
    so the other member takes it at once instead of after the broker's 60 s."""
    ns = rocketmq_cluster.address
    topic, group = names("lapsed")
    rocketmq_cluster.update_static_topic(topic, 2, rocketmq_cluster.broker_names)
    with ExclusiveConsumer(ns, group, topic, lease_s=3, client_id="a-lapses") as first:
        settle([first], [{0, 1}])
        with ExclusiveConsumer(ns, group, topic, lease_s=3, client_id="b-joins") as second:
            assert second.renew() == []  # a member now (its heartbeat), queue 1 is still locked by `first`
            time.sleep(3.5)  # the lease running out is the behaviour under test
            assert held_ids(first) == set()
            settle([first, second], [{0}, {1}], timeout_s=BROKER_LOCK_S - 15)


def test_queues_option_locks_only_those_and_close_releases_them_at_once(rocketmq_cluster: LocalRocketMQ) -> None:
    ns = rocketmq_cluster.address
    topic, group = names("pinned")
    rocketmq_cluster.update_static_topic(topic, 3, ["broker-a"])
    pinned = ExclusiveConsumer(ns, group, topic, queues=[1], lease_s=6, client_id="pinned")
    wait_until(lambda: pinned.renew() and held_ids(pinned) == {1}, 20, message="the pinned lock")
    with ExclusiveConsumer(ns, group, topic, lease_s=6, client_id="member") as member:
        settle([member], [{0, 2}])  # queue 1 is allocated to the member but locked by the pinned one
        assert held_ids(pinned) == {1}
        assert _foreign_lock(rocketmq_cluster, "broker-a", group, topic, [1]) == set()
        pinned.close()
        settle([member], [{0, 1, 2}], timeout_s=10)  # released at close: no lock expiry to wait for


def test_a_lease_longer_than_rocketmq_s_client_lease_is_refused(rocketmq_cluster: LocalRocketMQ) -> None:
    topic, group = names("lease")
    rocketmq_cluster.update_static_topic(topic, 1, ["broker-a"])
    with pytest.raises(InvalidArgumentError, match=r"lease_s must be 0\.2\.\.30 seconds on Apache RocketMQ"):
        ExclusiveConsumer(rocketmq_cluster.address, group, topic, lease_s=45)


def test_a_remapped_queue_is_locked_at_its_old_and_new_leader(rocketmq_cluster: LocalRocketMQ) -> None:
    ns = rocketmq_cluster.address
    topic, group = names("remap")
    rocketmq_cluster.update_static_topic(topic, 1, ["broker-a"])
    send(ns, topic, 1, "old", 3)
    with ExclusiveConsumer(ns, group, topic, lease_s=6, client_id="remapped") as consumer:
        got: dict[int, list[tuple[int, bytes]]] = {}
        drain(consumer, got, 3, 20)
        consumer.commit()  # the remap takes longer than the lease: the queue is locked again after it
        rocketmq_cluster.remap_static_topic(topic, ["broker-b"])
        send(ns, topic, 1, "new", 2)
        drain(consumer, got, 5, 40)
        assert [b for _, b in got[0]] == [b"old-0-0", b"old-0-1", b"old-0-2", b"new-0-0", b"new-0-1"]
        consumer.renew()
        assert [q.broker for q in consumer.held] == ["broker-b"]
        # this consumer holds the queue at both leaders: another client of the group gets neither
        assert _foreign_lock(rocketmq_cluster, "broker-b", group, topic, [0]) == set()
        assert _foreign_lock(rocketmq_cluster, "broker-a", group, topic, [0]) == set()
    # released at both on close
    assert _foreign_lock(rocketmq_cluster, "broker-a", group, topic, [0]) == {0}
    assert _foreign_lock(rocketmq_cluster, "broker-b", group, topic, [0]) == {0}


def test_a_commit_right_after_a_remap_goes_to_the_queue_s_new_leader(rocketmq_cluster: LocalRocketMQ) -> None:
    ns = rocketmq_cluster.address
    topic, group = names("commitremap")
    rocketmq_cluster.update_static_topic(topic, 1, ["broker-a"])
    send(ns, topic, 1, "old", 3)
    with ExclusiveConsumer(ns, group, topic, lease_s=30, auto_commit=False, client_id="committer") as consumer:
        got: dict[int, list[tuple[int, bytes]]] = {}
        drain(consumer, got, 3, 20)
        rocketmq_cluster.remap_static_topic(topic, ["broker-b"])
        consumer.commit()  # its route still names broker-a, which refuses it now
        with PullConsumer(ns, group=group) as puller:
            assert puller.committed(topic, 0) == 3


def test_a_queue_refused_at_its_old_leader_is_let_go_at_the_new_one_where_it_was_granted(
    rocketmq_cluster: LocalRocketMQ,
) -> None:
    """A remapped queue locked by another client at one of its brokers only: this consumer does
    not hold it, and unlocks it where its own lock was granted, so that client is not kept out
    there for the broker's 60 s."""
    ns = rocketmq_cluster.address
    topic, group = names("partial")
    rocketmq_cluster.update_static_topic(topic, 1, ["broker-a"])
    send(ns, topic, 1, "old", 2)
    rocketmq_cluster.remap_static_topic(topic, ["broker-b"])
    assert _foreign_lock(rocketmq_cluster, "broker-a", group, topic, [0]) == {0}  # the old leader only
    with ExclusiveConsumer(ns, group, topic, queues=[0], lease_s=6, client_id="partial") as consumer:
        assert consumer.renew() == []
        assert consumer.poll(max_messages=4, wait_s=0.5) == []
        # granted at broker-b, refused at broker-a: let go at broker-b at once
        assert _foreign_lock(rocketmq_cluster, "broker-b", group, topic, [0]) == {0}


def test_a_killed_member_s_queues_are_taken_over_after_the_broker_s_lock_expiry(
    rocketmq_cluster: LocalRocketMQ,
) -> None:
    ns = rocketmq_cluster.address
    topic, group = names("kill")
    rocketmq_cluster.update_static_topic(topic, 2, rocketmq_cluster.broker_names)
    worker = exclusive_worker(ns, group, topic, 6, "b-worker")
    batches = lambda: [json.loads(line) for line in worker.texts]  # noqa: E731
    try:
        wait_until(lambda: worker.texts, 30, message="the exclusive worker to start")
        with ExclusiveConsumer(ns, group, topic, lease_s=6, client_id="a-survivor") as survivor:
            settle([survivor], [{0}], timeout_s=30)
            send(ns, topic, 2, "m", 3)
            wait_until(
                lambda: sum(len(x["offsets"]) for x in batches() if "offsets" in x) == 3,
                30,
                message=lambda: f"the worker's share; {worker.texts}",
            )
            assert {x["queue"] for x in batches() if "offsets" in x} == {1}
            with PullConsumer(ns, group=group) as puller:
                wait_until(lambda: puller.committed(topic, 1) == 3, 20, message="the worker's commit")
            worker.kill()
            killed_at = time.monotonic()
            send(ns, topic, 2, "n", 2)
            got: dict[int, list[tuple[int, bytes]]] = {}
            drain(survivor, got, 3 + 2, 15)
            assert 1 not in got  # the dead member's lock is still live at the broker
            wait_until(
                lambda: survivor.renew() and 1 in held_ids(survivor),
                BROKER_LOCK_S + 30,
                interval_s=0.5,
                message="the takeover after the lock expiry",
            )
            assert time.monotonic() - killed_at > BROKER_LOCK_S - 10
            drain(survivor, got, 3 + 2 + 2, 20)
            # the worker committed each batch it printed: the survivor goes on from there
            assert got[1] == [(3, b"n-1-0"), (4, b"n-1-1")]
    finally:
        worker.close()


def test_python_and_java_orderly_consumers_of_one_group_share_the_queues_and_hand_them_over(
    rocketmq_cluster: LocalRocketMQ, tmp_path: Path
) -> None:
    """RocketMQ's own orderly consumer (tests/support/java/OrderlyConsumer.java) and a Python
    ExclusiveConsumer in one group: the averaged allocation splits the logic queues, neither
    consumes a queue the other holds, each goes on from the other's committed offset when a queue
    changes hands (Java -> Python when the Python consumer joins, back when it closes)."""
    ns = rocketmq_cluster.address
    topic, group = names("java")
    rocketmq_cluster.update_static_topic(topic, 4, rocketmq_cluster.broker_names)
    java = java_orderly(rocketmq_cluster.namesrv, topic, group, tmp_path)
    proc, lines = java.proc, java.texts

    def java_got() -> dict[int, list[tuple[int, bytes]]]:
        out: dict[int, list[tuple[int, bytes]]] = {}
        for line in list(lines):
            if line.startswith("MSG "):
                _, q, offset, body = line.split(" ", 3)
                out.setdefault(int(q), []).append((int(offset), body.encode()))
        return out

    try:
        started = lambda: any(x.startswith("STARTED") for x in lines)  # noqa: E731
        wait_until(lambda: started() or proc.poll() is not None, 60, message="the Java consumer to start")
        assert started(), f"the Java consumer exited with {proc.returncode}"
        java_id = next(x for x in lines if x.startswith("STARTED")).split(" ", 1)[1]
        assert java_id < "zz-python"  # so the allocation gives Java queues 0 and 1
        # alone in the group, the Java consumer locks and consumes every queue (it pulls only what it locked)
        send(ns, topic, 4, "w", 1)
        wait_until(lambda: len(java_got()) == 4, 60, message=lambda: f"the Java consumer's first messages {lines}")
        with ExclusiveConsumer(ns, group, topic, lease_s=10, client_id="zz-python") as python:
            settle([python], [{2, 3}], timeout_s=60)  # Java re-balances, commits and unlocks 2 and 3
            send(ns, topic, 4, "m", 10)
            mine: dict[int, list[tuple[int, bytes]]] = {}
            drain(python, mine, 20, 60)
            wait_until(
                lambda: sum(len(v) for v in java_got().values()) == 24, 60, message=lambda: f"Java's share {lines}"
            )
            theirs = java_got()
            assert set(mine) == {2, 3} and set(theirs) == {0, 1, 2, 3}
            for q in (2, 3):  # from the Java consumer's commit on: neither the warm-up again nor a gap
                assert theirs[q] == [(0, f"w-{q}-0".encode())]
                assert mine[q] == [(i + 1, f"m-{q}-{i}".encode()) for i in range(10)]
            for q in (0, 1):
                assert theirs[q] == [(0, f"w-{q}-0".encode())] + [(i + 1, f"m-{q}-{i}".encode()) for i in range(10)]
        send(ns, topic, 4, "n", 1)  # the Python consumer left, having committed 11 on queues 2 and 3
        wait_until(lambda: sum(len(v) for v in java_got().values()) == 28, 90, message=lambda: f"the takeover {lines}")
        theirs = java_got()
        for q in range(4):
            assert theirs[q][-1] == (11, f"n-{q}-0".encode())
        assert len(theirs[2]) == len(theirs[3]) == 2
    finally:
        java.close()


def test_a_killed_java_orderly_consumer_s_queues_are_taken_by_a_python_member_after_its_locks_expire(
    rocketmq_cluster: LocalRocketMQ, tmp_path: Path
) -> None:
    ns = rocketmq_cluster.address
    topic, group = names("javakill")
    rocketmq_cluster.update_static_topic(topic, 2, rocketmq_cluster.broker_names)
    java = java_orderly(rocketmq_cluster.namesrv, topic, group, tmp_path)
    proc, lines = java.proc, java.texts
    try:
        send(ns, topic, 2, "w", 1)
        wait_until(
            lambda: len({x.split(" ")[1] for x in lines if x.startswith("MSG ")}) == 2 or proc.poll() is not None,
            90,
            message=lambda: f"the Java consumer's first messages {lines}",
        )
        with PullConsumer(ns, group=group) as puller:
            wait_until(lambda: puller.committed(topic, 0) == 1, 30, message="the Java consumer's commit")
        with ExclusiveConsumer(ns, group, topic, lease_s=10, client_id="zz-python") as python:
            settle([python], [{1}], timeout_s=60)
            proc.kill()  # kill -9: its locks stay on the brokers until they expire
            proc.wait()
            killed_at = time.monotonic()
            wait_until(
                lambda: python.renew() and held_ids(python) == {0, 1},
                BROKER_LOCK_S + 30,
                interval_s=0.5,
                message="the takeover of the Java consumer's queue",
            )
            assert time.monotonic() - killed_at > BROKER_LOCK_S - 20 - 5  # Java renews every 20 s
            send(ns, topic, 2, "n", 1)
            got: dict[int, list[tuple[int, bytes]]] = {}
            drain(python, got, 3, 30)
            assert got[0] == [(1, b"n-0-0")]  # from the Java consumer's commit on
            assert got[1] == [(1, b"n-1-0")]  # from the Java consumer's commit at the re-balance
    finally:
        java.close()


def test_a_lapsed_lease_hands_out_nothing_and_the_queue_restarts_at_the_committed_offset(
    rocketmq_cluster: LocalRocketMQ,
) -> None:
    ns = rocketmq_cluster.address
    topic, group = names("lapse")
    rocketmq_cluster.update_static_topic(topic, 1, ["broker-a"])
    send(ns, topic, 1, "m", 6)
    with ExclusiveConsumer(ns, group, topic, lease_s=1, client_id="lapsing") as consumer:
        first = consumer.poll(max_messages=3, wait_s=5)
        assert [o for r in first for o, _ in rows(r)] == [0, 1, 2]  # handed out, not committed yet
        time.sleep(1.1)  # not a wait: the 1 s lease runs out while nobody polls
        assert consumer.held == []
        again: dict[int, list[tuple[int, bytes]]] = {}
        drain(consumer, again, 6, 20)  # locked again (its own lock at the broker), from the commit
        assert [o for o, _ in again[0]] == [0, 1, 2, 3, 4, 5]
    with PullConsumer(ns, group=group) as puller:
        assert puller.committed(topic, 0) == 6
    out = rocketmq_cluster.mqadmin("consumerProgress", "-g", group)
    assert topic in out  # RocketMQ's own tool shows the group's progress on the topic


def test_python_and_java_orderly_consumers_keep_their_queues_in_order_across_a_remap(
    rocketmq_cluster: LocalRocketMQ, tmp_path: Path
) -> None:
    ns = rocketmq_cluster.address
    topic, group = names("javaremap")
    rocketmq_cluster.update_static_topic(topic, 2, ["broker-a"])
    java = java_orderly(rocketmq_cluster.namesrv, topic, group, tmp_path)
    lines = java.texts

    def java_bodies() -> dict[int, list[str]]:
        out: dict[int, list[str]] = {}
        for line in list(lines):
            if line.startswith("MSG "):
                _, q, _offset, body = line.split(" ", 3)
                out.setdefault(int(q), []).append(body)
        return out

    try:
        send(ns, topic, 2, "w", 1)
        wait_until(lambda: len(java_bodies()) == 2, 90, message=lambda: f"the Java consumer's first messages {lines}")
        with ExclusiveConsumer(ns, group, topic, lease_s=10, client_id="zz-python") as python:
            settle([python], [{1}], timeout_s=60)
            send(ns, topic, 2, "m", 5)
            mine: dict[int, list[tuple[int, bytes]]] = {}
            drain(python, mine, 5, 30)
            python.commit()  # the remap below takes longer than the lease
            rocketmq_cluster.remap_static_topic(topic, ["broker-b"])
            send(ns, topic, 2, "n", 5)
            drain(python, mine, 10, 60)
            wait_until(lambda: len(java_bodies().get(0, [])) == 11, 90, message=lambda: f"Java's share {lines}")
            assert set(mine) == {1}
            assert mine[1] == [(1 + i, f"m-1-{i}".encode()) for i in range(5)] + [
                (10000 + i, f"n-1-{i}".encode()) for i in range(5)
            ]
            theirs = java_bodies()
            assert theirs[0] == ["w-0-0"] + [f"m-0-{i}" for i in range(5)] + [f"n-0-{i}" for i in range(5)]
            assert theirs[1] == ["w-1-0"]  # before the Python consumer joined
            python.renew()
            assert held_ids(python) == {1}  # held at the new leader and at the old one
            assert _foreign_lock(rocketmq_cluster, "broker-a", group, topic, [1]) == set()
            assert _foreign_lock(rocketmq_cluster, "broker-b", group, topic, [1]) == set()
    finally:
        java.close()


def test_a_committed_offset_past_the_queue_s_end_is_consumed_again_from_its_start_not_skipped(
    rocketmq_cluster: LocalRocketMQ,
) -> None:
    """RocketMQ stores the commit offset a Java consumer's pull carries (a logic offset) on a
    remapped queue's new segment as if it were physical: it reads back one segment start past the
    queue's end (seen after a Java orderly consumer was killed in
    test_rocketmq_exclusive_scenario). Going on from the end would skip what it had not consumed."""
    ns = rocketmq_cluster.address
    topic, group = names("pastend")
    rocketmq_cluster.update_static_topic(topic, 1, ["broker-a"])
    send(ns, topic, 1, "old", 2)
    rocketmq_cluster.remap_static_topic(topic, ["broker-b"])
    send(ns, topic, 1, "new", 3)
    with PullConsumer(ns, group=group) as puller:
        puller.commit(topic, 0, 10001)  # the group on every broker
        # what a Java consumer's pull at logic offset 10001 leaves on broker-b: 10001 as a physical offset
        _store_physical_offset(rocketmq_cluster, "broker-b", group, topic, 0, 10001)
        assert puller.committed(topic, 0) == 20001 > puller.max_offset(topic, 0) == 10003
    with ExclusiveConsumer(ns, group, topic, lease_s=6, client_id="after-java") as consumer:
        got: dict[int, list[tuple[int, bytes]]] = {}
        drain(consumer, got, 5, 20)
    assert [b for _, b in got.get(0, [])] == [b"old-0-0", b"old-0-1", b"new-0-0", b"new-0-1", b"new-0-2"]


def _store_physical_offset(
    cluster: LocalRocketMQ, broker: str, group: str, topic: str, queue: int, offset: int
) -> None:
    """UPDATE_CONSUMER_OFFSET at `broker` with no static-topic conversion (`lo=false`)."""
    ext: dict[str, object] = {
        "consumerGroup": group,
        "topic": topic,
        "queueId": queue,
        "commitOffset": offset,
        "lo": "false",
    }
    resp = broker_call(cluster, broker, RequestCode.UPDATE_CONSUMER_OFFSET, ext)
    assert resp.code == 0, resp.remark
