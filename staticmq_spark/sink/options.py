"""Options and input columns of the staticmq sink, checked once when the query is planned."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql.types import (
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructType,
)

from staticmq_spark.cluster.address import parse_address
from staticmq_spark.errors import InvalidOptionError

SINK_OPTIONS = {
    "namesrv": "HOST:PORT of the name server(s), ';'-separated; rocketmq://HOST:PORT[;HOST:PORT] for Apache RocketMQ",
    "topic": "the static topic to write",
    "orderstrategy": "strict (a keyed row waits for its queue) or best-tried (default: the topic's, else best-tried)",
    "sendtimeoutms": "positive integer: how long a row keeps trying its queue (strict) before the task fails",
    "activedetection": "true or false: probe brokers to skip unreachable ones for keyless rows",
    "requestbytes": "positive integer: bytes per staging request",
}
IGNORED = {"path", "checkpointlocation", "queryname"}  # keys Spark itself adds
COLUMNS = {
    "key": "string: the logic queue is hash(key) mod totalQueues",
    "value": "string or binary (required): the message body",
    "tags": "string",
    "properties": "map<string,string>",
    "queueId": "int: an explicit logic queue, overriding the key",
}


@dataclass(frozen=True, slots=True)
class SinkOptions:
    namesrv: str
    topic: str
    order: str | None = None
    send_timeout_ms: int = 60_000
    active_detection: bool = True
    request_bytes: int = 8 << 20


def parse_sink_options(raw: Mapping[str, Any]) -> SinkOptions:
    opts = {str(k).lower(): str(v) for k, v in raw.items() if str(k).lower() not in IGNORED}
    unknown = sorted(set(opts) - set(SINK_OPTIONS))
    if unknown:
        raise InvalidOptionError(
            f"unknown staticmq sink option(s) {unknown}; accepted: "
            + ", ".join(f"{k} ({v})" for k, v in SINK_OPTIONS.items())
        )
    for required in ("namesrv", "topic"):
        if not opts.get(required):
            raise InvalidOptionError(f"sink option {required!r} is required: {SINK_OPTIONS[required]}")
    order = opts.get("orderstrategy")
    if order is not None and order not in ("strict", "best-tried"):
        raise InvalidOptionError(f"sink option 'orderStrategy' must be strict or best-tried, got {order!r}")
    detection = opts.get("activedetection", "true").strip().lower()
    if detection not in ("true", "false"):
        raise InvalidOptionError(f"sink option 'activeDetection' must be true or false, got {detection!r}")
    return SinkOptions(
        namesrv=str(parse_address(opts["namesrv"])),
        topic=opts["topic"],
        order=order,
        send_timeout_ms=_positive(opts, "sendtimeoutms", 60_000),
        active_detection=detection == "true",
        request_bytes=_positive(opts, "requestbytes", 8 << 20),
    )


def _positive(opts: dict[str, str], name: str, default: int) -> int:
    if name not in opts:
        return default
    try:
        value = int(opts[name])
    except ValueError:
        raise InvalidOptionError(f"sink option {name!r} must be a positive integer, got {opts[name]!r}") from None
    if value <= 0:
        raise InvalidOptionError(f"sink option {name!r} must be a positive integer, got {value}")
    return value


def check_input_schema(schema: StructType) -> None:
    """A clear analysis-time error for a missing `value`, an unknown column or a wrong type."""
    names = schema.fieldNames()
    unknown = [n for n in names if n not in COLUMNS]
    if unknown:
        raise InvalidOptionError(
            f"the staticmq sink does not know column(s) {unknown}; its columns are: "
            + ", ".join(f"{k} ({v})" for k, v in COLUMNS.items())
        )
    if "value" not in names:
        raise InvalidOptionError("the staticmq sink needs a 'value' column (string or binary): the message body")
    wanted: dict[str, tuple[type[DataType], ...]] = {
        "key": (StringType,),
        "value": (StringType, BinaryType),
        "tags": (StringType,),
        "queueId": (IntegerType, LongType, ShortType),
    }
    for field in schema.fields:
        if field.name == "properties":
            t = field.dataType
            if not (
                isinstance(t, MapType) and isinstance(t.keyType, StringType) and isinstance(t.valueType, StringType)
            ):
                raise InvalidOptionError(f"sink column 'properties' must be map<string,string>, not {t.simpleString()}")
        elif not isinstance(field.dataType, wanted[field.name]):
            raise InvalidOptionError(
                f"sink column {field.name!r} must be {COLUMNS[field.name].split(':')[0]}, "
                f"not {field.dataType.simpleString()}"
            )
