"""RocketMQ's TopicStatsTable as fastjson writes it: MessageQueue objects as map keys."""

from __future__ import annotations

import pytest

from staticmq_spark.backends.rocketmq.admin_calls import topic_stats_table
from staticmq_spark.backends.rocketmq.wire.frames import FrameError


def test_a_topic_stats_table_with_message_queue_keys_is_read_per_queue() -> None:
    body = (
        b'{"offsetTable":{{"brokerName":"broker-a","queueId":1,"topic":"t"}:'
        b'{"lastUpdateTimestamp":1764288000123,"maxOffset":7,"minOffset":2},'
        b'{"brokerName":"broker-a","queueId":0,"topic":"t"}:{"lastUpdateTimestamp":0,"maxOffset":0,"minOffset":0}}}'
    )
    assert topic_stats_table(body) == {0: (0, 0, 0), 1: (2, 7, 1764288000123)}


def test_an_empty_table_is_no_queue() -> None:
    assert topic_stats_table(b'{"offsetTable":{}}') == {}


def test_a_table_in_another_shape_is_refused_naming_it() -> None:
    with pytest.raises(FrameError, match="topic stats table"):
        topic_stats_table(b'{"offsetTable":[{"queueId":1,"nested":{"x":{}}}]}')
