"""The topic configuration value shared by broker, name server and clients, and its wire form."""

from __future__ import annotations

from dataclasses import dataclass

from staticmq_spark.protocol.pb import staticmq_pb2 as pb

PERM_READ = 4
PERM_WRITE = 2
PERM_READ_WRITE = PERM_READ | PERM_WRITE
ORDERS = ("", "strict", "best-tried")


@dataclass(frozen=True, slots=True)
class TopicConfig:
    name: str
    read_queues: int
    write_queues: int
    perm: int = PERM_READ_WRITE
    is_static: bool = False
    uid: int = 0
    order: str = ""
    total_queues: int = 0  # static topics: number of logic queues

    @property
    def readable(self) -> bool:
        return bool(self.perm & PERM_READ)

    @property
    def writable(self) -> bool:
        return bool(self.perm & PERM_WRITE)

    def to_pb(self) -> pb.TopicConfig:
        return pb.TopicConfig(
            name=self.name,
            read_queues=self.read_queues,
            write_queues=self.write_queues,
            perm=self.perm,
            is_static=self.is_static,
            uid=self.uid,
            order=self.order,
            total_queues=self.total_queues,
        )

    @staticmethod
    def from_pb(msg: pb.TopicConfig) -> TopicConfig:
        return TopicConfig(
            name=msg.name,
            read_queues=msg.read_queues,
            write_queues=msg.write_queues,
            perm=msg.perm,
            is_static=msg.is_static,
            uid=msg.uid,
            order=msg.order,
            total_queues=msg.total_queues,
        )
