"""Pop (SPEC section 7) at the seam under the ConsumeServicer: `Consumption.pop` and
`Consumption.acks` of one broker opened in-process on a temp data dir (tests/support/broker_services.py),
with its revive thread running - no gRPC, no name server, no client.

A popped message is invisible for its invisible time; an ack removes it; an un-acked one comes
back through the group's retry topic with its reconsume count raised; change_invisible_time gives
a message a new invisible time and a new handle (the old one no longer acks); a handle the broker
did not issue unaltered is refused, and refusing it changes nothing."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from broker_stub.broker.app import BrokerApp
from broker_stub.broker.pop.pop_service import MAX_POP_MESSAGES, PopAnswer, PopQuery
from broker_stub.broker.pop.receipt_handles import HANDLE_SIZE
from staticmq_spark.errors import InvalidArgumentError, ReceiptHandleError, TopicNotFoundError
from staticmq_spark.protocol.consume.ack_outcomes import AckOutcome
from staticmq_spark.protocol.rows.decode import decode_batch
from tests.support.broker_services import BROKER, plain_topic, running_broker, send, static_topic
from tests.support.waiting import wait_until

TOPIC, GROUP = "orders", "g"
LONG_MS = 60_000  # an invisible time that never ends during a test
SHORT_MS = 300  # one that ends within it
FAST_REVIVE = {"pop_revive_interval_ms": 20, "pop_revive_margin_ms": 20}


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerApp]:
    with running_broker(tmp_path / BROKER, **FAST_REVIVE) as app:
        plain_topic(app, TOPIC, queues=2)
        yield app


def pop(app: BrokerApp, n: int = 10, invisible_ms: int = LONG_MS, **query: object) -> PopAnswer:
    fields: dict[str, object] = {"group": GROUP, "topic": TOPIC, **query}
    return app.consumption.pop.pop(PopQuery(**fields, max_messages=n, invisible_ms=invisible_ms))  # type: ignore[arg-type]


def bodies(answer: PopAnswer) -> list[bytes]:
    return [] if answer.rows is None else decode_batch(answer.rows).column("body").to_pylist()


def handles(answer: PopAnswer) -> dict[bytes, bytes]:
    """Each popped message's receipt handle, by body."""
    cut = [answer.handles[i : i + HANDLE_SIZE] for i in range(0, len(answer.handles), HANDLE_SIZE)]
    return dict(zip(bodies(answer), cut, strict=True))


def ack(app: BrokerApp, *hs: bytes, group: str = GROUP) -> list[AckOutcome]:
    return [AckOutcome(o) for o in app.consumption.acks.ack(group, TOPIC, b"".join(hs)).tolist()]


def popped_again(app: BrokerApp, timeout_s: float = 10, **query: object) -> PopAnswer:
    """The next pop that hands out anything (messages coming back after their invisible time)."""

    def some() -> PopAnswer | None:
        answer = pop(app, **query)  # type: ignore[arg-type]
        return answer if answer.count else None

    return wait_until(some, timeout_s, message="popped messages to come back")


def test_pop_hands_out_every_queued_message_with_its_queue_offset_and_a_handle(broker: BrokerApp) -> None:
    send(broker, TOPIC, [b"a", b"b"], queue=0)
    send(broker, TOPIC, [b"c"], queue=1)
    answer = pop(broker)
    got = sorted(zip(bodies(answer), answer.queue_ids.tolist(), answer.queue_offsets.tolist(), strict=True))
    assert got == [(b"a", 0, 0), (b"b", 0, 1), (b"c", 1, 0)]
    assert answer.reconsume_times.tolist() == [0, 0, 0] and answer.retried.tolist() == [0, 0, 0]
    assert len(answer.handles) == 3 * HANDLE_SIZE and len(set(handles(answer).values())) == 3
    assert answer.invisible_ms == LONG_MS


def test_pop_hands_out_at_most_max_messages_and_the_rest_to_the_next_pop(broker: BrokerApp) -> None:
    send(broker, TOPIC, [b"%d" % i for i in range(10)], queue=0)
    first, second = pop(broker, n=4), pop(broker, n=100)
    assert first.count == 4 and second.count == 6
    assert sorted(bodies(first) + bodies(second)) == sorted(b"%d" % i for i in range(10))


def test_popped_messages_are_invisible_to_every_consumer_of_the_group(broker: BrokerApp) -> None:
    send(broker, TOPIC, [b"a", b"b"])
    assert pop(broker).count == 2
    assert pop(broker).count == 0, "another pop of the group gets nothing while they are invisible"
    assert bodies(pop(broker, group="other")) == [b"a", b"b"], "another group pops them independently"


def test_a_message_not_acked_comes_back_after_its_invisible_time_with_its_reconsume_count_raised(
    broker: BrokerApp,
) -> None:
    send(broker, TOPIC, [b"a"], queue=1)
    first = pop(broker, invisible_ms=SHORT_MS)
    assert pop(broker).count == 0
    again = popped_again(broker)
    assert bodies(again) == [b"a"]
    assert (again.queue_ids.tolist(), again.queue_offsets.tolist()) == ([1], [0]), "its origin queue and offset"
    assert again.reconsume_times.tolist() == [1] and again.retried.tolist() == [1]
    assert again.pop_time >= first.pop_time + SHORT_MS


def test_acked_messages_never_come_back_only_the_others_do(broker: BrokerApp) -> None:
    send(broker, TOPIC, [b"a", b"b", b"c"])
    h = handles(pop(broker, invisible_ms=SHORT_MS))
    assert ack(broker, h[b"a"], h[b"c"]) == [AckOutcome.OK, AckOutcome.OK]
    again = popped_again(broker)  # the checkpoint revived: what was not acked came back, in one go
    assert bodies(again) == [b"b"]
    assert pop(broker).count == 0


def test_acking_a_handle_twice_answers_already_acked_per_handle(broker: BrokerApp) -> None:
    send(broker, TOPIC, [b"a", b"b"])
    h = handles(pop(broker))
    assert ack(broker, h[b"a"]) == [AckOutcome.OK]
    assert ack(broker, h[b"a"], h[b"b"]) == [AckOutcome.ALREADY_ACKED, AckOutcome.OK]
    assert ack(broker, h[b"b"], h[b"b"]) == [AckOutcome.ALREADY_ACKED, AckOutcome.ALREADY_ACKED]


def test_change_invisible_time_brings_a_message_back_when_its_new_invisible_time_ends(broker: BrokerApp) -> None:
    send(broker, TOPIC, [b"a", b"b"])
    h = handles(pop(broker))
    broker.consumption.acks.change_invisible_time(GROUP, TOPIC, h[b"a"], SHORT_MS)
    again = popped_again(broker)
    assert bodies(again) == [b"a"] and again.reconsume_times.tolist() == [1], "b keeps its long invisible time"


def test_after_change_invisible_time_only_the_new_handle_acks(broker: BrokerApp) -> None:
    send(broker, TOPIC, [b"a"])
    old = handles(pop(broker))[b"a"]
    new = broker.consumption.acks.change_invisible_time(GROUP, TOPIC, old, LONG_MS)
    assert new.handle != old and new.invisible_ms == LONG_MS
    assert ack(broker, old) == [AckOutcome.SUPERSEDED]
    with pytest.raises(ReceiptHandleError, match="superseded by change_invisible_time"):
        broker.consumption.acks.change_invisible_time(GROUP, TOPIC, old, LONG_MS)
    assert ack(broker, new.handle) == [AckOutcome.OK]


def _flip(offset: int) -> Callable[[bytes], bytes]:
    def alter(handle: bytes) -> bytes:
        out = bytearray(handle)
        out[offset] ^= 1
        return bytes(out)

    return alter


# (how a handle is forged) -> the altered handle; every one is refused as FORGED
FORGERIES = [
    ("its version byte changed", _flip(0)),
    ("a reserved byte set", _flip(2)),
    ("its index pointing at another message of the checkpoint", _flip(4)),
    ("its checkpoint id changed", _flip(8)),
    ("its deadline pushed later", _flip(17)),
    ("its tag changed", _flip(30)),
]


@pytest.mark.parametrize(("forgery", "alter"), FORGERIES, ids=[f[0] for f in FORGERIES])
def test_a_forged_receipt_handle_is_refused_and_changes_nothing(
    broker: BrokerApp, forgery: str, alter: Callable[[bytes], bytes]
) -> None:
    send(broker, TOPIC, [b"a", b"b"])
    h = handles(pop(broker))
    forged = alter(h[b"a"])
    assert ack(broker, forged) == [AckOutcome.FORGED], forgery
    with pytest.raises(ReceiptHandleError, match="not issued by this broker or was altered"):
        broker.consumption.acks.change_invisible_time(GROUP, TOPIC, forged, SHORT_MS)
    assert pop(broker, invisible_ms=SHORT_MS).count == 0, "the refused change gave nothing back early"
    assert ack(broker, h[b"a"], h[b"b"]) == [AckOutcome.OK, AckOutcome.OK], "the genuine handles still ack"


def test_a_handle_is_refused_for_another_group(broker: BrokerApp) -> None:
    send(broker, TOPIC, [b"a"])
    h = handles(pop(broker))[b"a"]
    assert ack(broker, h, group="other") == [AckOutcome.WRONG_GROUP]
    assert ack(broker, h) == [AckOutcome.OK]


def test_handles_that_are_not_whole_handles_are_refused(broker: BrokerApp) -> None:
    send(broker, TOPIC, [b"a"])
    h = handles(pop(broker))[b"a"]
    with pytest.raises(ReceiptHandleError, match=f"{HANDLE_SIZE} bytes each"):
        ack(broker, h[:-1])


def test_a_handle_whose_invisible_time_ended_no_longer_acks(tmp_path: Path) -> None:
    with running_broker(tmp_path / BROKER, pop_revive_margin_ms=60_000) as app:  # no revive meanwhile
        plain_topic(app, TOPIC)
        send(app, TOPIC, [b"a"])
        answer = pop(app, invisible_ms=SHORT_MS)
        # not a wait: the invisible time runs out (handles carry the broker's clock, this host's)
        time.sleep(max(0.0, (answer.pop_time + SHORT_MS) / 1000 - time.time()) + 0.02)
        assert ack(app, handles(answer)[b"a"]) == [AckOutcome.EXPIRED]


def test_a_waiting_pop_returns_as_soon_as_a_message_arrives(broker: BrokerApp) -> None:
    arrival = threading.Timer(0.3, send, args=(broker, TOPIC, [b"late"]))
    started = time.monotonic()
    arrival.start()
    try:
        answer = pop(broker, wait_ms=10_000)
    finally:
        arrival.join()
    assert bodies(answer) == [b"late"]
    assert time.monotonic() - started < 5, "woken by the arrival, not by the end of the wait"


def test_concurrent_pops_never_hand_out_a_message_twice(broker: BrokerApp) -> None:
    sent = [b"%03d" % i for i in range(200)]
    send(broker, TOPIC, sent[:100], queue=0)
    send(broker, TOPIC, sent[100:], queue=1)
    got: list[bytes] = []
    lock = threading.Lock()

    def consume() -> None:
        while len(got) <= len(sent):  # more than sent: something came twice, stop
            answer = pop(broker, n=7)
            if not answer.count:
                return
            with lock:
                got.extend(bodies(answer))

    workers = [threading.Thread(target=consume) for _ in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
    assert Counter(got) == Counter(sent)


def test_pop_on_a_static_topic_hands_out_its_logic_queues(tmp_path: Path) -> None:
    with running_broker(tmp_path / BROKER, **FAST_REVIVE) as app:
        static_topic(app, "static-orders", queues=3)
        send(app, "static-orders", [b"x"], queue=2)
        answer = pop(app, topic="static-orders", invisible_ms=SHORT_MS)
        assert (bodies(answer), answer.queue_ids.tolist(), answer.queue_offsets.tolist()) == ([b"x"], [2], [0])
        again = popped_again(app, topic="static-orders")
        assert (bodies(again), again.queue_ids.tolist(), again.reconsume_times.tolist()) == ([b"x"], [2], [1])


def test_order_pop_hands_out_nothing_more_from_a_queue_until_its_messages_are_acked(broker: BrokerApp) -> None:
    send(broker, TOPIC, [b"m0", b"m1", b"m2"], queue=0)
    first = pop(broker, n=2, order=True)
    assert bodies(first) == [b"m0", b"m1"]
    assert pop(broker, order=True).count == 0, "the queue is blocked while m0 and m1 are out"
    h = handles(first)
    ack(broker, h[b"m1"])
    assert pop(broker, order=True).count == 0, "m0 is still out"
    ack(broker, h[b"m0"])
    assert bodies(pop(broker, order=True)) == [b"m2"]


def test_handles_and_acks_survive_a_restart_of_the_broker(tmp_path: Path) -> None:
    with running_broker(tmp_path / BROKER, **FAST_REVIVE) as app:
        plain_topic(app, TOPIC)
        send(app, TOPIC, [b"a", b"b", b"c"])
        h = handles(pop(app))
        assert ack(app, h[b"a"]) == [AckOutcome.OK]
    with running_broker(tmp_path / BROKER, **FAST_REVIVE) as app:
        assert pop(app).count == 0, "in flight before the restart: still invisible"
        assert ack(app, h[b"a"], h[b"b"]) == [AckOutcome.ALREADY_ACKED, AckOutcome.OK]
        app.consumption.acks.change_invisible_time(GROUP, TOPIC, h[b"c"], SHORT_MS)
        again = popped_again(app)
        assert (bodies(again), again.reconsume_times.tolist()) == ([b"c"], [1])


# (rule, fields of the query) -> the refusal; every one is INVALID_ARGUMENT
BAD_QUERIES = [
    ("no messages asked", {"max_messages": 0}, "max_messages must be 1"),
    ("more than a pop hands out", {"max_messages": MAX_POP_MESSAGES + 1}, "max_messages must be 1"),
    ("an invisible time under the minimum", {"invisible_ms": 99}, "invisible time must be"),
    ("an invisible time over the maximum", {"invisible_ms": 12 * 3600 * 1000 + 1}, "invisible time must be"),
    ("a negative wait", {"wait_ms": -1}, "wait_ms must be >= 0"),
    ("an unknown init mode", {"init_mode": "middle"}, "init_mode must be one of"),
    ("an invalid group name", {"group": "a/b"}, "consumer group"),
    ("a group too long for its retry topic name", {"group": "g" * 200}, "use a shorter group name"),
]


@pytest.mark.parametrize(("rule", "fields", "match"), BAD_QUERIES, ids=[r[0] for r in BAD_QUERIES])
def test_a_bad_pop_is_refused_as_an_invalid_argument(
    broker: BrokerApp, rule: str, fields: dict[str, object], match: str
) -> None:
    send(broker, TOPIC, [b"a"])
    query = replace(PopQuery(GROUP, TOPIC, 10, LONG_MS), **fields)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match=match) as refused:
        broker.consumption.pop.pop(query)
    assert refused.value.grpc_status == "INVALID_ARGUMENT", rule
    assert pop(broker).count == 1, "a refused pop hides nothing"


def test_pop_of_a_topic_the_broker_does_not_have_is_not_found(broker: BrokerApp) -> None:
    with pytest.raises(TopicNotFoundError, match="'nowhere' does not exist") as refused:
        pop(broker, topic="nowhere")
    assert refused.value.grpc_status == "NOT_FOUND"


def test_a_new_group_starting_at_the_latest_offset_pops_only_what_arrives_later(broker: BrokerApp) -> None:
    send(broker, TOPIC, [b"old"])
    assert pop(broker, init_mode="latest").count == 0
    send(broker, TOPIC, [b"new"])
    assert bodies(pop(broker, init_mode="latest")) == [b"new"]
