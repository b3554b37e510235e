"""The command line: `python -m bench.soak [options]` runs a soak (bench/soak/__init__.py says what
it does); `python -m bench.soak driver ...` is the streaming query's child process it starts."""

from __future__ import annotations

import argparse
import sys

import bench.soak
from bench.soak.query import driver_main
from bench.soak.run import run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.soak", description=(bench.soak.__doc__ or "").splitlines()[0]
    )
    sub = parser.add_subparsers(dest="command")
    d = sub.add_parser("driver", help="(internal) the streaming query's process")
    d.add_argument("--namesrv", required=True)
    d.add_argument("--topic", required=True)
    d.add_argument("--table", required=True)
    d.add_argument("--checkpoint", required=True)
    d.add_argument("--control", required=True)
    d.add_argument("--max-per-trigger", type=int, default=100_000)
    parser.add_argument("--backend", choices=["staticmq", "rocketmq"], default="staticmq")
    parser.add_argument("--messages", type=int, default=1_000_000, help="acknowledged messages to send")
    parser.add_argument("--keys", type=int, default=5000)
    parser.add_argument("--batch", type=int, default=1000, help="messages per send_batch")
    parser.add_argument("--rate", type=float, default=5000, help="messages/s the producer aims at (0: no limit)")
    parser.add_argument("--remaps", type=int, default=10)
    parser.add_argument("--broker-kills", type=int, default=3)
    parser.add_argument("--driver-kills", type=int, default=1)
    parser.add_argument("--max-per-trigger", type=int, default=100_000, help="the source's maxMessagesPerTrigger")
    parser.add_argument("--catchup-timeout-s", type=float, default=1800)
    parser.add_argument("--stall-timeout-s", type=float, default=300, help="fail when no send is acked this long")
    parser.add_argument("--dir", help="an empty directory for the cluster, checkpoint, table and logs (kept)")
    parser.add_argument("--keep", action="store_true", help="keep the temp directory even when the run passed")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args(argv)
    if args.command == "driver":
        return driver_main(args)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
