"""`staticmq admin … -n rocketmq://…`: the admin commands that read an Apache RocketMQ cluster.

Creating and remapping static topics on RocketMQ is RocketMQ's own `mqadmin updateStaticTopic` /
`remappingStaticTopic`; the other commands here answer from the remoting protocol directly.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from staticmq_spark.cli.namesrv import client_options
from staticmq_spark.cluster.address import parse_address
from staticmq_spark.errors import InvalidOptionError, TopicNotFoundError
from staticmq_spark.mapping import check_consistency
from staticmq_spark.rocketmq.backend import RocketMQAccess
from staticmq_spark.rocketmq.remoting import rocketmq_credentials

Handler = Callable[[RocketMQAccess, argparse.Namespace], int]


def run(args: argparse.Namespace) -> int:
    handler = HANDLERS.get(args.admin_command)
    if handler is None:
        raise InvalidOptionError(
            f"`staticmq admin {args.admin_command}` is not available on Apache RocketMQ; use RocketMQ's "
            f"`mqadmin {args.admin_command}` (staticmq answers {', '.join(sorted(HANDLERS))} on RocketMQ)"
        )
    options = client_options(args)
    keys = rocketmq_credentials(options.get("credentials"), options.get("tls_ca"))
    access = RocketMQAccess(parse_address(args.namesrv), credentials=keys)
    try:
        return handler(access, args)
    finally:
        access.close()


def cluster_list(access: RocketMQAccess, args: argparse.Namespace) -> int:
    from staticmq_spark.cli.admin_cmds import emit

    masters = access.masters(refresh=True)
    rows = [{"name": n, "addr": a, "cluster": "", "role": "master"} for n, a in sorted(masters.items())]
    emit(args, rows, [f"{r['name']:<16}{r['addr']:<24}master" for r in rows])
    return 0


def topic_route(access: RocketMQAccess, args: argparse.Namespace) -> int:
    from staticmq_spark.cli.admin_cmds import emit

    route = access.route(args.topic, refresh=True)
    kind = f"static, {route.total_queues} logic queues" if route.is_static else "not static"
    queues = [
        {"queueId": q, "broker": route.leaders.get(q), "addr": route.masters.get(route.leaders.get(q, ""), "")}
        for q in range(route.total_queues)
    ]
    lines = [f"topic {args.topic} ({kind})"]
    lines += [f"  broker {n} {a}" for n, a in sorted(route.masters.items())]
    lines += [f"  queue {q['queueId']:>4} -> {q['broker']} {q['addr']}" for q in queues]
    emit(
        args,
        {"topic": args.topic, "static": route.is_static, "totalQueues": route.total_queues, "queues": queues},
        lines,
    )
    return 0


def topic_status(access: RocketMQAccess, args: argparse.Namespace) -> int:
    from staticmq_spark.cli.admin_cmds import _static_status

    states = access.gather(args.topic)
    copies = {n: s.mapping for n, s in states.items() if s.mapping is not None or s.config is not None}
    if not any(m is not None for m in copies.values()):
        raise TopicNotFoundError(f"static topic {args.topic!r} does not exist on the RocketMQ cluster")
    return _static_status(args, check_consistency(args.topic, copies, live=states), states)


def consumer_progress(access: RocketMQAccess, args: argparse.Namespace) -> int:
    from staticmq_spark.cli.admin_cmds import emit

    if not args.topic:
        raise InvalidOptionError("on RocketMQ, consumerProgress needs -t TOPIC (or use RocketMQ's mqadmin)")
    route = access.route(args.topic, refresh=True)
    rows = []
    for q in range(route.total_queues):
        broker_offset = access.max_offset(args.topic, q)
        consumed = access.committed_offset(args.group, args.topic, q)
        rows.append(
            {
                "topic": args.topic,
                "queueId": q,
                "broker": route.leaders.get(q, ""),
                "brokerOffset": broker_offset,
                "consumerOffset": consumed,
                "lag": None if consumed is None else max(0, broker_offset - consumed),
            }
        )
    total = sum(r["lag"] or 0 for r in rows)
    lines = [f"{'topic':<24}{'queue':>6}  {'broker':<14}{'brokerOffset':>14}{'consumerOffset':>16}{'lag':>10}"]
    for r in rows:
        consumed_text = "-" if r["consumerOffset"] is None else str(r["consumerOffset"])
        lag_text = "-" if r["lag"] is None else str(r["lag"])
        head = f"{r['topic']:<24}{r['queueId']:>6}  {r['broker']:<14}{r['brokerOffset']:>14}"
        lines.append(f"{head}{consumed_text:>16}{lag_text:>10}")
    lines.append(f"total lag: {total}")
    emit(args, {"group": args.group, "queues": rows, "totalLag": total}, lines)
    return 0


HANDLERS: dict[str, Handler] = {
    "clusterList": cluster_list,
    "topicRoute": topic_route,
    "topicStatus": topic_status,
    "consumerProgress": consumer_progress,
}
