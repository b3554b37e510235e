"""TopicConfig on the wire (staticmq.proto's TopicConfig), both ways."""

from __future__ import annotations

from staticmq_spark.protocol.pb import staticmq_pb2 as pb
from staticmq_spark.protocol.topics.config import TopicConfig


def config_to_pb(cfg: TopicConfig) -> pb.TopicConfig:
    return pb.TopicConfig(
        name=cfg.name,
        read_queues=cfg.read_queues,
        write_queues=cfg.write_queues,
        perm=cfg.perm,
        is_static=cfg.is_static,
        uid=cfg.uid,
        order=cfg.order,
        total_queues=cfg.total_queues,
    )


def config_from_pb(msg: pb.TopicConfig) -> TopicConfig:
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
