"""`staticmq admin topicList`, `groupList` and `resetOffsetByTime` (RocketMQ's names and flags)."""

from __future__ import annotations

import argparse
import datetime as dt

from staticmq_spark.cli.admin_cmds import command, emit
from staticmq_spark.cli.formatting import readable_ms
from staticmq_spark.client.admin import Admin
from staticmq_spark.client.groups import EARLIEST, LATEST
from staticmq_spark.errors import InvalidOptionError


def _json_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print JSON")


@command("topicList", "list every topic of the live brokers", _json_arg)
def cmd_topic_list(admin: Admin, args: argparse.Namespace) -> int:
    topics = admin.topic_list()
    lines = [f"{'topic':<32}{'kind':<9}{'queues':>7}  brokers"]
    lines += [
        f"{t.topic:<32}{'static' if t.static else 'dynamic':<9}{t.total_queues:>7}  {','.join(t.brokers)}"
        for t in topics
    ]
    as_json = [
        {"topic": t.topic, "static": t.static, "totalQueues": t.total_queues, "brokers": list(t.brokers)}
        for t in topics
    ]
    emit(args, as_json, lines)
    return 0


@command("groupList", "list every consumer group that committed offsets, with its topics", _json_arg)
def cmd_group_list(admin: Admin, args: argparse.Namespace) -> int:
    groups = admin.group_list()
    lines = [f"{'group':<32}{'last commit':<26}topics"]
    lines += [f"{g.group:<32}{readable_ms(g.last_commit) or '-':<26}{','.join(g.topics)}" for g in groups]
    as_json = [
        {
            "group": g.group,
            "topics": list(g.topics),
            "lastCommit": g.last_commit,
            "lastCommitTime": readable_ms(g.last_commit),
        }
        for g in groups
    ]
    emit(args, as_json, lines)
    return 0


def _reset_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--group", required=True, help="consumer group whose offsets are reset")
    p.add_argument("-t", "--topic", required=True, help="topic (logic offsets on a static topic)")
    to = p.add_mutually_exclusive_group(required=True)
    to.add_argument(
        "-s",
        "--timestamp",
        help="earliest, latest, ms since epoch, or an ISO time (2026-11-24T02:00:00Z): "
        "each queue goes to its first message stored at or after it",
    )
    to.add_argument("-o", "--offset", type=int, help="this offset on every queue (clamped to each queue's min..max)")
    _json_arg(p)


def parse_time(value: str) -> str | int:
    """earliest / latest, ms since epoch, or an ISO 8601 time (UTC unless it names a zone)."""
    if value in (EARLIEST, LATEST):
        return value
    if value.isdigit():
        return int(value)
    try:
        when = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidOptionError(
            f"-s must be earliest, latest, ms since epoch or an ISO time like 2026-11-24T02:00:00Z, got {value!r}"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return int(when.timestamp() * 1000)


@command("resetOffsetByTime", "reset a group's offsets on a topic: earliest, latest, a time or an offset", _reset_args)
def cmd_reset_offset(admin: Admin, args: argparse.Namespace) -> int:
    if args.offset is not None:
        rows = admin.reset_offsets(args.group, args.topic, args.offset)
    else:
        to = parse_time(args.timestamp)
        rows = admin.reset_offsets(args.group, args.topic, to, by_time=isinstance(to, int))
    lines = [f"{'queue':>6}  {'broker':<14}{'before':>14}{'after':>14}"]
    lines += [f"{r.queue_id:>6}  {r.broker:<14}{'-' if r.before is None else r.before:>14}{r.after:>14}" for r in rows]
    as_json = [
        {"topic": r.topic, "queueId": r.queue_id, "broker": r.broker, "before": r.before, "after": r.after}
        for r in rows
    ]
    emit(args, {"group": args.group, "topic": args.topic, "queues": as_json}, lines)
    return 0
