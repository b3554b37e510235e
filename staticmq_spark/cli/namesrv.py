"""The name server argument: `-n/--namesrv`, defaulting to the NAMESRV_ADDR environment
variable (RocketMQ's convention)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from staticmq_spark.protocol.security.auth import credentials_from_keys

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
    add_client_security(p)


ACCESS_KEY_ENV = "STATICMQ_ACCESS_KEY"
SECRET_KEY_ENV = "STATICMQ_SECRET_KEY"


def add_client_security(p: argparse.ArgumentParser) -> None:
    """--access-key/--secret-key (default: STATICMQ_ACCESS_KEY / STATICMQ_SECRET_KEY) and --tls-ca."""
    p.add_argument(
        "--access-key",
        default=os.environ.get(ACCESS_KEY_ENV, ""),
        help=f"sign requests as this account of the cluster's ACL (default: ${ACCESS_KEY_ENV})",
    )
    p.add_argument(
        "--secret-key",
        default=os.environ.get(SECRET_KEY_ENV, ""),
        help=f"the account's secret key (default: ${SECRET_KEY_ENV}); never sent, only used to sign",
    )
    p.add_argument(
        "--tls-ca",
        default=None,
        metavar="FILE",
        help="PEM certificate(s) of the CA that signed the servers' TLS certificates: connect with TLS",
    )


def client_options(args: argparse.Namespace) -> dict[str, Any]:
    """The `credentials=` / `tls_ca=` keywords of a client object, from the command line."""
    credentials = credentials_from_keys(args.access_key, args.secret_key, "--access-key and --secret-key")
    out: dict[str, Any] = {}
    if credentials is not None:
        out["credentials"] = credentials
    if args.tls_ca:
        out["tls_ca"] = args.tls_ca
    return out
