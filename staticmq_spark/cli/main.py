"""Entry point of the `staticmq` command: parse, dispatch, turn errors into exit statuses."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

from staticmq_spark.cli import admin_cmds, admin_group_cmds, demo_cmd, doctor_cmd, pull_cmd, send_cmd, server_cmds
from staticmq_spark.errors import StaticMQError, missing_extra
from staticmq_spark.local_clusters.child_process import honour_parent

EXIT_ERROR = 1

_REGISTERED = (admin_group_cmds,)  # registers its admin commands on import


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="staticmq",
        description="staticmq: static-topic message queue (reference broker) and its Spark connector",
    )
    parser.add_argument(
        "--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"], help="log level (default INFO)"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    server_cmds.register(sub)
    admin_cmds.register(sub)
    send_cmd.register(sub)
    pull_cmd.register(sub)
    demo_cmd.register(sub)
    doctor_cmd.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    honour_parent()
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, args.log_level),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    logging.getLogger("py4j").setLevel(logging.WARNING)
    try:
        status: int = args.handler(args)
        return status
    except StaticMQError as exc:
        print(f"staticmq {args.command}: error: {exc.message}", file=sys.stderr)
        return EXIT_ERROR
    except ModuleNotFoundError as exc:  # an optional package (broker, demo, Delta): name its extra
        missing = missing_extra(exc, f"staticmq {args.command}")
        if missing is None:
            raise
        print(f"staticmq {args.command}: error: {missing.message}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `staticmq pull ... | head`: the reader is gone, which is no error
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # Python's own flush at exit would raise again
        return 141
