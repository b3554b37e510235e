"""`staticmq pull`: messages out as JSON lines or a `--format` template; `--follow` keeps
polling (like `kcat -C` without `-e`) until SIGINT/SIGTERM; `-L` lists brokers and topics."""

from __future__ import annotations

import argparse
import base64
import json
import signal
import string
import sys
import threading
import time
from typing import Any

import numpy as np

from staticmq_spark.cli.formatting import readable_ms
from staticmq_spark.cli.namesrv import add_namesrv, client_options
from staticmq_spark.client.admin import Admin
from staticmq_spark.client.pull_consumer import PullConsumer
from staticmq_spark.errors import InvalidOptionError, StaticMQError
from staticmq_spark.protocol.consume.pull_status import PullStatus
from staticmq_spark.protocol.consume.tag_expression import parse_tag_expression
from staticmq_spark.protocol.topics.route_view import QueueAddress

FIELDS = (
    "topic",
    "queueId",
    "queueOffset",
    "key",
    "tags",
    "body",
    "properties",
    "storeTimestamp",
    "storeTime",
    "broker",
)
FOLLOW_IDLE_S = 0.2
_UNREACHABLE: set[tuple[str, int]] = set()
FOLLOW_REFRESH_S = 5.0  # --follow looks for queues whose broker came back this often


def register(sub: Any) -> None:
    p = sub.add_parser("pull", help="pull messages; prints one JSON line (or --format line) per message")
    add_namesrv(p)
    p.add_argument("-t", "--topic", help="topic to read (with -L: only this topic)")
    p.add_argument("-q", "--queue", type=int, help="only this queue (logic queue on a static topic)")
    p.add_argument("-b", "--broker", help="dynamic topics: only this broker's queues")
    p.add_argument("--from", dest="start", default="earliest", help="earliest, latest or an offset")
    p.add_argument("--max", type=int, default=0, help="stop after N messages (0: all available)")
    p.add_argument("--wait-ms", type=int, default=0, help="long-poll this long for messages per queue")
    p.add_argument("--base64", action="store_true", help="print bodies as base64 (binary payloads)")
    p.add_argument(
        "--tags",
        default="*",
        help="only messages with one of these tags, filtered by the broker: RocketMQ's expression, e.g. "
        "'TagA || TagB' (default: * for every message)",
    )
    p.add_argument(
        "--follow", action="store_true", help="keep polling for new messages until SIGINT/SIGTERM (like kcat -C)"
    )
    p.add_argument(
        "-f",
        "--format",
        help="output template instead of JSON, Python str.format fields: " + ", ".join("{" + f + "}" for f in FIELDS),
    )
    p.add_argument("-L", "--list", action="store_true", help="list brokers, topics and queues (metadata) and exit")
    p.set_defaults(handler=cmd_pull)


def cmd_pull(args: argparse.Namespace) -> int:
    if args.list:
        return _list_metadata(args)
    if not args.topic:
        raise InvalidOptionError("give -t TOPIC (or -L to list topics)")
    _check_format(args.format)
    try:
        parse_tag_expression(args.tags)
    except StaticMQError as exc:
        raise InvalidOptionError(f"--tags: {exc.message}") from None
    stop = threading.Event()
    if args.follow:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda signum, frame: stop.set())
    with PullConsumer(args.namesrv, **client_options(args)) as consumer:
        static = _is_static(consumer, args.topic)
        queues = _matching(consumer, args, refresh=False)
        if not queues:
            raise InvalidOptionError(f"topic {args.topic!r} has no queue matching -q/-b")
        offsets: dict[Any, int] = {}
        _adopt(consumer, args, queues, offsets, static, report=True)
        printed, refreshed = 0, time.monotonic()
        while not stop.is_set():
            got = _round(consumer, args, queues, offsets, printed, static)
            printed += got
            if (args.max and printed >= args.max) or not args.follow:
                break
            if time.monotonic() - refreshed >= FOLLOW_REFRESH_S:  # a queue whose broker came back
                queues = _matching(consumer, args, refresh=True) or queues
                _adopt(consumer, args, queues, offsets, static, report=False)
                refreshed = time.monotonic()
            if not got:
                stop.wait(FOLLOW_IDLE_S)
    return 0


def _is_static(consumer: PullConsumer, topic: str) -> bool:
    return consumer.topic_is_static(topic)


def _key(q: QueueAddress, static: bool) -> tuple[str, int]:
    """A logic queue is itself wherever its leader moves; a physical queue is (broker, id)."""
    return ("", q.queue_id) if static else (q.broker, q.queue_id)


def _matching(consumer: PullConsumer, args: argparse.Namespace, refresh: bool) -> list[QueueAddress]:
    return [
        q
        for q in consumer.queues(args.topic, refresh=refresh)
        if (args.queue is None or q.queue_id == args.queue) and (args.broker is None or q.broker == args.broker)
    ]


def _adopt(
    consumer: PullConsumer,
    args: argparse.Namespace,
    queues: list[QueueAddress],
    offsets: dict[Any, int],
    static: bool,
    report: bool,
) -> None:
    """Start offsets for the available queues not read yet."""
    for q in queues:
        key = _key(q, static)
        if key in offsets:
            continue
        if q.available:
            try:
                offsets[key] = _start_offset(consumer, args, q)
            except StaticMQError as exc:
                if not (args.follow and exc.retriable):
                    raise
                continue  # its broker is not answering yet: the next refresh tries again
            if not report:
                print(f"staticmq pull: queue {q.queue_id} is available again", file=sys.stderr)
        elif report:
            print(f"staticmq pull: queue {q.queue_id} is unavailable (its broker is down)", file=sys.stderr)


def _round(
    consumer: PullConsumer,
    args: argparse.Namespace,
    queues: list[QueueAddress],
    offsets: dict[Any, int],
    printed: int,
    static: bool,
) -> int:
    """Read every queue to its current end once; returns the messages printed."""
    got = 0
    for q in queues:
        key = _key(q, static)
        if key not in offsets:
            continue
        broker = None if q.broker.startswith("__") else q.broker
        while not args.max or printed + got < args.max:
            want = 1024 if not args.max else min(1024, args.max - printed - got)
            offset = offsets[key]
            try:
                result = consumer.pull(
                    args.topic,
                    q.queue_id,
                    offset,
                    max_messages=want,
                    wait_ms=args.wait_ms,
                    broker=broker,
                    tags=args.tags,
                )
            except StaticMQError as exc:
                if not (args.follow and exc.retriable):
                    raise
                if key not in _UNREACHABLE:  # --follow outlives a broker restart; said once
                    _UNREACHABLE.add(key)
                    print(f"staticmq pull: queue {q.queue_id}: {exc.message}; still trying", file=sys.stderr)
                break
            _UNREACHABLE.discard(key)
            if result.status is PullStatus.FOUND:
                got += _print_batch(args, result)
                offsets[key] = result.next_offset
            elif result.status in (PullStatus.OFFSET_MOVED, PullStatus.RETRY_AT_NEXT) and result.next_offset != offset:
                offsets[key] = result.next_offset
            else:
                break
    sys.stdout.flush()
    return got


def _start_offset(consumer: PullConsumer, args: argparse.Namespace, q: QueueAddress) -> int:
    broker = None if q.broker.startswith("__") else q.broker
    if args.start == "earliest":
        return consumer.min_offset(args.topic, q.queue_id, broker)
    if args.start == "latest":
        return consumer.max_offset(args.topic, q.queue_id, broker)
    try:
        return int(args.start)
    except ValueError:
        raise InvalidOptionError(f"--from must be earliest, latest or an offset, got {args.start!r}") from None


def _check_format(template: str | None) -> None:
    if template is None:
        return
    try:
        names = [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
    except ValueError as exc:
        raise InvalidOptionError(f"--format {template!r} is not a valid template: {exc}") from None
    unknown = [n for n in names if n.split(".")[0].split("[")[0] not in FIELDS]
    if unknown:
        raise InvalidOptionError(f"--format: unknown field(s) {unknown}; the fields are {', '.join(FIELDS)}")


def _print_batch(args: argparse.Namespace, result: Any) -> int:
    batch = result.batch
    offsets = np.asarray(batch.column("queue_offset"))
    cols = {name: batch.column(name).to_pylist() for name in ("key", "tags", "body", "properties", "store_timestamp")}
    for i in range(batch.num_rows):
        body: bytes = cols["body"][i]
        line = {
            "topic": result.topic,
            "queueId": result.queue_id,
            "queueOffset": int(offsets[i]),
            "key": cols["key"][i],
            "tags": cols["tags"][i],
            "body": base64.b64encode(body).decode() if args.base64 else body.decode("utf-8", errors="replace"),
            "properties": dict(cols["properties"][i] or []),
            "storeTimestamp": cols["store_timestamp"][i],
            "storeTime": readable_ms(cols["store_timestamp"][i]),
            "broker": result.broker,
        }
        print(args.format.format(**line) if args.format else json.dumps(line))
    return int(batch.num_rows)


def _list_metadata(args: argparse.Namespace) -> int:
    """Like `kcat -L`: brokers, then each topic with its queues and their leaders and offsets."""
    with (
        Admin(args.namesrv, **client_options(args)) as admin,
        PullConsumer(args.namesrv, **client_options(args)) as consumer,
    ):
        brokers = admin.cluster_info()
        topics = [t for t in admin.topic_list() if not args.topic or t.topic == args.topic]
        if args.topic and not topics:
            raise InvalidOptionError(f"topic {args.topic!r} does not exist on any live broker")
        print(f"{len(brokers)} broker(s):")
        for b in brokers:
            print(f"  broker {b.name} at {b.addr} (cluster {b.cluster})")
        print(f"{len(topics)} topic(s):")
        for t in topics:
            kind = f"static, {t.total_queues} logic queues" if t.static else f"dynamic, {t.total_queues} queues"
            print(f'  topic "{t.topic}" ({kind}):')
            for o in consumer.offsets(t.topic):
                print(
                    f"    queue {o.queue.queue_id:>4}: leader {o.queue.broker}, offsets {o.min_offset}..{o.max_offset}"
                )
    return 0
