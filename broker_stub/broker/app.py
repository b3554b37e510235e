"""One broker: wires its data directory, store, services and name-server registration together.

Data directory layout:
    broker.json                    which broker owns the directory
    config/topics.json             topic configs
    config/consumer_offsets.json   committed group offsets
    config/mappings/<topic>.json   TopicQueueMapping copies (static topics), apart from topic configs
    store/commitlog/, store/consumequeue/, store/checkpoint.json
    pop/secret.key, pop/checkpoint.json   receipt-handle secret, where the revive log replays from
"""

from __future__ import annotations

import logging
import threading
import time

from broker_stub.broker.consumption import Consumption
from broker_stub.broker.long_poll import ArrivalNotifier
from broker_stub.broker.message_service import MessageService
from broker_stub.broker.peers import Peers
from broker_stub.broker.registration import Registration
from broker_stub.broker.segment_access import SegmentAccess
from broker_stub.broker.sink_service import SinkService
from broker_stub.broker.static_topic_service import StaticTopicService
from broker_stub.broker.topic_service import TopicService
from broker_stub.config import BrokerConfig
from broker_stub.store.consumer_offsets import ConsumerOffsets
from broker_stub.store.identity import claim_data_dir
from broker_stub.store.mapping_files import MappingFiles
from broker_stub.store.message_store import MessageStore
from broker_stub.store.topic_configs import TopicConfigs
from staticmq_spark.protocol.pb import staticmq_pb2 as pb
from staticmq_spark.protocol.security.auth import PLAIN, ClientSecurity
from staticmq_spark.protocol.topics.names import validate_broker_name
from staticmq_spark.protocol.wire.topic_config import config_to_pb

log = logging.getLogger(__name__)


class BrokerApp:
    def __init__(self, config: BrokerConfig, client_security: ClientSecurity = PLAIN) -> None:
        validate_broker_name(config.name)
        claim_data_dir(config.data_dir, config.name)
        self.config = config
        self.name = config.name
        self.addr = ""
        self.start_timestamp = int(time.time() * 1000)
        self.notifier = ArrivalNotifier()
        self.topic_configs = TopicConfigs(config.data_dir / "config" / "topics.json")
        self.offsets = ConsumerOffsets(config.data_dir / "config" / "consumer_offsets.json")
        self.store = MessageStore(config.data_dir / "store", config.store, on_arrival=self.notifier.notify)
        self.topics = TopicService(self.topic_configs, self.store, self.offsets)
        self.messages = MessageService(config, self.topics, self.store, self.notifier)
        self.mapping_files = MappingFiles(config.data_dir / "config" / "mappings", config.name)
        self.client_security = client_security
        self.peers = Peers(config.namesrv, security=client_security)
        access = SegmentAccess(config.name, self.messages, self.store, self.offsets, self.peers)
        self.static = StaticTopicService(
            config.name, self.mapping_files, self.topic_configs, self.store, self.offsets, self.messages, access
        )
        self.consumption = Consumption(
            config,
            topics=self.topics,
            store=self.store,
            offsets=self.offsets,
            messages=self.messages,
            static=self.static,
            mappings=self.mapping_files,
            peers=self.peers,
            notifier=self.notifier,
            topics_changed=self.topics_changed,
        )
        self.sink = SinkService(
            config.name, config, self.store, self.static, self.mapping_files, self.topic_configs, self.peers
        )
        self._registration: Registration | None = None
        self._stop = threading.Event()
        self._offsets_thread = threading.Thread(target=self._persist_offsets, name="offsets", daemon=True)

    def open(self) -> None:
        """Load configs and recover the store (before serving)."""
        self.topic_configs.load()
        self.mapping_files.load()
        self.offsets.load()
        started = time.monotonic()
        self.store.open(self.topic_configs.uids())
        log.info("broker %s: store recovered in %.2fs", self.name, time.monotonic() - started)
        self.store.start()
        self.consumption.open()
        self._offsets_thread.start()

    def serve_at(self, addr: str) -> None:
        """Called once the gRPC server listens: start heartbeats to the name server."""
        self.addr = addr
        self._registration = Registration(
            self.config.namesrv, self.config.heartbeat_interval_ms / 1000, self.register_request, self.client_security
        )
        self._registration.start()

    def topics_changed(self) -> None:
        """Tell the name server at once, so a topic is routable when its admin call returns."""
        if self._registration is not None:
            self._registration.heartbeat_once()

    def register_request(self) -> pb.RegisterBrokerRequest:
        entries = [
            pb.TopicRouteEntry(config=config_to_pb(cfg)) for cfg in self.topic_configs.all() if not cfg.is_static
        ]
        entries += self.static.route_entries()
        return pb.RegisterBrokerRequest(
            name=self.name,
            cluster=self.config.cluster,
            addr=self.addr,
            topics=entries,
            start_timestamp=self.start_timestamp,
        )

    def _persist_offsets(self) -> None:
        interval = self.config.store.checkpoint_interval_ms / 1000
        while not self._stop.wait(interval):
            try:
                self.offsets.persist()
            except OSError:
                log.exception("persisting consumer offsets failed")

    def committed_offsets(self) -> list[tuple[str, str, int, int]]:
        """(group, topic, physical queue, offset) of every commit stored here."""
        return [(e.group, e.topic, e.queue_id, e.offset) for e in self.offsets.list()]

    def physical_max_offset(self, topic: str, queue_id: int) -> int | None:
        if queue_id not in self.store.queues_of(topic):
            return None
        return self.store.offsets(topic, queue_id)[1]

    def close(self) -> None:
        self._stop.set()
        if self._registration is not None:
            self._registration.stop(unregister_name=self.name)
        self.notifier.notify_all()
        self.consumption.close()
        self.offsets.persist()
        self.peers.close()
        self.store.close()
