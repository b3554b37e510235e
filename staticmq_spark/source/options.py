"""Options of the staticmq source, parsed once (keys are case-insensitive) into frozen values.
An unknown key, a malformed value or a contradiction fails at once, naming the option."""

from __future__ import annotations

import json
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
from staticmq_spark.protocol.channels import PLAIN, ClientSecurity
from staticmq_spark.protocol.names import validate_group

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
        Option("topic", "text", "a static topic", required=True),
        Option(
            "startingOffsets",
            "text",
            'earliest, latest, or JSON {"topic": {"0": 42, "1": -2}} (-2 earliest, -1 latest)',
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
        Option("group", "text", "consumer group: commit each finished micro-batch's offsets to the brokers"),
        Option("pullBatchSize", "positive", "messages per pull request (executors)", default="10000"),
        Option("retryTimeoutMs", "positive", "how long reads retry an unavailable broker", default="120000"),
        *SECURITY_OPTIONS,
    ],
)


@dataclass(frozen=True, slots=True)
class StartSpec:
    """Where a query starts: 'earliest', 'latest', 'offsets' (per queue, -2/-1 allowed),
    'timestamp' (one for all queues) or 'timestamps' (per queue)."""

    kind: str
    offsets: tuple[tuple[int, int], ...] = ()
    timestamp: int = 0

    def offsets_dict(self) -> dict[int, int]:
        return dict(self.offsets)


@dataclass(frozen=True, slots=True)
class SourceOptions:
    namesrv: str
    topic: str
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
    retry_timeout_ms: int = 120_000
    security: ClientSecurity = PLAIN


def parse_source_options(raw: Mapping[str, Any], *, streaming: bool) -> SourceOptions:
    opts = SOURCE_OPTIONS.parse(raw)
    topic = opts.text("topic")
    starting = _starting(opts, topic, default="latest" if streaming else "earliest")
    ending = _offsets_spec("endingOffsets", opts.text("endingOffsets"), topic, allow_earliest=False)
    if not streaming and (starting.kind == "latest" or any(v == LATEST for _, v in starting.offsets)):
        raise InvalidOptionError(
            "option 'startingOffsets': a batch query cannot start at latest (it would read nothing); "
            "use earliest, JSON offsets or a timestamp"
        )
    if streaming and "endingOffsets" in opts:
        raise InvalidOptionError("option 'endingOffsets' applies to batch queries only (spark.read)")
    max_rows = opts.positive("maxMessagesPerTrigger")
    min_rows = opts.positive("minMessagesPerTrigger")
    if max_rows is not None and min_rows is not None and min_rows > max_rows:
        raise InvalidOptionError(
            f"minMessagesPerTrigger ({min_rows}) is larger than maxMessagesPerTrigger ({max_rows})"
        )
    return SourceOptions(
        namesrv=cluster_address(opts),
        topic=topic,
        starting=starting,
        ending=ending,
        max_messages_per_trigger=max_rows,
        max_bytes_per_trigger=opts.positive("maxBytesPerTrigger"),
        min_messages_per_trigger=min_rows,
        max_trigger_delay_ms=opts.duration_ms("maxTriggerDelay"),
        fail_on_data_loss=opts.flag("failOnDataLoss"),
        include_properties=opts.flag("includeProperties"),
        group=_group(opts.text("group")),
        pull_batch_size=opts.positive("pullBatchSize") or 10_000,
        retry_timeout_ms=opts.positive("retryTimeoutMs") or 120_000,
        security=client_security(opts),
    )


def _starting(opts: ParsedOptions, topic: str, default: str) -> StartSpec:
    given = [k for k in ("startingOffsets", "startingTimestamp", "startingOffsetsByTimestamp") if k in opts]
    if len(given) > 1:
        raise InvalidOptionError(
            f"give only one of startingOffsets, startingTimestamp, startingOffsetsByTimestamp (got {given})"
        )
    if "startingTimestamp" in opts:
        return StartSpec("timestamp", timestamp=_int("startingTimestamp", opts.text("startingTimestamp"), minimum=0))
    if "startingOffsetsByTimestamp" in opts:
        per_queue = _queue_json("startingOffsetsByTimestamp", opts.text("startingOffsetsByTimestamp"), topic, 0)
        return StartSpec("timestamps", offsets=per_queue)
    value = opts.text("startingOffsets") if "startingOffsets" in opts else default
    return _offsets_spec("startingOffsets", value, topic, allow_earliest=True)


def _offsets_spec(name: str, value: str, topic: str, *, allow_earliest: bool) -> StartSpec:
    word = value.strip().lower()
    if word == "latest":
        return StartSpec("latest")
    if word == "earliest":
        if not allow_earliest:
            raise InvalidOptionError(f"option {name!r} cannot be 'earliest'; use latest or JSON offsets")
        return StartSpec("earliest")
    return StartSpec("offsets", offsets=_queue_json(name, value, topic, minimum=EARLIEST if allow_earliest else LATEST))


def _queue_json(name: str, value: str, topic: str, minimum: int) -> tuple[tuple[int, int], ...]:
    try:
        parsed = json.loads(value)
    except ValueError:
        raise InvalidOptionError(f"option {name!r} is neither a keyword nor valid JSON: {value!r}") from None
    if not isinstance(parsed, dict) or set(parsed) != {topic} or not isinstance(parsed[topic], dict):
        raise InvalidOptionError(f'option {name!r} must be JSON {{"{topic}": {{"0": ..., "1": ...}}}}, got {value!r}')
    out = []
    for q, v in parsed[topic].items():
        if not str(q).isdigit() or not isinstance(v, int) or isinstance(v, bool) or v < minimum:
            raise InvalidOptionError(
                f"option {name!r}: queue {q!r} -> {v!r} is not a queue id and an integer >= {minimum}"
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


def _group(name: str) -> str:
    if not name:
        return ""
    try:
        return validate_group(name)
    except InvalidArgumentError as exc:
        raise InvalidOptionError(f"option 'group': {exc.message}") from None
