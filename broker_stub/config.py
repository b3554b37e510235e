"""Broker and store configuration: frozen dataclasses, loaded from TOML and checked key by key."""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from staticmq_spark.errors import InvalidOptionError

MiB = 1 << 20
FLUSH_POLICIES = ("sync", "async")


@dataclass(frozen=True, slots=True)
class StoreConfig:
    flush: str = "sync"  # sync: a send is acknowledged after fsync (group commit); async: fsync every interval
    flush_interval_ms: int = 1000
    segment_bytes: int = 256 * MiB
    cq_entries_per_file: int = 1 << 20
    retention_bytes: int = 0  # 0: no size limit
    retention_hours: float = 72.0  # 0: no age limit
    retention_check_interval_ms: int = 10_000
    checkpoint_interval_ms: int = 1000
    max_message_bytes: int = 4 * MiB
    max_batch_bytes: int = 32 * MiB
    idempotency_window: int = 200_000  # idempotency keys remembered per broker
    sink_link_min_bytes: int = 4 * MiB  # a sink commit staging this much here is written once (linked); 0: always
    sink_direct_io: bool = True  # staged sink rows bypass the page cache (O_DIRECT) where the file system allows

    def __post_init__(self) -> None:
        if self.flush not in FLUSH_POLICIES:
            raise InvalidOptionError(f"store.flush is {self.flush!r}; expected one of {FLUSH_POLICIES}")
        positive = (
            "flush_interval_ms",
            "segment_bytes",
            "cq_entries_per_file",
            "retention_check_interval_ms",
            "checkpoint_interval_ms",
            "max_message_bytes",
            "max_batch_bytes",
            "idempotency_window",
        )
        for name in positive:
            if getattr(self, name) <= 0:
                raise InvalidOptionError(f"store.{name} must be positive, got {getattr(self, name)!r}")
        if self.sink_link_min_bytes < 0:
            raise InvalidOptionError(f"store.sink_link_min_bytes must be >= 0, got {self.sink_link_min_bytes!r}")
        if not isinstance(self.sink_direct_io, bool):
            raise InvalidOptionError(f"store.sink_direct_io must be true or false, got {self.sink_direct_io!r}")
        if self.retention_bytes < 0 or self.retention_hours < 0:
            raise InvalidOptionError("store.retention_bytes and store.retention_hours must be >= 0")
        if self.max_batch_bytes >= self.segment_bytes:
            raise InvalidOptionError(
                f"store.max_batch_bytes ({self.max_batch_bytes}) must be below store.segment_bytes "
                f"({self.segment_bytes})"
            )


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    name: str
    namesrv: str
    data_dir: Path
    host: str = "127.0.0.1"
    port: int = 0
    metrics_port: int | None = None  # serve Prometheus /metrics here (0: any free port)
    cluster: str = "DefaultCluster"
    heartbeat_interval_ms: int = 2000
    grpc_workers: int = 64
    max_long_poll_ms: int = 30_000
    pop_max_reconsume_times: int = 16  # a popped message failing after this many redeliveries goes to %DLQ%{group}
    pop_buffer_merge: bool = True  # match acks to checkpoints in memory; False: revive by reading the revive log
    pop_revive_interval_ms: int = 100  # how often due checkpoints are revived
    pop_revive_margin_ms: int = 100  # a checkpoint is revived this long after its invisible time ends
    acl_file: str = ""  # authenticate and authorize every call (RocketMQ's plain_acl.yml shape)
    tls_cert: str = ""  # serve TLS with this PEM certificate and key
    tls_key: str = ""
    tls_ca: str = ""  # trust this CA on calls to other servers (default: tls_cert)
    access_key: str = ""  # sign calls to other servers (default: the first admin account of acl_file)
    secret_key: str = field(default="", repr=False)
    store: StoreConfig = field(default_factory=StoreConfig)

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise InvalidOptionError(f"broker port {self.port} is outside 0..65535")
        if self.heartbeat_interval_ms <= 0 or self.grpc_workers <= 0:
            raise InvalidOptionError("heartbeat_interval_ms and grpc_workers must be positive")
        if self.pop_max_reconsume_times < 0 or self.pop_revive_interval_ms <= 0 or self.pop_revive_margin_ms < 0:
            raise InvalidOptionError(
                "pop_max_reconsume_times and pop_revive_margin_ms must be >= 0, pop_revive_interval_ms positive"
            )


def _check_keys(section: str, given: dict[str, Any], cls: type) -> None:
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(given) - known)
    if unknown:
        raise InvalidOptionError(f"unknown key(s) {unknown} in [{section}]; accepted: {sorted(known)}")


def store_config_from(values: dict[str, Any]) -> StoreConfig:
    _check_keys("store", values, StoreConfig)
    try:
        return StoreConfig(**values)
    except TypeError as exc:
        raise InvalidOptionError(f"[store]: {exc}") from None


def load_toml(path: Path) -> dict[str, Any]:
    """Read a staticmq TOML config file: sections [broker], [store], [namesrv], [cluster]."""
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        raise InvalidOptionError(f"config file {path} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise InvalidOptionError(f"config file {path} is not valid TOML: {exc}") from None
    allowed = {"broker", "store", "namesrv", "cluster"}
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise InvalidOptionError(f"unknown section(s) {unknown} in {path}; accepted: {sorted(allowed)}")
    return data


def broker_config_from(values: dict[str, Any], store: StoreConfig) -> BrokerConfig:
    _check_keys("broker", values, BrokerConfig)
    values = dict(values)
    if "data_dir" in values:
        values["data_dir"] = Path(values["data_dir"])
    try:
        return BrokerConfig(store=store, **values)
    except TypeError as exc:
        raise InvalidOptionError(f"[broker]: {exc}") from None
