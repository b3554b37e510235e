"""The source's subscription options: `topic` as a comma list, `topicPattern`, and JSON offsets
that name several topics (Spark's Kafka source options `subscribe` / `subscribePattern`)."""

from __future__ import annotations

import pytest

from staticmq_spark.errors import InvalidOptionError
from staticmq_spark.source import offsets as offset_json
from staticmq_spark.source.options import parse_source_options

NS = {"namesrv": "h:1"}


def test_topic_takes_a_comma_list_of_topics() -> None:
    opts = parse_source_options({**NS, "topic": "orders, clicks"}, streaming=True)
    assert opts.topics == ("orders", "clicks") and opts.pattern == ""
    assert opts.subscribes("clicks") and not opts.subscribes("other")


def test_topic_pattern_matches_whole_names() -> None:
    opts = parse_source_options({**NS, "topicPattern": "orders-.*"}, streaming=True)
    assert opts.topics == () and opts.subscribes("orders-eu") and not opts.subscribes("old-orders-eu")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "exactly one of the options 'topic'"),
        ({"topic": "a", "topicPattern": "a.*"}, "exactly one of the options 'topic'"),
        ({"topicPattern": "orders-("}, "is not a regular expression"),
        ({"topic": "a,a"}, "names a topic twice"),
        ({"topic": "a,b/c"}, "option 'topic'"),
    ],
)
def test_bad_subscriptions_are_refused_naming_the_option(options: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidOptionError, match=message):
        parse_source_options({**NS, **options}, streaming=True)


def test_json_offsets_name_every_listed_topic() -> None:
    both = '{"a": {"0": 5}, "b": {"0": -2, "1": 7}}'
    opts = parse_source_options({**NS, "topic": "a,b", "startingOffsets": both}, streaming=True)
    assert opts.starting.offsets_for("a") == {0: 5} and opts.starting.offsets_for("b") == {0: -2, 1: 7}
    with pytest.raises(InvalidOptionError, match=r"must name exactly the topics of option 'topic' \['a', 'b'\]"):
        parse_source_options({**NS, "topic": "a,b", "startingOffsets": '{"a": {"0": 5}}'}, streaming=True)


def test_json_offsets_with_a_pattern_name_only_matching_topics() -> None:
    opts = parse_source_options(
        {**NS, "topicPattern": "o.*", "startingOffsets": '{"orders": {"0": 1}}'}, streaming=True
    )
    assert opts.starting.offsets_for("orders") == {0: 1} and opts.starting.offsets_for("other") is None
    with pytest.raises(InvalidOptionError, match=r"names topics \['clicks'\] that topicPattern"):
        parse_source_options({**NS, "topicPattern": "o.*", "startingOffsets": '{"clicks": {"0": 1}}'}, streaming=True)


def test_offsets_json_round_trips_several_topics_and_reads_a_single_topic_checkpoint() -> None:
    obj = offset_json.to_json({"b": {1: 4, 0: 3}, "a": {0: 9}}, initial={"a": {0: 1}, "b": {0: 0, 1: 0}})
    assert offset_json.topics_of(obj) == ["a", "b"]
    assert offset_json.from_json(obj, "b", 2) == {0: 3, 1: 4}
    assert offset_json.initial_of(obj, ["a", "b"]) == {"a": {0: 1}, "b": {0: 0, 1: 0}}
    legacy = {"orders": {"0": 5}, offset_json.INITIAL_KEY: {"0": 2}}  # written before topic lists
    assert offset_json.initial_of(legacy, ["orders"]) == {"orders": {0: 2}}


def test_the_reported_latest_offset_carries_lag_per_queue_and_in_total() -> None:
    report = offset_json.with_lag({"a": {0: 10, 1: 4}}, {"a": {0: 3, 1: 0}})
    assert report["a"] == {"0": 10, "1": 4}
    assert report[offset_json.LAG_KEY] == {"a": {"0": 3, "1": 0}} and report[offset_json.LAG_TOTAL_KEY] == 3
