"""RocketMQ pop's receipt handles and answers, as its Java client builds and reads them
(ExtraInfoUtil, MQClientAPIImpl.processPopResponse, BatchAck)."""

from __future__ import annotations

import base64
import json

import pytest

from staticmq_spark.backends.rocketmq.pop_messages import popped_messages, record_fields
from staticmq_spark.backends.rocketmq.pop_receipts import (
    Receipt,
    batch_ack_body,
    java_bitset,
    parse_offset_info,
    parse_receipt,
    real_topic,
    retry_mark,
)
from staticmq_spark.errors import ReceiptHandleError
from staticmq_spark.mapping.positions import LogicPosition
from tests.unit.backends.rocketmq.wire.test_stored_messages import stored_record


def test_a_receipt_handle_is_the_eight_fields_of_the_java_clients_pop_ck() -> None:
    r = Receipt(10, 1700000000000, 30000, 2, "0", "broker-a", 3, 12)
    assert r.text() == "10 1700000000000 30000 2 0 broker-a 3 12"
    assert parse_receipt(r.handle()) == r and parse_receipt(r.text()) == r
    assert r.invisible_until == 1700000030000


@pytest.mark.parametrize("bad", [b"", b"1 2 3", b"a b c d 0 broker 1 2", b"1 2 3 4 0 b 1 2 9"])
def test_a_forged_receipt_handle_is_refused_naming_the_format(bad: bytes) -> None:
    with pytest.raises(ReceiptHandleError, match="receipt handle"):
        parse_receipt(bad)


def test_retry_marks_and_the_real_topic_an_ack_names() -> None:
    assert [retry_mark(t) for t in ("orders", "%RETRY%g_orders", "%RETRY%g+orders")] == ["0", "1", "2"]
    assert real_topic("orders", "g", "0") == "orders"
    assert real_topic("orders", "g", "1") == "%RETRY%g_orders"
    assert real_topic("orders", "g", "2") == "%RETRY%g+orders"
    with pytest.raises(ReceiptHandleError, match="retry mark"):
        real_topic("orders", "g", "7")


def test_offset_info_headers_parse_per_retry_mark_and_queue() -> None:
    assert parse_offset_info("0 0 5;0 1 7;1 0 2") == {("0", 0): "5", ("0", 1): "7", ("1", 0): "2"}
    assert parse_offset_info("0 3 5,6,7") == {("0", 3): "5,6,7"}
    assert parse_offset_info(None) == {} and parse_offset_info("") == {}
    assert parse_offset_info("0 qo3%7 2;0 3 1") == {("0", 3): "1"}  # per-offset order counts skipped


def test_java_bitset_bytes_are_little_endian_without_trailing_zeros() -> None:
    assert java_bitset(set()) == b""
    assert java_bitset({0}) == b"\x01"
    assert java_bitset({1, 3, 8}) == b"\x0a\x01"
    with pytest.raises(ReceiptHandleError):
        java_bitset({-1})


def test_batch_ack_merges_one_checkpoint_into_one_bitset() -> None:
    receipts = [Receipt(10, 5, 30000, 1, "0", "broker-a", 0, o) for o in (10, 11, 13)]
    receipts.append(Receipt(4, 6, 30000, 2, "1", "broker-a", 0, 4))
    body = json.loads(batch_ack_body("g", "orders", receipts))
    assert body["brokerName"] == "broker-a"
    acks = sorted(body["acks"], key=lambda a: a["r"])
    assert acks[0] == {
        "c": "g",
        "t": "orders",
        "r": "0",
        "so": 10,
        "q": 0,
        "rq": 1,
        "pt": 5,
        "it": 30000,
        "b": base64.b64encode(b"\x0b").decode(),
    }
    assert (acks[1]["r"], acks[1]["so"], base64.b64decode(acks[1]["b"])) == ("1", 4, b"\x01")


def _answer(*records: bytes) -> bytes:
    return b"".join(records)


def test_a_first_delivery_gets_the_handle_the_java_client_builds_and_its_logic_position() -> None:
    body = _answer(
        stored_record(b"x", "KEYS\x01k1\x02u\x01v\x02", queue_offset=7),
        stored_record(b"y", "", queue_offset=8),
    )
    header = {
        "popTime": "1000",
        "invisibleTime": "30000",
        "reviveQid": "2",
        "startOffsetInfo": "0 3 7",
        "msgOffsetInfo": "0 3 7,8",
    }

    def locate(broker: str, queue: int, offset: int) -> LogicPosition | None:
        assert (broker, queue) == ("broker-a", 3)
        return LogicPosition(1, 10000 + offset)

    got = popped_messages("orders", "broker-a", header, body, locate, order=False)
    assert [(m.body, m.key, dict(m.properties)) for m in got] == [(b"x", "k1", {"u": "v"}), (b"y", None, {})]
    assert [(m.queue_id, m.queue_offset, m.retried, m.broker) for m in got] == [
        (1, 10007, False, "broker-a"),
        (1, 10008, False, "broker-a"),
    ]
    assert [m.handle for m in got] == [b"7 1000 30000 2 0 broker-a 3 7", b"7 1000 30000 2 0 broker-a 3 8"]
    assert got[0].invisible_until == 31000


def test_a_message_from_the_retry_topic_keeps_the_brokers_handle_and_has_no_logic_position() -> None:
    ck = "4 2000 30000 5 1 broker-b 0 4"
    body = stored_record(b"again", f"POP_CK\x01{ck}\x02n\x011\x02", queue_offset=4)
    header = {"popTime": "2000", "invisibleTime": "30000", "reviveQid": "5", "startOffsetInfo": "1 0 4"}

    def locate(broker: str, queue: int, offset: int) -> LogicPosition | None:
        raise AssertionError("a retried message is not located")

    (m,) = popped_messages("orders", "broker-b", header, body, locate, order=False)
    assert (m.retried, m.queue_id, m.queue_offset, m.handle) == (True, -1, -1, ck.encode())
    assert dict(m.properties) == {"n": "1"}


def test_record_fields_read_queue_reconsume_count_topic_and_pop_ck() -> None:
    body = stored_record(b"b", "POP_CK\x01x y\x02", topic="%RETRY%g_orders") + stored_record(b"c", "", v6=True)
    assert record_fields(body, [0, len(body) - len(stored_record(b"c", "", v6=True))]) == [
        (3, 0, "%RETRY%g_orders", "x y"),
        (3, 0, "orders", None),
    ]
