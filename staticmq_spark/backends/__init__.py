"""The one door to a cluster: interfaces (api), value types (types), the address registry and the
back-off policy. Each protocol lives in its own package (staticmq/, rocketmq/), plus an in-memory
backend (memory/) for fast tests; nothing above this package speaks a wire."""

from staticmq_spark.backends.address import ClusterAddress, parse_address
from staticmq_spark.backends.api import (
    AT_LEAST_ONCE,
    EXACTLY_ONCE,
    Backend,
    ClusterAdmin,
    ClusterReader,
    ProducerPort,
    ProducerSettings,
    PullPort,
    SinkWriter,
    TaskWrite,
)
from staticmq_spark.backends.registry import capabilities_of, open_backend, shared_backend
from staticmq_spark.backends.types import (
    BrokerState,
    Capabilities,
    MessageColumns,
    PhysicalBounds,
    PhysicalRead,
    PullStatus,
    WriteSettings,
)

__all__ = [
    "AT_LEAST_ONCE",
    "EXACTLY_ONCE",
    "Backend",
    "BrokerState",
    "Capabilities",
    "ClusterAddress",
    "ClusterAdmin",
    "ClusterReader",
    "MessageColumns",
    "PhysicalBounds",
    "PhysicalRead",
    "ProducerPort",
    "ProducerSettings",
    "PullPort",
    "PullStatus",
    "SinkWriter",
    "TaskWrite",
    "WriteSettings",
    "capabilities_of",
    "open_backend",
    "parse_address",
    "shared_backend",
]
