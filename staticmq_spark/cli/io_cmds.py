"""`staticmq pull`: messages out as JSON lines."""

from __future__ import annotations

import argparse
import base64
import json
import sys
from typing import Any

import numpy as np

from staticmq_spark.cli.formatting import readable_ms
from staticmq_spark.cli.namesrv import add_namesrv
from staticmq_spark.client.pull_consumer import PullConsumer
from staticmq_spark.client.results import PullStatus
from staticmq_spark.errors import InvalidOptionError


def register(sub: Any) -> None:
    p = sub.add_parser("pull", help="pull messages; prints one JSON line per message")
    add_namesrv(p)
    p.add_argument("-t", "--topic", required=True, help="topic to read")
    p.add_argument("-q", "--queue", type=int, help="only this queue (logic queue on a static topic)")
    p.add_argument("-b", "--broker", help="dynamic topics: only this broker's queues")
    p.add_argument("--from", dest="start", default="earliest", help="earliest, latest or an offset")
    p.add_argument("--max", type=int, default=0, help="stop after N messages (0: all available)")
    p.add_argument("--wait-ms", type=int, default=0, help="long-poll this long for messages per queue")
    p.add_argument("--base64", action="store_true", help="print bodies as base64 (binary payloads)")
    p.set_defaults(handler=cmd_pull)


def cmd_pull(args: argparse.Namespace) -> int:
    printed = 0
    with PullConsumer(args.namesrv) as consumer:
        queues = [
            q
            for q in consumer.queues(args.topic)
            if (args.queue is None or q.queue_id == args.queue) and (args.broker is None or q.broker == args.broker)
        ]
        if not queues:
            raise InvalidOptionError(f"topic {args.topic!r} has no queue matching -q/-b")
        for q in queues:
            if not q.available:
                print(f"staticmq pull: queue {q.queue_id} is unavailable (its broker is down)", file=sys.stderr)
                continue
            broker = None if q.broker.startswith("__") else q.broker
            offset = _start_offset(consumer, args, q.queue_id, broker)
            while not args.max or printed < args.max:
                want = 1024 if not args.max else min(1024, args.max - printed)
                result = consumer.pull(
                    args.topic, q.queue_id, offset, max_messages=want, wait_ms=args.wait_ms, broker=broker
                )
                if result.status is PullStatus.FOUND:
                    printed += _print_batch(args, result)
                    offset = result.next_offset
                elif result.status is PullStatus.OFFSET_MOVED and result.next_offset != offset:
                    offset = result.next_offset
                else:
                    break
    return 0


def _start_offset(consumer: PullConsumer, args: argparse.Namespace, queue_id: int, broker: str | None) -> int:
    if args.start == "earliest":
        return consumer.min_offset(args.topic, queue_id, broker)
    if args.start == "latest":
        return consumer.max_offset(args.topic, queue_id, broker)
    try:
        return int(args.start)
    except ValueError:
        raise InvalidOptionError(f"--from must be earliest, latest or an offset, got {args.start!r}") from None


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
        print(json.dumps(line))
    return int(batch.num_rows)
