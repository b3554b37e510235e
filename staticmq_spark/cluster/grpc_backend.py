"""The staticmq backend of the cluster-access layer: broker_stub's gRPC protocol."""

from __future__ import annotations

import logging

from staticmq_spark.client.admin import Admin
from staticmq_spark.client.pull_consumer import PullConsumer
from staticmq_spark.client.rpc import Channels, invoke
from staticmq_spark.cluster.access import Capabilities, PhysicalRead
from staticmq_spark.cluster.address import ClusterAddress
from staticmq_spark.cluster.messages import packed_columns
from staticmq_spark.cluster.retry import retry_read
from staticmq_spark.cluster.state import BrokerState
from staticmq_spark.cluster.status import PullStatus
from staticmq_spark.errors import StaticMQError
from staticmq_spark.protocol.channels import PLAIN, ClientSecurity
from staticmq_spark.protocol.pb import staticmq_pb2 as pb

log = logging.getLogger(__name__)


class StaticMQAccess:
    capabilities = Capabilities(two_phase_staging=True, pop=True)

    def __init__(self, address: ClusterAddress, security: ClientSecurity = PLAIN) -> None:
        self.address = address
        self.admin = Admin(str(address), wait_for_ready=False, channels=Channels(security))
        self._consumers: dict[str, PullConsumer] = {}
        self._addrs: dict[str, str] = {}

    def _consumer(self, group: str = "") -> PullConsumer:
        consumer = self._consumers.get(group)
        if consumer is None:
            consumer = self._consumers[group] = PullConsumer(
                str(self.address), group=group, channels=self.admin.channels
            )
        return consumer

    def gather(self, topic: str) -> dict[str, BrokerState]:
        return self.admin.static.gather(topic)

    def topic_names(self) -> set[str]:
        """The static topics any live broker holds (its topic configs say which are static)."""
        names: set[str] = set()
        for broker in self.admin.cluster_info():
            names.update(cfg.name for cfg in self.admin.topic_configs(broker.addr) if cfg.is_static)
        return names

    def offset_for_timestamp(self, topic: str, queue: int, timestamp_ms: int) -> int:
        return self._consumer().offset_for_timestamp(topic, queue, timestamp_ms)

    def commit_offset(self, group: str, topic: str, queue: int, offset: int) -> None:
        self._consumer(group).commit(topic, queue, offset)

    def committed_offset(self, group: str, topic: str, queue: int) -> int | None:
        return self._consumer(group).committed(topic, queue)

    def _addr(self, bname: str, planned: str, refresh: bool) -> str:
        if refresh or bname not in self._addrs:
            try:
                self._addrs.update({b.name: b.addr for b in self.admin.cluster_info()})
            except StaticMQError as exc:
                log.debug("cluster info unavailable: %s", exc.message)
        return self._addrs.get(bname, planned)

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
        request = pb.PullRequest(topic=topic, queue_id=queue, offset=offset, max_messages=max_messages, physical=True)

        def attempt(n: int) -> pb.PullResponse:
            target = self._addr(bname, addr, refresh=n > 0)
            return invoke(bname, self.admin.channels.broker(target).Pull, request, 30, wait_for_ready=False)

        resp = retry_read(f"reading {topic} queue {queue} on {bname}", retry_timeout_s, attempt)
        return _physical_read(resp, include_properties)

    def close(self) -> None:
        for consumer in self._consumers.values():
            consumer.close()
        self.admin.close()


def _physical_read(resp: pb.PullResponse, include_properties: bool) -> PhysicalRead:
    status = PullStatus(resp.status)
    if status is not PullStatus.FOUND:
        return PhysicalRead(status, resp.next_offset, None)
    return PhysicalRead(status, resp.next_offset, packed_columns(resp, properties=include_properties))
