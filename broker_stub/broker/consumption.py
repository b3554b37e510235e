"""Shared (pop) and exclusive consumption of one broker, wired together: recovery of the pop
state on open, the revive and checkpoint threads, and a clean stop.

Files: pop/secret.key (the receipt-handle secret), pop/checkpoint.json (where a restart replays
the revive log from); the revive log itself is the internal topic rmq_sys_REVIVE_LOG.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from broker_stub.broker.exclusive.exclusive_service import ExclusiveService
from broker_stub.broker.long_poll import ArrivalNotifier
from broker_stub.broker.message_service import MessageService
from broker_stub.broker.peers import Peers
from broker_stub.broker.pop.ack_service import AckService
from broker_stub.broker.pop.pop_service import PopService
from broker_stub.broker.pop.pop_state import PopState
from broker_stub.broker.pop.receipt_handles import HandleSigner, load_or_create_secret
from broker_stub.broker.pop.requeue import Requeue
from broker_stub.broker.pop.revive_log import ReviveLog
from broker_stub.broker.pop.revive_service import ReviveService
from broker_stub.broker.pop.sources import PopSources
from broker_stub.broker.static_topic_service import StaticTopicService
from broker_stub.broker.topic_service import TopicService
from broker_stub.config import BrokerConfig
from broker_stub.store.consumer_offsets import ConsumerOffsets
from broker_stub.store.mapping_files import MappingFiles
from broker_stub.store.message_store import MessageStore
from staticmq_spark.errors import StaticMQError

log = logging.getLogger(__name__)


class Consumption:
    def __init__(
        self,
        config: BrokerConfig,
        *,
        topics: TopicService,
        store: MessageStore,
        offsets: ConsumerOffsets,
        messages: MessageService,
        static: StaticTopicService,
        mappings: MappingFiles,
        peers: Peers,
        notifier: ArrivalNotifier,
        topics_changed: Callable[[], None],
    ) -> None:
        self._pop_dir = config.data_dir / "pop"
        self._interval_s = config.store.checkpoint_interval_ms / 1000
        self.revive_log = ReviveLog(store, topics, self._pop_dir)
        self.state = PopState(self.revive_log)
        self.sources = PopSources(config.name, topics, store, mappings, static, offsets, peers)
        self._requeue = Requeue(topics, store, topics_changed)
        self._notifier = notifier
        self._config = config
        self.exclusive = ExclusiveService(config.name, topics, messages, static, offsets, mappings)
        self._signer: HandleSigner | None = None
        self._pop: PopService | None = None
        self._acks: AckService | None = None
        self._revive: ReviveService | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._checkpoints, name="pop-checkpoint", daemon=True)

    @property
    def pop(self) -> PopService:
        assert self._pop is not None, "Consumption.open() was not called"
        return self._pop

    @property
    def acks(self) -> AckService:
        assert self._acks is not None, "Consumption.open() was not called"
        return self._acks

    def open(self) -> None:
        """Recover the pop state from the revive log (the store is open) and start the threads."""
        cfg = self._config
        self._signer = HandleSigner(load_or_create_secret(self._pop_dir / "secret.key"))
        self.revive_log.open()
        with self.state.lock:
            self.state.recover()
            moves = self.state.take_offset_moves()
        for m in moves:
            try:
                self.sources.commit(m.group, m.topic, m.queue_id, m.offset)
            except StaticMQError as exc:
                log.warning("recovered pop offset of %s queue %d not committed: %s", m.topic, m.queue_id, exc.message)
        self._pop = PopService(
            self.state,
            self.sources,
            self._signer,
            self._notifier,
            self._requeue,
            max_reconsume_times=cfg.pop_max_reconsume_times,
            max_long_poll_ms=cfg.max_long_poll_ms,
        )
        self._acks = AckService(self.state, self.sources, self._signer, self._notifier)
        self._revive = ReviveService(
            self.state,
            self.sources,
            self._requeue,
            self._notifier,
            max_reconsume_times=cfg.pop_max_reconsume_times,
            buffer_merge=cfg.pop_buffer_merge,
            interval_ms=cfg.pop_revive_interval_ms,
            margin_ms=cfg.pop_revive_margin_ms,
        )
        self._revive.start()
        self._thread.start()

    def checkpoint(self) -> None:
        """Record where a restart replays from (every CK before it is finished)."""
        with self.state.lock:
            data = self.state.snapshot()
            end = self.state.last_end_pos
        self.revive_log.wait_durable(end)
        self.revive_log.save_checkpoint(data)

    def _checkpoints(self) -> None:
        while not self._stop.wait(self._interval_s):
            try:
                self.checkpoint()
            except Exception:
                log.exception("pop checkpoint failed")

    def close(self) -> None:
        self._stop.set()
        if self._revive is not None:
            self._revive.stop()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        if self._signer is not None:
            self.checkpoint()
