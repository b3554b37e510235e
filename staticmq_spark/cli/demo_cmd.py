"""`staticmq demo`: the main job on an embedded local cluster (see staticmq_spark.demo)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from staticmq_spark.errors import InvalidOptionError


def register(sub: Any) -> None:
    p = sub.add_parser(
        "demo",
        help="run the main job end to end on a local cluster and verify it",
        description=(
            "Starts a name server and brokers in a temporary directory, produces keyed page views into a "
            "static topic, runs a medallion pipeline through Delta Lake (bronze: every message once; silver: "
            "parsed views; gold: per-user totals by MERGE) and writes gold's updates back keyed by user to a "
            "second static topic, remaps the input topic while it runs, then verifies and reports. "
            "Exit status 1 if any check failed."
        ),
    )
    p.add_argument("--events", type=int, default=50_000, help="page views to produce (default 50000)")
    p.add_argument("--users", type=int, default=400, help="distinct users, i.e. keys (default 400)")
    p.add_argument("--rate", type=float, default=5_000.0, help="events per second to produce at (default 5000)")
    p.add_argument(
        "--brokers",
        type=int,
        default=None,
        help="brokers in the local cluster (2 or more; default 3, 2 with --rocketmq)",
    )
    p.add_argument("--queues", type=int, default=8, help="logic queues per static topic (default 8)")
    p.add_argument(
        "--keep",
        "--data-dir",
        dest="data_dir",
        metavar="DIR",
        type=Path,
        help="run in DIR and leave the cluster data, Delta tables and checkpoints there "
        "(default: a temporary directory, removed at the end)",
    )
    p.add_argument("--json", type=Path, help="also write the report as JSON to this file")
    backend = p.add_mutually_exclusive_group()
    backend.add_argument(
        "--rocketmq",
        action="store_true",
        help="run on a local Apache RocketMQ 5.5 cluster (fetched with Maven, on loopback), not staticmq's own",
    )
    backend.add_argument(
        "--namesrv",
        metavar="rocketmq://HOST:PORT",
        help="run on an existing Apache RocketMQ cluster (creates two new static topics with RocketMQ's mqadmin)",
    )
    p.add_argument(
        "--secure",
        action="store_true",
        help="start the embedded cluster with an ACL and TLS (a CA made for the run); the pipeline signs "
        "every call as an account that may only use the demo's topics, and the report checks that an "
        "unsigned request is refused",
    )
    p.set_defaults(handler=cmd_demo)


def cmd_demo(args: argparse.Namespace) -> int:
    from staticmq_spark.demo.runner import DemoSettings, print_report, run_demo, write_json

    if args.events <= 0 or args.users <= 0 or args.rate <= 0 or args.queues <= 0:
        raise InvalidOptionError("--events, --users, --rate and --queues must be positive")
    if args.brokers is None:
        args.brokers = 2 if args.rocketmq else 3
    if args.brokers < 2:
        raise InvalidOptionError("--brokers must be at least 2 (the demo remaps between brokers)")
    settings = DemoSettings(
        events=args.events,
        users=args.users,
        rate=args.rate,
        brokers=args.brokers,
        queues=args.queues,
        data_dir=args.data_dir,
        rocketmq=args.rocketmq,
        namesrv=args.namesrv,
        secure=args.secure,
    )
    report = run_demo(settings)
    print_report(report)
    if args.json:
        write_json(report, args.json)
    return 0 if report.ok else 1
