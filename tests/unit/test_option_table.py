"""Source and sink options: declared once, parsed case-insensitively with aliases, errors that name
the option or alias the user gave (as documented: Spark lowercases keys) and what it accepts, and
docs/options.md tables that list exactly the declared options."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from staticmq_spark.backends.types import DEFAULT_REQUEST_BYTES
from staticmq_spark.errors import InvalidOptionError
from staticmq_spark.option_table import OptionTable
from staticmq_spark.sink.options import SINK_OPTIONS, parse_sink_options
from staticmq_spark.source.options import SOURCE_OPTIONS, parse_source_options

OPTIONS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "options.md"
BASE = {"namesrv": "127.0.0.1:9876", "topic": "orders"}


def _options_page_tables() -> list[set[str]]:
    """Option names in the first column of each `| option | meaning |` table of docs/options.md."""
    tables: list[set[str]] = []
    rows: set[str] | None = None
    for line in OPTIONS_PAGE.read_text().splitlines():
        if line.startswith("| option | meaning |"):
            rows = set()
            tables.append(rows)
        elif rows is not None and line.startswith("| ") and not line.startswith("| ---"):
            rows.update(re.findall(r"`([A-Za-z]+)`", line.split("|")[1]))
        elif not line.startswith("|"):
            rows = None
    return tables


def _declared(table: OptionTable) -> set[str]:
    return {name for o in table.options.values() for name in (o.name, *o.aliases)}


def test_options_page_tables_list_exactly_the_declared_options() -> None:
    source_table, sink_table = _options_page_tables()[:2]
    assert source_table == _declared(SOURCE_OPTIONS)
    assert sink_table == _declared(SINK_OPTIONS)


def test_option_keys_are_case_insensitive_and_defaults_apply() -> None:
    opts = parse_source_options({"NAMESRV": "h:1", "Topic": "t", "MAXMESSAGESPERTRIGGER": "5"}, streaming=True)
    assert (opts.namesrv, opts.topics, opts.max_messages_per_trigger) == ("h:1", ("t",), 5)
    assert opts.max_trigger_delay_ms == 15 * 60_000 and opts.fail_on_data_loss and opts.pull_batch_size == 10_000
    sink = parse_sink_options(BASE)
    assert (sink.order, sink.send_timeout_ms, sink.active_detection, sink.request_bytes) == (
        None,
        60_000,
        True,
        DEFAULT_REQUEST_BYTES,
    )


def test_an_alias_is_its_option_and_both_at_once_are_refused() -> None:
    assert parse_source_options({**BASE, "maxOffsetsPerTrigger": "7"}, streaming=True).max_messages_per_trigger == 7
    with pytest.raises(InvalidOptionError, match=r"same option .*maxMessagesPerTrigger"):
        parse_source_options({**BASE, "maxOffsetsPerTrigger": "7", "maxMessagesPerTrigger": "8"}, streaming=True)


def test_unknown_options_are_refused_listing_what_is_accepted() -> None:
    with pytest.raises(
        InvalidOptionError, match=r"unknown staticmq source option\(s\) \['maxMesages'\].*pullBatchSize"
    ):
        parse_source_options({**BASE, "maxMesages": "1"}, streaming=True)
    with pytest.raises(InvalidOptionError, match=r"unknown staticmq sink option\(s\) \['order'\].*orderStrategy"):
        parse_sink_options({**BASE, "order": "strict"})


def test_keys_spark_adds_are_ignored() -> None:
    parse_sink_options({**BASE, "checkpointLocation": "/tmp/ck", "path": "x", "queryName": "q"})


@pytest.mark.parametrize(
    ("missing", "message"),
    [("namesrv", "option 'namesrv' is required"), ("topic", "give exactly one of the options 'topic'")],
)
def test_required_options_name_themselves(missing: str, message: str) -> None:
    raw = {k: v for k, v in BASE.items() if k != missing}
    with pytest.raises(InvalidOptionError, match=message):
        parse_source_options(raw, streaming=True)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("maxMessagesPerTrigger", "0", "'maxMessagesPerTrigger' must be a positive integer, got 0"),
        ("pullbatchsize", "ten", "'pullBatchSize' must be a positive integer, got 'ten'"),  # as documented
        ("failOnDataLoss", "yes", "'failOnDataLoss' must be true or false, got 'yes'"),
        ("maxTriggerDelay", "soon", "'maxTriggerDelay' must be a duration like 30s, 5m or 1500ms"),
        ("namesrv", "kafka://h:1", "unknown scheme 'kafka'"),
        ("group", "bad group!", "option 'group'"),
    ],
)
def test_bad_source_values_name_the_option_and_what_it_takes(key: str, value: str, message: str) -> None:
    with pytest.raises(InvalidOptionError, match=re.escape(message)):
        parse_source_options({**BASE, key: value}, streaming=True)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("orderStrategy", "fifo", "'orderStrategy' must be strict or best-tried, got 'fifo'"),
        ("sendTimeoutMs", "-5", "'sendTimeoutMs' must be a positive integer, got -5"),
        ("activeDetection", "maybe", "'activeDetection' must be true or false"),
    ],
)
def test_bad_sink_values_name_the_option_and_what_it_takes(key: str, value: str, message: str) -> None:
    with pytest.raises(InvalidOptionError, match=re.escape(message)):
        parse_sink_options({**BASE, key: value})


def test_durations_take_units() -> None:
    opts = parse_source_options({**BASE, "maxTriggerDelay": "30s"}, streaming=True)
    assert opts.max_trigger_delay_ms == 30_000
    assert parse_source_options({**BASE, "maxTriggerDelay": "1500"}, streaming=True).max_trigger_delay_ms == 1500


def test_rocketmq_addresses_are_kept_with_their_scheme() -> None:
    opts = parse_source_options({**BASE, "namesrv": "rocketmq://a:1;b:2"}, streaming=True)
    assert opts.namesrv == "rocketmq://a:1;b:2"
    assert parse_sink_options({**BASE, "namesrv": "rocketmq://a:1"}).namesrv == "rocketmq://a:1"


@pytest.mark.parametrize("streaming", [True, False])
def test_an_error_about_an_alias_names_the_alias_as_written(streaming: bool) -> None:
    with pytest.raises(InvalidOptionError) as raised:
        parse_source_options({**BASE, "maxOffsetsPerTrigger": "ten"}, streaming=streaming)
    assert "option 'maxOffsetsPerTrigger' must be a positive integer, got 'ten'" in str(raised.value)
    assert "maxMessagesPerTrigger" not in str(raised.value)


@pytest.mark.parametrize("streaming", [True, False])
def test_an_error_about_a_key_in_another_case_names_it_as_documented(streaming: bool) -> None:
    with pytest.raises(InvalidOptionError, match=re.escape("option 'minOffsetsPerTrigger' must be a positive")):
        parse_source_options({**BASE, "MINOFFSETSPERTRIGGER": "-1"}, streaming=streaming)
    with pytest.raises(InvalidOptionError, match=re.escape("option 'failOnDataLoss' must be true or false")):
        parse_source_options({**BASE, "FailOnDataLoss": "yes"}, streaming=streaming)


def test_a_sink_error_names_the_key_as_documented() -> None:
    with pytest.raises(InvalidOptionError, match=re.escape("sink option 'orderStrategy' must be strict or best-tried")):
        parse_sink_options({**BASE, "ORDERSTRATEGY": "fifo"})
    with pytest.raises(InvalidOptionError, match=re.escape("sink option 'sendTimeoutMs' must be a positive integer")):
        parse_sink_options({**BASE, "sendtimeoutms": "0"})


def test_an_option_not_given_is_named_as_documented() -> None:
    raw = {k: v for k, v in BASE.items() if k != "namesrv"}
    with pytest.raises(InvalidOptionError, match=re.escape("sink option 'namesrv' is required")):
        parse_sink_options(raw)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            {"minOffsetsPerTrigger": "9", "MaxOffsetsPerTrigger": "3"},
            "option 'minOffsetsPerTrigger' (9) is larger than option 'maxOffsetsPerTrigger' (3)",
        ),
        ({"STARTINGTIMESTAMP": "soon"}, "option 'startingTimestamp' must be an integer, got 'soon'"),
        ({"startingoffsets": "{"}, "option 'startingOffsets' is neither a keyword nor valid JSON"),
        ({"Group": "bad group!"}, "option 'group': "),
        (
            {"startingOffsets": "earliest", "StartingTimestamp": "0"},
            "(got ['startingOffsets', 'startingTimestamp'])",
        ),
    ],
)
def test_errors_the_source_formats_itself_name_the_alias_given(raw: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidOptionError, match=re.escape(message)):
        parse_source_options({**BASE, **raw}, streaming=True)


def test_source_errors_about_subscription_and_offsets_name_the_option_given() -> None:
    ns = {"namesrv": BASE["namesrv"]}
    with pytest.raises(InvalidOptionError, match=re.escape("option 'topic': ")):
        parse_source_options({**ns, "TOPIC": "a,b/c"}, streaming=True)
    with pytest.raises(InvalidOptionError, match=re.escape("option 'topicPattern': 'o(' is not a regular expression")):
        parse_source_options({**ns, "topicpattern": "o("}, streaming=True)
    with pytest.raises(InvalidOptionError, match=re.escape("option 'endingOffsets' applies to batch queries only")):
        parse_source_options({**BASE, "ENDINGOFFSETS": "latest"}, streaming=True)
    with pytest.raises(InvalidOptionError, match=re.escape("option 'startingOffsets': a batch query cannot start")):
        parse_source_options({**BASE, "StartingOffsets": "latest"}, streaming=False)
    with pytest.raises(InvalidOptionError, match=re.escape("of option 'topic' ['a', 'b']")):
        parse_source_options({**ns, "Topic": "a,b", "startingOffsets": '{"a": {"0": 5}}'}, streaming=True)


@pytest.mark.parametrize("parse", [lambda raw: parse_source_options(raw, streaming=True), parse_sink_options])
def test_one_credential_key_without_the_other_names_both_keys(parse: Callable[[dict[str, str]], object]) -> None:
    with pytest.raises(InvalidOptionError, match=re.escape("options 'accessKey' and 'secretKey' go together")):
        parse({**BASE, "ACCESSKEY": "etl"})
    with pytest.raises(InvalidOptionError, match=re.escape("options 'accessKey' and 'secretKey' go together")):
        parse({**BASE, "secretkey": "etl-secret-456"})
