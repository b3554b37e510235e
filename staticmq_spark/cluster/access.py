"""The cluster-access interface that the Spark source and sink (and the CLI) use, and its registry.

A backend answers for a whole cluster: it parses nothing (the address is parsed once, here), owns
its connections, retries brokers that restart, and says which optional capabilities it has.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from staticmq_spark.cluster.address import ClusterAddress, parse_address
from staticmq_spark.cluster.messages import MessageColumns
from staticmq_spark.cluster.state import BrokerState
from staticmq_spark.cluster.status import PullStatus
from staticmq_spark.protocol.channels import PLAIN, ClientSecurity


@dataclass(frozen=True, slots=True)
class Capabilities:
    two_phase_staging: bool  # the sink can stage rows and commit them once (exactly-once sink)
    pop: bool  # POP consumption


@dataclass(frozen=True, slots=True)
class PhysicalRead:
    status: PullStatus
    next_offset: int  # physical
    messages: MessageColumns | None  # FOUND only


class ClusterAccess(Protocol):
    address: ClusterAddress
    capabilities: Capabilities

    def gather(self, topic: str) -> dict[str, BrokerState]:
        """Every live broker's mapping copy, topic config and physical queue bounds."""
        ...

    def topic_names(self) -> set[str]:
        """Names of the cluster's topics (at least every static one; `gather` tells which are)."""
        ...

    def pull_physical(
        self,
        topic: str,
        bname: str,
        addr: str,
        queue: int,
        offset: int,
        max_messages: int,
        retry_timeout_s: float,
        include_properties: bool = True,
        until: int | None = None,
    ) -> PhysicalRead:
        """Messages of physical queue `bname/queue` from physical `offset` on. `until` (the planned
        end) lets a backend pull the next range ahead while the caller decodes this one."""
        ...

    def offset_for_timestamp(self, topic: str, queue: int, timestamp_ms: int) -> int:
        """The first logic offset of `queue` stored at or after `timestamp_ms`."""
        ...

    def commit_offset(self, group: str, topic: str, queue: int, offset: int) -> None: ...

    def committed_offset(self, group: str, topic: str, queue: int) -> int | None: ...

    def close(self) -> None: ...


def capabilities_of(namesrv: str | ClusterAddress) -> Capabilities:
    """What the backend of an address can do, without connecting to it."""
    address = namesrv if isinstance(namesrv, ClusterAddress) else parse_address(namesrv)
    if address.scheme == "rocketmq":
        from staticmq_spark.rocketmq.backend import RocketMQAccess

        return RocketMQAccess.capabilities
    from staticmq_spark.cluster.grpc_backend import StaticMQAccess

    return StaticMQAccess.capabilities


def open_cluster(namesrv: str | ClusterAddress, security: ClientSecurity = PLAIN) -> ClusterAccess:
    """The backend for an address: `rocketmq://…` is Apache RocketMQ, a plain list is staticmq.
    `security` signs every request (RocketMQ without credentials: ROCKETMQ_ACCESS_KEY /
    ROCKETMQ_SECRET_KEY) and, for staticmq, may ask for TLS."""
    address = namesrv if isinstance(namesrv, ClusterAddress) else parse_address(namesrv)
    if address.scheme == "rocketmq":
        from staticmq_spark.rocketmq.backend import RocketMQAccess
        from staticmq_spark.rocketmq.remoting import rocketmq_credentials

        return RocketMQAccess(address, credentials=rocketmq_credentials(security.credentials, security.tls_ca))
    from staticmq_spark.cluster.grpc_backend import StaticMQAccess

    return StaticMQAccess(address, security)
