"""`staticmq send`: messages in, one JSON acknowledgement line per message out.

With `--stdin` lines are sent as they arrive: a reader thread hands them over, and a batch is
sent once `--linger-ms` passes without a new line (or it holds STDIN_BATCH lines), so
`tail -f log | staticmq send --stdin` acknowledges every line while stdin stays open.
"""

from __future__ import annotations

import argparse
import json
import queue
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

from staticmq_spark.backends.types import SendResult
from staticmq_spark.cli.namesrv import add_namesrv, client_options
from staticmq_spark.client.producer import Producer
from staticmq_spark.errors import InvalidOptionError, PartialSendError, StaticMQError

STDIN_BATCH = 1000
_EOF = None


def register(sub: Any) -> None:
    p = sub.add_parser("send", help="send messages; prints one JSON line per message")
    add_namesrv(p)
    p.add_argument("-t", "--topic", required=True, help="topic to send to")
    p.add_argument("--key", help="message key: the logic queue is hash(key) mod totalQueues")
    p.add_argument("--tags", help="message tags")
    p.add_argument("--queue", type=int, help="explicit queue (overrides the key)")
    p.add_argument("--stdin", action="store_true", help="one message body per input line, sent as lines arrive")
    p.add_argument("--json", action="store_true", help='with --stdin: lines are {"key","body","tags","properties"}')
    p.add_argument(
        "--linger-ms", type=float, default=5.0, help="with --stdin: send a batch after this long without a new line"
    )
    p.add_argument("bodies", nargs="*", metavar="BODY", help="message bodies (one message each)")
    p.set_defaults(handler=cmd_send)


def _parse(line: str, n: int, as_json: bool) -> dict[str, Any] | None:
    if not line.strip() and (as_json or not line):
        return None
    if not as_json:
        return {"body": line}
    try:
        item = json.loads(line)
    except ValueError as exc:
        raise InvalidOptionError(f"stdin line {n} is not JSON: {exc}") from None
    if not isinstance(item, dict) or "body" not in item:
        raise InvalidOptionError(f'stdin line {n}: expected an object with at least "body"')
    return item


def _stdin_batches(as_json: bool, linger_s: float) -> Iterator[list[dict[str, Any]]]:
    """Batches of parsed stdin lines, each yielded once input pauses for `linger_s`."""
    lines: queue.Queue[str | None] = queue.Queue()

    def reader() -> None:
        for raw in iter(sys.stdin.readline, ""):
            lines.put(raw.rstrip("\n"))
        lines.put(_EOF)

    threading.Thread(target=reader, name="stdin-reader", daemon=True).start()
    n = 0
    done = False
    while not done:
        batch: list[dict[str, Any]] = []
        line = lines.get()
        deadline = time.monotonic() + linger_s
        while True:
            if line is _EOF:
                done = True
                break
            n += 1
            item = _parse(line, n, as_json)
            if item is not None:
                batch.append(item)
            if len(batch) >= STDIN_BATCH:
                break
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
        if batch:
            yield batch


def cmd_send(args: argparse.Namespace) -> int:
    if args.stdin and args.bodies:
        raise InvalidOptionError("give message bodies as arguments or --stdin, not both")
    if args.json and not args.stdin:
        raise InvalidOptionError("--json applies to --stdin input")
    if not args.stdin and not args.bodies:
        raise InvalidOptionError("nothing to send: give BODY arguments or --stdin")
    batches = (
        _stdin_batches(args.json, args.linger_ms / 1000) if args.stdin else iter([[{"body": b} for b in args.bodies]])
    )
    failed = 0
    with Producer(args.namesrv, active_detection=False, **client_options(args)) as producer:
        for chunk in batches:
            failed += _send_chunk(producer, args, chunk)
    if failed:
        print(f"staticmq send: {failed} message(s) failed", file=sys.stderr)
        return 1
    return 0


def _send_chunk(producer: Producer, args: argparse.Namespace, chunk: list[dict[str, Any]]) -> int:
    """Send one batch and print its acknowledgements; returns how many failed."""
    keys = [r.get("key", args.key) for r in chunk]
    tags = [r.get("tags", args.tags) for r in chunk]
    props = [r.get("properties") for r in chunk]
    try:
        results = producer.send_batch(
            args.topic,
            [str(r["body"]) for r in chunk],
            keys=keys if any(k is not None for k in keys) else None,
            tags=tags if any(t is not None for t in tags) else None,
            properties=props if any(p for p in props) else None,
            queue=args.queue,
        )
    except PartialSendError as exc:  # some queues' requests stored: say which, per message
        lines = _per_message(exc.stored, len(chunk), keys)
        for row, error in exc.failed.items():
            lines[row] = {"topic": args.topic, "key": keys[row], "error": error.message}
        for line in lines:
            print(json.dumps(line))
        sys.stdout.flush()
        return len(exc.failed)
    except StaticMQError as exc:
        for key in keys:
            print(json.dumps({"topic": args.topic, "key": key, "error": exc.message}), flush=True)
        return len(chunk)
    for line in _per_message(results, len(chunk), keys):
        print(json.dumps(line))
    sys.stdout.flush()
    return 0


def _per_message(results: list[SendResult], n: int, keys: list[Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{} for _ in range(n)]
    for r in results:
        rows = r.rows if r.rows is not None else tuple(range(r.count))
        for i, row in enumerate(rows):
            offset = -1 if r.queue_offset < 0 else r.queue_offset + i
            out[row] = {
                "topic": r.topic,
                "queueId": r.queue_id,
                "queueOffset": offset,
                "broker": r.broker,
                "key": keys[row],
                "duplicate": r.duplicate,
            }
    return out
