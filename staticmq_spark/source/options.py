"""Options of the staticmq source, parsed once (keys are case-insensitive) into frozen values.
An unknown key, a malformed value or a contradiction fails at once, naming the option."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from staticmq_spark.cluster.address import parse_address
from staticmq_spark.errors import InvalidArgumentError, InvalidOptionError
from staticmq_spark.protocol.names import validate_group

EARLIEST = -2
LATEST = -1

# accepted option -> what it takes (used in error messages)
SOURCE_OPTIONS = {
    "namesrv": "HOST:PORT of the name server(s), ';'-separated; rocketmq://HOST:PORT[;HOST:PORT] for Apache RocketMQ",
    "topic": "the static topic to read",
    "startingoffsets": 'earliest, latest, or JSON {"topic": {"0": 42, "1": -2}} (-2 earliest, -1 latest)',
    "startingtimestamp": "ms since epoch: start every logic queue at the first message stored at or after it",
    "startingoffsetsbytimestamp": 'JSON {"topic": {"0": 1700000000000, ...}}',
    "endingoffsets": 'batch queries: latest or JSON {"topic": {"0": 42}} (exclusive ends)',
    "maxmessagespertrigger": "positive integer: at most this many messages per micro-batch",
    "maxoffsetspertrigger": "alias of maxMessagesPerTrigger",
    "maxbytespertrigger": "positive integer: at most about this many bytes per micro-batch",
    "minmessagespertrigger": "positive integer: wait for at least this many messages (see maxTriggerDelay)",
    "minoffsetspertrigger": "alias of minMessagesPerTrigger",
    "maxtriggerdelay": "duration like 30s, 5m or 1500ms: never wait longer than this for minMessagesPerTrigger",
    "failondataloss": "true or false: fail when messages to read were removed by retention",
    "includeproperties": "true or false: read the properties column",
    "group": "consumer group: commit each finished micro-batch's offsets to the brokers",
    "pullbatchsize": "positive integer: messages per pull request (executors)",
    "retrytimeoutms": "positive integer: how long reads retry an unavailable broker before failing",
}
IGNORED = {"path", "checkpointlocation", "queryname"}  # keys Spark itself may add


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


def parse_source_options(raw: Mapping[str, Any], *, streaming: bool) -> SourceOptions:
    opts = {str(k).lower(): str(v) for k, v in raw.items() if str(k).lower() not in IGNORED}
    unknown = sorted(set(opts) - set(SOURCE_OPTIONS))
    if unknown:
        raise InvalidOptionError(
            f"unknown staticmq source option(s) {unknown}; accepted: "
            + ", ".join(f"{k} ({v})" for k, v in SOURCE_OPTIONS.items())
        )
    for required in ("namesrv", "topic"):
        if not opts.get(required):
            raise InvalidOptionError(f"option {required!r} is required: {SOURCE_OPTIONS[required]}")
    topic = opts["topic"]
    starting = _starting(opts, topic, default="latest" if streaming else "earliest")
    ending = _offsets_spec("endingoffsets", opts.get("endingoffsets", "latest"), topic, allow_earliest=False)
    if not streaming and (starting.kind == "latest" or any(v == LATEST for _, v in starting.offsets)):
        raise InvalidOptionError(
            "option 'startingOffsets': a batch query cannot start at latest (it would read nothing); "
            "use earliest, JSON offsets or a timestamp"
        )
    if streaming and "endingoffsets" in opts:
        raise InvalidOptionError("option 'endingOffsets' applies to batch queries only (spark.read)")
    max_rows = _positive(opts, "maxmessagespertrigger") or _positive(opts, "maxoffsetspertrigger")
    min_rows = _positive(opts, "minmessagespertrigger") or _positive(opts, "minoffsetspertrigger")
    if max_rows is not None and min_rows is not None and min_rows > max_rows:
        raise InvalidOptionError(
            f"minMessagesPerTrigger ({min_rows}) is larger than maxMessagesPerTrigger ({max_rows})"
        )
    return SourceOptions(
        namesrv=str(parse_address(opts["namesrv"])),
        topic=topic,
        starting=starting,
        ending=ending,
        max_messages_per_trigger=max_rows,
        max_bytes_per_trigger=_positive(opts, "maxbytespertrigger"),
        min_messages_per_trigger=min_rows,
        max_trigger_delay_ms=_duration_ms(opts.get("maxtriggerdelay", "15m")),
        fail_on_data_loss=_bool(opts, "failondataloss", True),
        include_properties=_bool(opts, "includeproperties", True),
        group=_group(opts.get("group", "")),
        pull_batch_size=_positive(opts, "pullbatchsize") or 10_000,
        retry_timeout_ms=_positive(opts, "retrytimeoutms") or 120_000,
    )


def _starting(opts: dict[str, str], topic: str, default: str) -> StartSpec:
    given = [k for k in ("startingoffsets", "startingtimestamp", "startingoffsetsbytimestamp") if k in opts]
    if len(given) > 1:
        raise InvalidOptionError(
            f"give only one of startingOffsets, startingTimestamp, startingOffsetsByTimestamp (got {given})"
        )
    if "startingtimestamp" in opts:
        return StartSpec("timestamp", timestamp=_int("startingtimestamp", opts["startingtimestamp"], minimum=0))
    if "startingoffsetsbytimestamp" in opts:
        per_queue = _queue_json("startingoffsetsbytimestamp", opts["startingoffsetsbytimestamp"], topic, minimum=0)
        return StartSpec("timestamps", offsets=per_queue)
    return _offsets_spec("startingoffsets", opts.get("startingoffsets", default), topic, allow_earliest=True)


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


def _positive(opts: dict[str, str], name: str) -> int | None:
    if name not in opts:
        return None
    return _int(name, opts[name], minimum=1)


def _int(name: str, value: str, minimum: int) -> int:
    try:
        number = int(value)
    except ValueError:
        raise InvalidOptionError(f"option {name!r} must be an integer, got {value!r}") from None
    if number < minimum:
        raise InvalidOptionError(f"option {name!r} must be >= {minimum}, got {number}")
    return number


def _bool(opts: dict[str, str], name: str, default: bool) -> bool:
    value = opts.get(name)
    if value is None:
        return default
    if value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise InvalidOptionError(f"option {name!r} must be true or false, got {value!r}")


_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|min|h)?\s*$", re.IGNORECASE)
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000}


def _duration_ms(value: str) -> int:
    match = _DURATION.match(value)
    if not match:
        raise InvalidOptionError(f"option 'maxTriggerDelay' must be a duration like 30s, 5m or 1500ms, got {value!r}")
    return int(match.group(1)) * _UNIT_MS[(match.group(2) or "ms").lower()]


def _group(name: str) -> str:
    if not name:
        return ""
    try:
        return validate_group(name)
    except InvalidArgumentError as exc:
        raise InvalidOptionError(f"option 'group': {exc.message}") from None
