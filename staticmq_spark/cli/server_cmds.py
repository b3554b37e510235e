"""`staticmq cluster`, `staticmq namesrv` and `staticmq broker`: the server processes."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import signal
import threading
from pathlib import Path
from typing import Any

from staticmq_spark.cli.exposure import check_exposure
from staticmq_spark.cli.namesrv import add_namesrv
from staticmq_spark.errors import InvalidOptionError

log = logging.getLogger("staticmq.cli")


def register(sub: Any) -> None:
    p = sub.add_parser("cluster", help="run a name server and N brokers until SIGINT/SIGTERM")
    p.add_argument("--brokers", type=int, default=None, help="number of brokers (broker-0, ...; default 2)")
    p.add_argument("--data-dir", type=Path, help="cluster directory; restarting on it recovers all data")
    p.add_argument("--namesrv-port", type=int, default=None, help="name server port (default 9876; 0: any free)")
    p.add_argument("--host", default=None, help="address to bind (default 127.0.0.1)")
    p.add_argument("--cluster", default=None, help="cluster name (default DefaultCluster)")
    p.add_argument("--flush", choices=["sync", "async"], default=None, help="flush policy (default sync)")
    p.add_argument("--config", type=Path, help="TOML file: [cluster], [namesrv], [broker] and [store] settings")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a [store] setting")
    p.add_argument("--ready-file", type=Path, help="write the cluster's addresses and pids here once serving")
    p.add_argument(
        "--tls-ca",
        metavar="FILE",
        default=None,
        help="the CA that signed --tls-cert, trusted by the servers' calls to each other (default: --tls-cert itself)",
    )
    add_exposure_flags(
        p,
        metrics_help="Prometheus metrics at http://HOST:PORT/metrics for the name server and PORT+1+i for broker-i "
        "(0: any free ports; default: none)",
    )
    p.set_defaults(handler=cmd_cluster)

    p = sub.add_parser("namesrv", help="run one name server")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=9876, help="port to serve on (default 9876; 0: any free)")
    p.add_argument("--broker-timeout-ms", type=int, default=10_000, help="expire a broker silent this long")
    p.add_argument("--ready-file", type=Path, help="write the address here once serving")
    add_exposure_flags(p)
    p.set_defaults(handler=cmd_namesrv)

    p = sub.add_parser("broker", help="run one broker")
    p.add_argument("--name", required=True, help="broker name (broker-0, ...)")
    add_namesrv(p)
    p.add_argument("--data-dir", required=True, type=Path, help="the broker's data directory")
    p.add_argument("--port", type=int, default=10911, help="port to serve on (default 10911; 0: any free)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--cluster", default=None, help="cluster name (default DefaultCluster)")
    p.add_argument("--flush", choices=["sync", "async"], default=None, help="flush policy (default sync)")
    p.add_argument("--heartbeat-ms", type=int, default=None, help="heartbeat to the name server every N ms")
    p.add_argument("--config", type=Path, help="TOML file with [broker] and [store] settings")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a [store] setting")
    p.add_argument("--ready-file", type=Path, help="write the address here once serving")
    add_exposure_flags(p)
    p.set_defaults(handler=cmd_broker)


def add_exposure_flags(
    p: Any, metrics_help: str = "serve Prometheus metrics at http://HOST:PORT/metrics (0: any free port; default: none)"
) -> None:
    """--acl, --tls-cert/--tls-key, --insecure and --metrics-port: who may call a server process and
    what it exposes beyond its gRPC port."""
    p.add_argument(
        "--acl",
        metavar="FILE",
        default="",
        help="authenticate and authorize every call with the accounts of this YAML file (RocketMQ's plain_acl.yml)",
    )
    p.add_argument(
        "--tls-cert", metavar="FILE", default="", help="serve TLS with this PEM certificate (with --tls-key)"
    )
    p.add_argument("--tls-key", metavar="FILE", default="", help="the PEM private key of --tls-cert")
    p.add_argument(
        "--insecure",
        action="store_true",
        help="allow a non-loopback --host without --acl: nobody is authenticated (trusted networks only)",
    )
    p.add_argument("--metrics-port", type=int, default=None, help=metrics_help)


def parse_sets(pairs: list[str]) -> dict[str, Any]:
    """`--set key=value` -> typed [store] settings (types from StoreConfig)."""
    from broker_stub.launch import StoreConfig

    types = {f.name: f.type for f in dataclasses.fields(StoreConfig)}
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep:
            raise InvalidOptionError(f"--set expects KEY=VALUE, got {pair!r}")
        if key not in types:
            raise InvalidOptionError(f"--set: unknown store setting {key!r}; accepted: {sorted(types)}")
        kind = types[key]
        try:
            out[key] = (
                _BOOLS[raw.lower()]
                if kind == "bool"
                else int(raw)
                if kind == "int"
                else float(raw)
                if kind == "float"
                else raw
            )
        except (ValueError, KeyError):
            raise InvalidOptionError(f"--set {key}: {raw!r} is not a valid {kind}") from None
    return out


_BOOLS = {"true": True, "false": False}


def cmd_broker(args: argparse.Namespace) -> int:
    from broker_stub.launch import broker_config_from, load_toml, run_broker, store_config_from

    check_exposure(args.host, args.insecure, "broker", acl=bool(args.acl), tls=bool(args.tls_cert))
    file_cfg = load_toml(args.config) if args.config else {}
    store_values = {**file_cfg.get("store", {}), **parse_sets(args.set)}
    if args.flush:
        store_values["flush"] = args.flush
    broker_values = dict(file_cfg.get("broker", {}))
    broker_values.update(name=args.name, namesrv=args.namesrv, data_dir=args.data_dir, host=args.host, port=args.port)
    broker_values["metrics_port"] = args.metrics_port
    security_flags = {
        "acl_file": args.acl,
        "tls_cert": args.tls_cert,
        "tls_key": args.tls_key,
        "tls_ca": args.tls_ca or "",
        "access_key": args.access_key,
        "secret_key": args.secret_key,
    }
    broker_values.update({k: v for k, v in security_flags.items() if v})
    if args.cluster:
        broker_values["cluster"] = args.cluster
    if args.heartbeat_ms:
        broker_values["heartbeat_interval_ms"] = args.heartbeat_ms
    config = broker_config_from(broker_values, store_config_from(store_values))
    run_broker(config, args.ready_file)
    return 0


def cmd_namesrv(args: argparse.Namespace) -> int:
    from broker_stub.launch import run_namesrv, server_security

    check_exposure(args.host, args.insecure, "name server", acl=bool(args.acl), tls=bool(args.tls_cert))
    security = server_security(args.acl, args.tls_cert, args.tls_key)
    run_namesrv(args.host, args.port, args.broker_timeout_ms, args.ready_file, args.metrics_port, security)
    return 0


CLUSTER_KEYS = {"brokers": 2, "data_dir": None, "namesrv_port": 9876, "host": "127.0.0.1", "name": "DefaultCluster"}


def cluster_settings(args: argparse.Namespace) -> dict[str, Any]:
    """[cluster] and [namesrv] from --config, overridden by command-line flags."""
    from broker_stub.launch import load_toml

    file_cfg = load_toml(args.config) if args.config else {}
    section = dict(file_cfg.get("cluster", {}))
    unknown = sorted(set(section) - set(CLUSTER_KEYS))
    if unknown:
        raise InvalidOptionError(f"unknown key(s) {unknown} in [cluster]; accepted: {sorted(CLUSTER_KEYS)}")
    namesrv = dict(file_cfg.get("namesrv", {}))
    if set(namesrv) - {"broker_timeout_ms"}:
        raise InvalidOptionError(f"unknown key(s) {sorted(set(namesrv) - {'broker_timeout_ms'})} in [namesrv]")
    out = {**CLUSTER_KEYS, **section, "broker_timeout_ms": namesrv.get("broker_timeout_ms", 10_000)}
    flags = {
        "brokers": args.brokers,
        "data_dir": args.data_dir,
        "namesrv_port": args.namesrv_port,
        "host": args.host,
        "name": args.cluster,
    }
    out.update({k: v for k, v in flags.items() if v is not None})
    if out["data_dir"] is None:
        raise InvalidOptionError("give --data-dir (or data_dir in the [cluster] section of --config)")
    out["flush"] = args.flush or file_cfg.get("store", {}).get("flush", "sync")
    out["heartbeat_ms"] = file_cfg.get("broker", {}).get("heartbeat_interval_ms", 2000)
    return out


def cmd_cluster(args: argparse.Namespace) -> int:
    from staticmq_spark.local_clusters import LocalCluster

    settings = cluster_settings(args)
    check_exposure(str(settings["host"]), args.insecure, "cluster", acl=bool(args.acl), tls=bool(args.tls_cert))
    store = parse_sets(args.set)
    cluster = LocalCluster(
        brokers=int(settings["brokers"]),
        data_dir=Path(settings["data_dir"]),
        namesrv_port=int(settings["namesrv_port"]),
        host=str(settings["host"]),
        cluster=str(settings["name"]),
        flush=str(settings["flush"]),
        store=store,
        config_file=args.config,
        broker_timeout_ms=int(settings["broker_timeout_ms"]),
        heartbeat_ms=int(settings["heartbeat_ms"]),
        insecure=args.insecure,
        metrics_port=args.metrics_port,
        acl=args.acl or None,
        tls_cert=args.tls_cert or None,
        tls_key=args.tls_key or None,
        tls_ca=args.tls_ca or None,
    )
    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    cluster.start()
    try:
        info = cluster.ready_info()
        if args.ready_file:
            tmp = args.ready_file.with_name(f".{args.ready_file.name}.tmp")
            tmp.write_text(json.dumps(info, indent=1))
            tmp.replace(args.ready_file)
        print(json.dumps(info), flush=True)
        log.info(
            "cluster %s serving: name server %s, brokers %s", settings["name"], info["namesrv"], cluster.broker_names
        )
        while not stop.wait(1.0):
            pass
    finally:
        log.info("stopping cluster")
        cluster.stop()
    return 0
