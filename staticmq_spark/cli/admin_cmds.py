"""`staticmq admin <command>`: RocketMQ's admin command names and flags, one function each."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from staticmq_spark.cli.formatting import dumps, readable_ms
from staticmq_spark.cli.namesrv import add_namesrv, client_options
from staticmq_spark.client.admin import Admin
from staticmq_spark.errors import InvalidOptionError, TopicNotFoundError
from staticmq_spark.mapping import check_states, is_static_anywhere, logic_bounds, segment_rows

COMMANDS: dict[
    str, tuple[str, Callable[[argparse.ArgumentParser], None], Callable[[Admin, argparse.Namespace], int]]
] = {}


Handler = Callable[[Admin, argparse.Namespace], int]


def command(
    name: str, help_text: str, configure: Callable[[argparse.ArgumentParser], None]
) -> Callable[[Handler], Handler]:
    def wrap(fn: Callable[[Admin, argparse.Namespace], int]) -> Callable[[Admin, argparse.Namespace], int]:
        COMMANDS[name] = (help_text, configure, fn)
        return fn

    return wrap


def register(sub: Any) -> None:
    admin = sub.add_parser("admin", help="administer topics, static topics and consumer groups")
    admin_sub = admin.add_subparsers(dest="admin_command", required=True, metavar="ADMIN_COMMAND")
    for name, (help_text, configure, _) in COMMANDS.items():
        p = admin_sub.add_parser(name, help=help_text)
        add_namesrv(p)
        configure(p)
    admin.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    _, _, fn = COMMANDS[args.admin_command]
    with Admin(args.namesrv, **client_options(args)) as admin:
        return fn(admin, args)


def targets(args: argparse.Namespace) -> dict[str, Any]:
    if bool(args.cluster) == bool(args.brokers):
        raise InvalidOptionError("give exactly one of -c CLUSTER or -b BROKER[,BROKER...]")
    if args.cluster:
        return {"cluster": args.cluster}
    return {"brokers": [b.strip() for b in args.brokers.split(",") if b.strip()]}


def add_targets(p: argparse.ArgumentParser) -> None:
    p.add_argument("-c", "--cluster", help="every broker of this cluster")
    p.add_argument("-b", "--brokers", help="comma-separated broker names")


def emit(args: argparse.Namespace, as_json: Any, lines: list[str]) -> None:
    if getattr(args, "json", False):
        print(dumps(as_json))
    else:
        print("\n".join(lines))


# ---------------------------------------------------------------------- plain topics


def _update_topic_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True, help="topic name")
    add_targets(p)
    p.add_argument("-r", "--read-queues", type=int, default=8, help="read queues per broker (default 8)")
    p.add_argument("-w", "--write-queues", type=int, default=8, help="write queues per broker (default 8)")
    p.add_argument("-p", "--perm", type=int, default=6, help="6 read+write, 4 read, 2 write")
    p.add_argument(
        "-o", "--order", choices=["strict", "best-tried"], default=None, help="ordered topic: strict or best-tried"
    )


@command("updateTopic", "create or update a dynamic topic", _update_topic_args)
def update_topic(admin: Admin, args: argparse.Namespace) -> int:
    done = admin.update_topic(
        args.topic,
        read_queues=args.read_queues,
        write_queues=args.write_queues,
        perm=args.perm,
        order=args.order or "",
        **targets(args),
    )
    for broker, cfg in done.items():
        print(f"{broker}: topic {cfg.name} read={cfg.read_queues} write={cfg.write_queues} perm={cfg.perm}")
    return 0


def _topic_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True, help="topic name")


def _topic_json_args(p: argparse.ArgumentParser) -> None:
    _topic_arg(p)
    p.add_argument("--json", action="store_true", help="print JSON")


@command("deleteTopic", "delete a topic (and a static topic's mappings) from every broker", _topic_arg)
def delete_topic(admin: Admin, args: argparse.Namespace) -> int:
    brokers = admin.delete_topic(args.topic)
    print(f"deleted topic {args.topic} from {', '.join(brokers)}")
    return 0


@command("topicRoute", "show the route clients get for a topic", _topic_json_args)
def topic_route(admin: Admin, args: argparse.Namespace) -> int:
    route = admin.topic_route(args.topic)
    kind = f"static, {route['totalQueues']} logic queues" if route["static"] else "dynamic"
    lines = [f"topic {route['topic']} ({kind})"]
    for b in route["brokers"]:
        extra = f" read={b['readQueues']} write={b['writeQueues']} perm={b['perm']}" if "perm" in b else ""
        lines.append(f"  broker {b['broker']} {b['addr']}{extra}")
    for q in route["queues"]:
        gone = "" if q.get("available", True) else "  (unavailable)"
        lines.append(f"  queue {q['queueId']:>4} -> {q['broker']} {q['addr']}{gone}")
    emit(args, route, lines)
    return 0


@command("topicStatus", "min/max offsets and last update of every queue (logic queues and segments)", _topic_json_args)
def topic_status(admin: Admin, args: argparse.Namespace) -> int:
    states = admin.broker_states(args.topic)
    if is_static_anywhere(states):
        return _static_status(args, check_states(args.topic, states), states)
    rows = admin.topic_status(args.topic)
    if not rows:
        raise TopicNotFoundError(f"topic {args.topic!r} does not exist on any live broker")
    as_json = [asdict(r) | {"lastStoreTime": readable_ms(r.last_store_timestamp)} for r in rows]
    lines = [f"{'broker':<16}{'queue':>6}{'min':>14}{'max':>14}  last store"]
    lines += [
        f"{r.broker:<16}{r.queue_id:>6}{r.min_offset:>14}{r.max_offset:>14}  {readable_ms(r.last_store_timestamp)}"
        for r in rows
    ]
    emit(args, {"topic": args.topic, "queues": as_json}, lines)
    return 0


def _no_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print JSON")


@command("clusterList", "list the live brokers", _no_args)
def cluster_list(admin: Admin, args: argparse.Namespace) -> int:
    brokers = admin.cluster_info()
    as_json = [asdict(b) | {"lastHeartbeatTime": readable_ms(b.last_heartbeat)} for b in brokers]
    lines = [f"{b.cluster:<20}{b.name:<16}{b.addr:<24}{readable_ms(b.last_heartbeat) or '-'}" for b in brokers]
    emit(args, as_json, lines)
    return 0


def _progress_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--group", required=True, help="consumer group")
    p.add_argument("-t", "--topic", help="only this topic (default: every topic the group committed on)")
    p.add_argument("--json", action="store_true", help="print JSON")


@command("consumerProgress", "consumer offset and lag of a group, one row per (logic) queue", _progress_args)
def consumer_progress(admin: Admin, args: argparse.Namespace) -> int:
    rows = admin.consumer_progress(args.group, args.topic)
    total = sum(r.lag or 0 for r in rows)
    as_json = [
        {
            "topic": r.topic,
            "queueId": r.queue_id,
            "broker": r.broker,
            "brokerOffset": r.broker_offset,
            "consumerOffset": r.consumer_offset,
            "lag": r.lag,
            "lastCommitTime": readable_ms(r.last_commit),
        }
        for r in rows
    ]
    lines = [
        f"{'topic':<24}{'queue':>6}  {'broker':<14}{'brokerOffset':>14}{'consumerOffset':>16}{'lag':>10}  lastCommit"
    ]
    for r in rows:
        consumed = "-" if r.consumer_offset is None else str(r.consumer_offset)
        lag = "-" if r.lag is None else str(r.lag)
        when = readable_ms(r.last_commit) or "no commit"
        lines.append(
            f"{r.topic:<24}{r.queue_id:>6}  {r.broker:<14}{r.broker_offset:>14}{consumed:>16}{lag:>10}  {when}"
        )
    uncommitted = sum(r.consumer_offset is None for r in rows)
    lines.append(f"total lag: {total}" + (f" ({uncommitted} queue(s) with no commit)" if uncommitted else ""))
    emit(args, {"group": args.group, "queues": as_json, "totalLag": total, "queuesWithoutCommit": uncommitted}, lines)
    return 0


def _static_status(args: argparse.Namespace, report: Any, states: Any) -> int:
    queues: list[dict[str, Any]] = []
    lines = [
        f"static topic {args.topic}: {report.total_queues} logic queues, epoch {report.epoch}, "
        + ("consistent" if report.ok else "INCONSISTENT: " + report.describe()),
        f"{'queue':>6}  {'leader':<14}{'gen':>4}{'min':>14}{'max':>14}  {'last store':<24} segments",
    ]
    for q in range(report.total_queues):
        chain = report.chains.get(q)
        if chain is None:
            lines.append(f"{q:>6}  (no live leader)")
            queues.append({"queueId": q, "leader": None})
            continue
        low, high, last = logic_bounds(chain, states)
        segs = segment_rows(chain, states)
        queues.append(
            {
                "queueId": q,
                "leader": chain[-1].bname,
                "gen": chain[-1].gen,
                "minOffset": low,
                "maxOffset": high,
                "lastUpdate": last,
                "lastUpdateTime": readable_ms(last),
                "segments": segs,
            }
        )
        desc = " | ".join(
            f"{s['bname']}/{s['queue']} gen{s['gen']} @{s['logicOffset']} [{s['physicalMin']},{s['physicalMax']})"
            for s in segs
        )
        lines.append(
            f"{q:>6}  {chain[-1].bname:<14}{chain[-1].gen:>4}{low:>14}{high:>14}  {readable_ms(last) or '-':<24} {desc}"
        )
    as_json = {
        "topic": args.topic,
        "static": True,
        "epoch": report.epoch,
        "totalQueues": report.total_queues,
        "consistent": report.ok,
        "problems": report.problems,
        "queues": queues,
    }
    emit(args, as_json, lines)
    return 0


def _static_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True, help="static topic name")
    p.add_argument("-qn", "--total-queues", dest="total_queues", type=int, required=True, help="number of logic queues")
    add_targets(p)


def _print_result(result: Any) -> None:
    print(f"{result.topic}: {result.message} (epoch {result.epoch}, {result.total_queues} logic queues)")
    for q, broker in sorted(result.created.items()):
        print(f"  logic queue {q} -> {broker}")
    for q, (old, new) in sorted(result.moved.items()):
        print(f"  logic queue {q}: {old} -> {new}")


@command("updateStaticTopic", "create a static topic or grow its logic queues", _static_args)
def update_static_topic(admin: Admin, args: argparse.Namespace) -> int:
    _print_result(admin.update_static_topic(args.topic, args.total_queues, **targets(args)))
    return 0


def _remap_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True, help="static topic name")
    add_targets(p)


@command("remappingStaticTopic", "move a static topic's logic queues onto the target brokers", _remap_args)
def remapping_static_topic(admin: Admin, args: argparse.Namespace) -> int:
    _print_result(admin.remapping_static_topic(args.topic, **targets(args)))
    return 0


@command("repairStaticTopic", "complete a half-finished static-topic operation", _topic_arg)
def repair_static_topic(admin: Admin, args: argparse.Namespace) -> int:
    _print_result(admin.repair_static_topic(args.topic))
    return 0
