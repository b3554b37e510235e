"""Per-message outcomes of a batch send: each input row gets its request's base offset plus its
position in the request, or its request's error; PartialSendError names both sides."""

from __future__ import annotations

import argparse
import json
import threading
import time

import pytest

from staticmq_spark.backends.address import parse_address
from staticmq_spark.backends.rocketmq.producer import RocketMQProducer
from staticmq_spark.backends.rocketmq.wire.remoting import SendAnswer
from staticmq_spark.backends.rocketmq.wire.routes import TopicRoute
from staticmq_spark.backends.staticmq.client_instance import StaticMQClientInstance
from staticmq_spark.backends.staticmq.producer import StaticMQProducer
from staticmq_spark.backends.types import SendOutcome, SendResult, per_message_outcomes
from staticmq_spark.cli.send_cmd import _send_chunk
from staticmq_spark.errors import (
    BrokerUnavailableError,
    InvalidBatchError,
    PartialSendError,
    QueueUnavailableError,
    error_for_code,
)
from staticmq_spark.protocol.rows.codec import PackedBatch
from staticmq_spark.protocol.topics.route_view import QueueAddress, TopicRouteView


def _result(queue: int, base: int, rows: tuple[int, ...] | None, count: int | None = None) -> SendResult:
    n = len(rows) if rows is not None else (count or 0)
    return SendResult("t", queue, base, n, f"b{queue}", -1, 0, rows=rows)


def test_stored_rows_get_base_offset_plus_position_and_failed_rows_their_error() -> None:
    down = BrokerUnavailableError("broker-1 down")
    stored = [_result(0, 100, (0, 3, 5)), _result(2, 7, (1, 4))]
    outcomes = per_message_outcomes(7, stored, {2: down, 6: down})
    assert outcomes == [
        SendOutcome(0, 0, 100, "b0"),
        SendOutcome(1, 2, 7, "b2"),
        SendOutcome(2, -1, -1, "", down),
        SendOutcome(3, 0, 101, "b0"),
        SendOutcome(4, 2, 8, "b2"),
        SendOutcome(5, 0, 102, "b0"),
        SendOutcome(6, -1, -1, "", down),
    ]
    assert [o.stored for o in outcomes] == [True, True, False, True, True, True, False]


def test_a_single_result_without_rows_covers_every_row_in_order() -> None:
    outcomes = per_message_outcomes(3, [_result(1, 40, None, count=3)], {})
    assert [(o.index, o.queue_id, o.queue_offset) for o in outcomes] == [(0, 1, 40), (1, 1, 41), (2, 1, 42)]


def test_an_undecided_base_offset_stays_undecided_for_every_row() -> None:
    outcomes = per_message_outcomes(2, [_result(0, -1, (0, 1))], {})
    assert [o.queue_offset for o in outcomes] == [-1, -1] and all(o.stored for o in outcomes)


@pytest.mark.parametrize(
    ("n", "stored", "failed", "match"),
    [
        (2, [_result(0, 0, (0, 1))], {1: QueueUnavailableError("x")}, "both stored and failed"),
        (1, [_result(0, 0, (0,)), _result(1, 0, (0,))], {}, "more than one request"),
        (2, [_result(0, 0, (0,))], {}, "named by no request"),
    ],
)
def test_rows_named_twice_or_never_are_refused(
    n: int, stored: list[SendResult], failed: dict[int, QueueUnavailableError], match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        per_message_outcomes(n, stored, failed)


def test_partial_send_error_carries_stored_and_failed_and_is_not_retriable() -> None:
    down = BrokerUnavailableError("broker-1 down")
    stored = [_result(0, 5, (0, 2))]
    exc = PartialSendError.of("orders", stored, {1: down, 3: down})
    assert exc.stored == stored and exc.failed == {1: down, 3: down}
    assert not exc.retriable and exc.code == "PARTIAL_SEND"
    assert "2 rows stored in 1 requests, 2 rows failed" in exc.message and "broker-1 down" in exc.message
    assert isinstance(error_for_code("PARTIAL_SEND")("over the wire"), PartialSendError)


# ---------------------------------------------------------------------------- both backends, faked sends


class _FakeRemoting:
    """A RocketMQ client instance (and its remoting) that fails every send to `dead` logic queues."""

    def __init__(self, dead: set[int]) -> None:
        self.dead = dead
        self.sent: list[int] = []
        self.next_offset = [0] * 4
        self.remoting = self

    def with_timeout(self, timeout_s: float) -> _FakeRemoting:
        return self

    def route(self, topic: str, refresh: bool = False) -> TopicRoute:
        return TopicRoute(topic, {"b0": "a0", "b1": "a1"}, 4, {q: f"b{q % 2}" for q in range(4)})

    def send(self, addr: str, bname: str, topic: str, queue: int, body: bytes, props: str, **_: object) -> SendAnswer:
        self.sent.append(queue)
        if queue in self.dead:
            raise InvalidBatchError(f"queue {queue} refuses")  # not retriable: no waiting in a unit test
        offset = self.next_offset[queue]
        self.next_offset[queue] += 1
        return SendAnswer(queue, offset, "id", "")


def test_rocketmq_send_batch_goes_on_after_a_failed_queue_and_names_each_row() -> None:
    fake = _FakeRemoting(dead={1})
    producer = RocketMQProducer(fake)  # type: ignore[arg-type]
    with pytest.raises(PartialSendError) as raised:
        producer.send_batch("t", [f"m{i}" for i in range(8)], queues=[0, 1, 2, 3, 0, 1, 2, 3])
    assert sorted(fake.sent) == [0, 1, 2, 3]  # every queue tried once
    exc = raised.value
    assert sorted(exc.failed) == [1, 5] and all(isinstance(e, InvalidBatchError) for e in exc.failed.values())
    assert sorted((r.queue_id, r.rows) for r in exc.stored) == [(0, (0, 4)), (2, (2, 6)), (3, (3, 7))]


class _MeetingRemoting(_FakeRemoting):
    """Each send waits until every queue's send is in flight: serial sends would never meet."""

    def __init__(self) -> None:
        super().__init__(dead=set())
        self.meeting = threading.Barrier(4, timeout=10)

    def send(self, addr: str, bname: str, topic: str, queue: int, body: bytes, props: str, **_: object) -> SendAnswer:
        self.meeting.wait()
        return super().send(addr, bname, topic, queue, body, props)


def test_rocketmq_send_batch_sends_its_queues_at_once() -> None:
    fake = _MeetingRemoting()
    producer = RocketMQProducer(fake)  # type: ignore[arg-type]
    try:
        results = producer.send_batch("t", [f"m{i}" for i in range(8)], queues=[0, 1, 2, 3, 0, 1, 2, 3])
    finally:
        producer.close()
    assert sorted((r.queue_id, r.rows) for r in results) == [(0, (0, 4)), (1, (1, 5)), (2, (2, 6)), (3, (3, 7))]


def test_rocketmq_send_batch_of_one_request_raises_its_own_error() -> None:
    producer = RocketMQProducer(_FakeRemoting(dead={1}))  # type: ignore[arg-type]
    with pytest.raises(InvalidBatchError):
        producer.send_batch("t", ["a", "b"], queue=1)


def _static_producer(fail: set[int], slow_s: float) -> tuple[StaticMQProducer, list[int]]:
    producer = StaticMQProducer(StaticMQClientInstance(parse_address("127.0.0.1:1")), active_detection=False)
    queues = tuple(QueueAddress("t", q, f"broker-{q % 2}", "127.0.0.1:1") for q in range(4))
    route = TopicRouteView("t", True, 4, "best-tried", queues, queues)
    producer.routes.get = lambda topic, refresh=False: route  # type: ignore[method-assign]
    done: list[int] = []

    def send_one(topic: str, target: int, batch: PackedBatch, idem_key: str) -> SendResult:
        if target in fail:
            raise BrokerUnavailableError(f"queue {target} down")
        time.sleep(slow_s)  # finishes after the failure: it must still be awaited and reported
        done.append(target)
        return SendResult(topic, target, 10 * target, batch.count, f"broker-{target % 2}", 0, 0)

    producer._send_one = send_one  # type: ignore[method-assign]
    return producer, done


def test_staticmq_send_packed_waits_for_every_request_and_fills_rows() -> None:
    producer, done = _static_producer(fail={1, 3}, slow_s=0.3)
    with producer, pytest.raises(PartialSendError) as raised:
        producer.send_batch("t", [f"m{i}" for i in range(8)], queues=[0, 1, 2, 3, 0, 1, 2, 3])
    assert sorted(done) == [0, 2]
    exc = raised.value
    assert sorted((r.queue_id, r.queue_offset, r.rows) for r in exc.stored) == [(0, 0, (0, 4)), (2, 20, (2, 6))]
    assert sorted(exc.failed) == [1, 3, 5, 7]
    assert exc.failed[1] is exc.failed[5] and exc.failed[1] is not exc.failed[3]
    outcomes = per_message_outcomes(8, exc.stored, exc.failed)
    assert [o.queue_offset for o in outcomes] == [0, -1, 20, -1, 1, -1, 21, -1]


def test_staticmq_send_of_one_request_raises_its_own_error() -> None:
    producer, _ = _static_producer(fail={1}, slow_s=0)
    with producer, pytest.raises(BrokerUnavailableError, match="queue 1 down"):
        producer.send_batch("t", ["a", "b"], queue=1)


def test_cli_send_prints_stored_and_failed_messages_of_a_partial_send(capsys: pytest.CaptureFixture[str]) -> None:
    down = BrokerUnavailableError("broker-1 down")

    class PartlyDown:
        def send_batch(self, topic: str, bodies: list[str], **_: object) -> list[SendResult]:
            raise PartialSendError.of(topic, [_result(0, 7, (0, 2))], {1: down})

    args = argparse.Namespace(topic="t", key=None, tags=None, queue=None)
    chunk = [{"body": "a", "key": "k0"}, {"body": "b", "key": "k1"}, {"body": "c", "key": "k2"}]
    assert _send_chunk(PartlyDown(), args, chunk) == 1  # type: ignore[arg-type]
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(x["key"], x.get("queueOffset"), x.get("error")) for x in lines] == [
        ("k0", 7, None),
        ("k1", None, "broker-1 down"),
        ("k2", 8, None),
    ]
