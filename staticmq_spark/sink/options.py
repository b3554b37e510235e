"""Options and input columns of the staticmq sink, checked once when the query is planned."""

from __future__ import annotations

from collections.abc import Mapping
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

from staticmq_spark.backends.types import DEFAULT_REQUEST_BYTES, WriteSettings
from staticmq_spark.errors import InvalidOptionError
from staticmq_spark.option_table import SECURITY_OPTIONS, Option, OptionTable, client_security, cluster_address

SINK_OPTIONS = OptionTable(
    "sink",
    [
        Option(
            "namesrv",
            "text",
            "name server HOST:PORT, several separated by ';'; rocketmq://HOST:PORT[;HOST:PORT] for Apache RocketMQ",
            required=True,
        ),
        Option("topic", "text", "the static topic to write", required=True),
        Option(
            "orderStrategy",
            "choice",
            "strict (a row waits for its logic queue's broker) or best-tried (default: the topic's, else best-tried)",
            choices=("strict", "best-tried"),
        ),
        Option("sendTimeoutMs", "positive", "how long a row keeps trying its queue", default="60000"),
        Option(
            "activeDetection",
            "bool",
            "accepted, no effect on the sink: every row has a fixed logic queue (the Producer's applies)",
            default="true",
        ),
        Option("requestBytes", "positive", "bytes per staging request", default=str(DEFAULT_REQUEST_BYTES)),
        Option(
            "deliveryGuarantee",
            "choice",
            "exactly-once (the default: broker_stub's two-phase staging; on Apache RocketMQ rows staged on the "
            "staging topic and forwarded once after a recorded decision), exactly-once-transactional (Apache "
            "RocketMQ: one transactional half message per row, committed by the driver; slower) or at-least-once "
            "(Apache RocketMQ: direct sends, each row carrying staticmq_row_id; broker_stub is exactly once "
            "whichever is chosen)",
            choices=("exactly-once", "exactly-once-transactional", "at-least-once"),
            default="exactly-once",
        ),
        Option(
            "decisionTopic",
            "text",
            "Apache RocketMQ, exactly once: the plain topic holding each micro-batch's commit decision "
            "(created on every broker when missing)",
            default="staticmq_sink_decisions",
        ),
        Option(
            "stagingTopic",
            "text",
            "Apache RocketMQ, exactly once: the plain topic holding staged rows until the driver forwards them "
            "(created with 8 queues on every broker when missing)",
            default="staticmq_sink_staging",
        ),
        *SECURITY_OPTIONS,
    ],
)
COLUMNS = {
    "key": "string: the logic queue is hash(key) mod totalQueues",
    "value": "string or binary (required): the message body",
    "tags": "string",
    "properties": "map<string,string>",
    "queueId": "int: an explicit logic queue, overriding the key",
}


SinkOptions = WriteSettings  # what the sink's options parse into (the backends' write settings)


def parse_sink_options(raw: Mapping[str, Any]) -> SinkOptions:
    opts = SINK_OPTIONS.parse(raw)
    return SinkOptions(
        namesrv=cluster_address(opts),
        topic=opts.text("topic"),
        order=opts.choice("orderStrategy"),
        send_timeout_ms=opts.positive("sendTimeoutMs") or 60_000,
        active_detection=opts.flag("activeDetection"),
        request_bytes=opts.positive("requestBytes") or DEFAULT_REQUEST_BYTES,
        security=client_security(opts),
        delivery=opts.choice("deliveryGuarantee") or "exactly-once",
        decision_topic=opts.text("decisionTopic") or "staticmq_sink_decisions",
        staging_topic=opts.text("stagingTopic") or "staticmq_sink_staging",
    )


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
