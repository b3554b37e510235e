"""The name server argument: `-n/--namesrv`, defaulting to the NAMESRV_ADDR environment
variable (RocketMQ's convention)."""

from __future__ import annotations

import argparse
import os

ENV = "NAMESRV_ADDR"


def add_namesrv(p: argparse.ArgumentParser) -> None:
    default = os.environ.get(ENV) or None
    p.add_argument(
        "-n",
        "--namesrv",
        required=default is None,
        default=default,
        help=f"name server HOST:PORT (default: the {ENV} environment variable"
        + (f", now {default})" if default else ", which is not set)"),
    )
