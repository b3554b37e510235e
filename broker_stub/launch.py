"""The one entry point into broker_stub from outside it: what `staticmq broker|namesrv|cluster`
need to read settings and run a server process (staticmq_spark imports nothing else of broker_stub)."""

from __future__ import annotations

from broker_stub.broker.server import run_broker
from broker_stub.config import StoreConfig, broker_config_from, load_toml, store_config_from
from broker_stub.namesrv.server import run_namesrv
from broker_stub.security import server_security

__all__ = [
    "StoreConfig",
    "broker_config_from",
    "load_toml",
    "run_broker",
    "run_namesrv",
    "server_security",
    "store_config_from",
]
