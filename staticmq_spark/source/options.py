"""Options of the staticmq source, parsed once (keys are case-insensitive) into frozen values.
An unknown key, a malformed value or a contradiction fails at once, naming the option as the user
wrote it (`ParsedOptions.key`)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from staticmq_spark.errors import InvalidArgumentError, InvalidOptionError
from staticmq_spark.option_table import (
    SECURITY_OPTIONS,
    Option,
    OptionTable,
    ParsedOptions,
    client_security,
    cluster_address,
)
from staticmq_spark.protocol.consume.tag_expression import parse_tag_expression
from staticmq_spark.protocol.security.auth import PLAIN, ClientSecurity
from staticmq_spark.protocol.topics.names import validate_group, validate_topic

EARLIEST = -2
LATEST = -1

SOURCE_OPTIONS = OptionTable(
    "source",
    [
        Option(
            "namesrv",
            "text",
            "name server HOST:PORT, several separated by ';'; rocketmq://HOST:PORT[;HOST:PORT] for Apache RocketMQ",
            required=True,
        ),
        Option("topic", "text", "a static topic, or several separated by commas (give topic or topicPattern)"),
        Option("topicPattern", "text", "a regular expression: read every static topic whose whole name matches"),
        Option(
            "startingOffsets",
            "text",
            'earliest, latest, or JSON {"topic": {"0": 42, "1": -2}, ...} (-2 earliest, -1 latest)',
        ),
        Option(
            "startingTimestamp", "text", "ms since epoch: every logic queue starts at the first message stored then"
        ),
        Option("startingOffsetsByTimestamp", "text", 'JSON {"topic": {"0": 1700000000000, ...}}: a time per queue'),
        Option(
            "endingOffsets", "text", 'batch only: latest or JSON {"topic": {"0": 42}} (exclusive)', default="latest"
        ),
        Option(
            "maxMessagesPerTrigger",
            "positive",
            "at most this many messages per micro-batch",
            aliases=("maxOffsetsPerTrigger",),
        ),
        Option("maxBytesPerTrigger", "positive", "at most about this many bytes per micro-batch"),
        Option(
            "minMessagesPerTrigger",
            "positive",
            "wait for at least this many messages (see maxTriggerDelay)",
            aliases=("minOffsetsPerTrigger",),
        ),
        Option("maxTriggerDelay", "duration", "never wait longer for minMessagesPerTrigger", default="15m"),
        Option("failOnDataLoss", "bool", "fail when messages to read were removed", default="true"),
        Option("includeProperties", "bool", "read the properties column", default="true"),
        Option(
            "subscription",
            "text",
            "tag filter applied by the brokers: RocketMQ's expression (TagA || TagB); * takes every message",
            default="*",
        ),
        Option("group", "text", "consumer group: commit each finished micro-batch's offsets to the brokers"),
        Option(
            "groupMissingOffsets",
            "choice",
            "with startingOffsets=group: where a logic queue without a committed offset starts",
            choices=("earliest", "latest", "fail"),
        ),
        Option(
            "queuePartitions",
            "choice",
            "streaming: 'all' (a partition per logic queue every micro-batch) or 'with-messages' (those with new ones)",
            choices=("all", "with-messages"),
        ),
        Option(
            "driverReadMaxMessages",
            "positive",
            "streaming: a micro-batch of at most this many messages is read by the query's driver-side "
            "process and reaches Spark as one partition, with no Python read task (lower latency)",
        ),
        Option("pullBatchSize", "positive", "messages per pull request (executors)", default="10000"),
        Option("retryTimeoutMs", "positive", "how long reads retry an unavailable broker", default="120000"),
        *SECURITY_OPTIONS,
    ],
)


QueueValues = tuple[tuple[int, int], ...]


@dataclass(frozen=True, slots=True)
class StartSpec:
    """Where a query starts: 'earliest', 'latest', 'offsets' (per topic and queue, -2/-1 allowed),
    'timestamp' (one for all queues), 'timestamps' (per topic and queue) or 'group' (the consumer
    group's committed offsets; `missing` for queues without one: earliest, latest or fail)."""

    kind: str
    per_topic: tuple[tuple[str, QueueValues], ...] = ()
    timestamp: int = 0
    group: str = ""
    missing: str = "earliest"

    def offsets_for(self, topic: str) -> dict[int, int] | None:
        """The JSON values given for `topic` (None: the JSON does not name it)."""
        for name, values in self.per_topic:
            if name == topic:
                return dict(values)
        return None

    def values(self) -> list[int]:
        return [v for _, values in self.per_topic for _, v in values]


@dataclass(frozen=True, slots=True)
class SourceOptions:
    namesrv: str
    topics: tuple[str, ...]  # the `topic` list; empty with a pattern
    starting: StartSpec
    ending: StartSpec
    max_messages_per_trigger: int | None = None
    max_bytes_per_trigger: int | None = None
    min_messages_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60 * 1000
    fail_on_data_loss: bool = True
    include_properties: bool = True
    group: str = ""
    pull_batch_size: int = 10_000
    only_queues_with_messages: bool = False  # queuePartitions=with-messages (micro-batches)
    driver_read_max_messages: int = 0  # driverReadMaxMessages (0: every micro-batch runs read tasks)
    retry_timeout_ms: int = 120_000
    security: ClientSecurity = PLAIN
    pattern: str = ""  # topicPattern: a regular expression every topic name must fully match
    tags: str = ""  # the `subscription` option: a tag expression ("" for every message)

    @property
    def subscription(self) -> str:
        """The topics as a reader names them in logs and errors."""
        return ",".join(self.topics) if self.topics else f"pattern {self.pattern!r}"

    def subscribes(self, topic: str) -> bool:
        return topic in self.topics if self.topics else re.fullmatch(self.pattern, topic) is not None


def parse_source_options(raw: Mapping[str, Any], *, streaming: bool) -> SourceOptions:
    opts = SOURCE_OPTIONS.parse(raw)
    topics, pattern = _subscription(opts)
    starting = _starting(opts, topics, pattern, default="latest" if streaming else "earliest")
    ending = _offsets_spec(opts, "endingOffsets", opts.text("endingOffsets"), topics, pattern, allow_earliest=False)
    if not streaming and (starting.kind == "latest" or LATEST in starting.values()):
        raise InvalidOptionError(
            f"option {opts.key('startingOffsets')!r}: a batch query cannot start at latest (it would read nothing); "
            "use earliest, JSON offsets or a timestamp"
        )
    if streaming and "endingOffsets" in opts:
        raise InvalidOptionError(f"option {opts.key('endingOffsets')!r} applies to batch queries only (spark.read)")
    for key in ("driverReadMaxMessages", "queuePartitions"):
        if not streaming and key in opts:
            raise InvalidOptionError(f"option {opts.key(key)!r} applies to streaming queries only (spark.readStream)")
    max_rows = opts.positive("maxMessagesPerTrigger")
    min_rows = opts.positive("minMessagesPerTrigger")
    if max_rows is not None and min_rows is not None and min_rows > max_rows:
        raise InvalidOptionError(
            f"option {opts.key('minMessagesPerTrigger')!r} ({min_rows}) is larger than "
            f"option {opts.key('maxMessagesPerTrigger')!r} ({max_rows})"
        )
    return SourceOptions(
        namesrv=cluster_address(opts),
        topics=topics,
        pattern=pattern,
        starting=starting,
        ending=ending,
        max_messages_per_trigger=max_rows,
        max_bytes_per_trigger=opts.positive("maxBytesPerTrigger"),
        min_messages_per_trigger=min_rows,
        max_trigger_delay_ms=opts.duration_ms("maxTriggerDelay"),
        fail_on_data_loss=opts.flag("failOnDataLoss"),
        include_properties=opts.flag("includeProperties"),
        group=_group(opts),
        pull_batch_size=opts.positive("pullBatchSize") or 10_000,
        only_queues_with_messages=opts.choice("queuePartitions") == "with-messages",
        driver_read_max_messages=opts.positive("driverReadMaxMessages") or 0,
        retry_timeout_ms=opts.positive("retryTimeoutMs") or 120_000,
        security=client_security(opts),
        tags=_tags(opts),
    )


def _tags(opts: ParsedOptions) -> str:
    """The `subscription` tag expression, checked ("" when it takes every message)."""
    try:
        wanted = parse_tag_expression(opts.text("subscription"))
    except InvalidArgumentError as exc:
        raise InvalidOptionError(f"option {opts.key('subscription')!r}: {exc.message}") from None
    return "" if wanted.takes_all else wanted.expression


def _subscription(opts: ParsedOptions) -> tuple[tuple[str, ...], str]:
    """(topics, pattern) from `topic` (a comma list) or `topicPattern`: exactly one of them."""
    given = [k for k in ("topic", "topicPattern") if k in opts and opts.text(k).strip()]
    if len(given) != 1:
        raise InvalidOptionError(
            "give exactly one of the options 'topic' (a static topic, or several separated by commas) "
            f"and 'topicPattern' (a regular expression); got {[opts.key(k) for k in given] or 'neither'}"
        )
    if given == ["topicPattern"]:
        pattern = opts.text("topicPattern").strip()
        try:
            re.compile(pattern)
        except re.error as exc:
            raise InvalidOptionError(
                f"option {opts.key('topicPattern')!r}: {pattern!r} is not a regular expression: {exc}"
            ) from None
        return (), pattern
    topics = []
    for name in opts.text("topic").split(","):
        try:
            topics.append(validate_topic(name.strip()))
        except InvalidArgumentError as exc:
            raise InvalidOptionError(f"option {opts.key('topic')!r}: {exc.message}") from None
    if len(set(topics)) != len(topics):
        raise InvalidOptionError(f"option {opts.key('topic')!r} names a topic twice: {opts.text('topic')!r}")
    return tuple(topics), ""


def _starting(opts: ParsedOptions, topics: tuple[str, ...], pattern: str, default: str) -> StartSpec:
    given = [k for k in ("startingOffsets", "startingTimestamp", "startingOffsetsByTimestamp") if k in opts]
    if len(given) > 1:
        raise InvalidOptionError(
            "give only one of startingOffsets, startingTimestamp, startingOffsetsByTimestamp "
            f"(got {[opts.key(k) for k in given]})"
        )
    if "startingTimestamp" in opts:
        timestamp = _int(opts.key("startingTimestamp"), opts.text("startingTimestamp"), minimum=0)
        return StartSpec("timestamp", timestamp=timestamp)
    if "startingOffsetsByTimestamp" in opts:
        value = opts.text("startingOffsetsByTimestamp")
        return StartSpec(
            "timestamps", per_topic=_topic_json(opts, "startingOffsetsByTimestamp", value, topics, pattern, 0)
        )
    value = opts.text("startingOffsets") if "startingOffsets" in opts else default
    if value.strip().lower() == "group":
        return _group_start(opts)
    if "groupMissingOffsets" in opts:
        raise InvalidOptionError(f"option {opts.key('groupMissingOffsets')!r} applies with startingOffsets=group only")
    return _offsets_spec(opts, "startingOffsets", value, topics, pattern, allow_earliest=True)


def _group_start(opts: ParsedOptions) -> StartSpec:
    """startingOffsets=group: each logic queue from the `group` option's committed offset."""
    if not opts.text("group"):
        raise InvalidOptionError(
            f"option {opts.key('startingOffsets')!r} is 'group': name the consumer group with option 'group'"
        )
    return StartSpec("group", group=_group(opts), missing=opts.choice("groupMissingOffsets") or "earliest")


def _offsets_spec(
    opts: ParsedOptions, option: str, value: str, topics: tuple[str, ...], pattern: str, *, allow_earliest: bool
) -> StartSpec:
    """`value` of `option` (canonical name; errors name it as the user wrote it) as a StartSpec."""
    name = opts.key(option)
    word = value.strip().lower()
    if word == "latest":
        return StartSpec("latest")
    if word == "earliest":
        if not allow_earliest:
            raise InvalidOptionError(f"option {name!r} cannot be 'earliest'; use latest or JSON offsets")
        return StartSpec("earliest")
    minimum = EARLIEST if allow_earliest else LATEST
    return StartSpec("offsets", per_topic=_topic_json(opts, option, value, topics, pattern, minimum))


def _topic_json(
    opts: ParsedOptions, option: str, value: str, topics: tuple[str, ...], pattern: str, minimum: int
) -> tuple[tuple[str, QueueValues], ...]:
    """JSON {"topic": {"queue": value}} given as `option`: with a topic list it names exactly those
    topics; with a pattern, topics that match it (a matching topic it does not name starts at earliest)."""
    name = opts.key(option)
    try:
        parsed = json.loads(value)
    except ValueError:
        raise InvalidOptionError(f"option {name!r} is neither a keyword nor valid JSON: {value!r}") from None
    example = topics[0] if topics else "topic"
    if not isinstance(parsed, dict) or not parsed or not all(isinstance(v, dict) for v in parsed.values()):
        raise InvalidOptionError(f'option {name!r} must be JSON {{"{example}": {{"0": ..., "1": ...}}}}, got {value!r}')
    if topics and set(parsed) != set(topics):
        raise InvalidOptionError(
            f"option {name!r} must name exactly the topics of option {opts.key('topic')!r} {list(topics)}; "
            f"it names {sorted(parsed)}"
        )
    if pattern:
        strangers = sorted(t for t in parsed if re.fullmatch(pattern, t) is None)
        if strangers:
            raise InvalidOptionError(
                f"option {name!r} names topics {strangers} that {opts.key('topicPattern')} {pattern!r} does not match"
            )
    return tuple((topic, _queue_values(name, topic, parsed[topic], minimum)) for topic in sorted(parsed))


def _queue_values(name: str, topic: str, per_queue: dict[str, Any], minimum: int) -> QueueValues:
    out = []
    for q, v in per_queue.items():
        if not str(q).isdigit() or not isinstance(v, int) or isinstance(v, bool) or v < minimum:
            raise InvalidOptionError(
                f"option {name!r}: topic {topic!r} queue {q!r} -> {v!r} is not a queue id and an integer >= {minimum}"
            )
        out.append((int(q), v))
    return tuple(sorted(out))


def _int(name: str, value: str, minimum: int) -> int:
    try:
        number = int(value)
    except ValueError:
        raise InvalidOptionError(f"option {name!r} must be an integer, got {value!r}") from None
    if number < minimum:
        raise InvalidOptionError(f"option {name!r} must be >= {minimum}, got {number}")
    return number


def _group(opts: ParsedOptions) -> str:
    name = opts.text("group")
    if not name:
        return ""
    try:
        return validate_group(name)
    except InvalidArgumentError as exc:
        raise InvalidOptionError(f"option {opts.key('group')!r}: {exc.message}") from None
