"""Which static topics a query reads: the `topic` list, or every static topic whose name matches
`topicPattern` (checked again at every trigger, so a topic created while the query runs is read
from its earliest offset, as Spark's Kafka source does with new partitions)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

from staticmq_spark.backends import ClusterReader
from staticmq_spark.errors import DataLossError, InvalidOptionError, TopicNotFoundError
from staticmq_spark.source.live_brokers import LiveBrokers
from staticmq_spark.source.options import SourceOptions
from staticmq_spark.source.snapshot import TopicSnapshot, take_snapshot

log = logging.getLogger(__name__)
Snapshots = dict[str, TopicSnapshot]
RECHECK_PLAIN_S = 60.0  # a matching topic that is not static is looked at again after this long


class Subscription:
    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self._plain: dict[str, float] = {}  # matching topics that are not static -> when seen
        self.live = LiveBrokers()  # the brokers each trigger asks (live_brokers)

    def snapshots(self, access: ClusterReader, known: Iterable[str] = ()) -> Snapshots:
        """A snapshot of every subscribed topic. `known`: topics the query already has offsets for;
        with a pattern, one that is gone fails the query (failOnDataLoss) or is dropped."""
        if self.opts.topics:
            return {t: take_snapshot(access, t, self.live) for t in self.opts.topics}
        known = set(known)
        names = {t for t in access.topic_names() if self.opts.subscribes(t)} | known
        out: Snapshots = {}
        now = time.monotonic()
        for topic in sorted(names):
            if now - self._plain.get(topic, -RECHECK_PLAIN_S) < RECHECK_PLAIN_S:
                continue
            try:
                out[topic] = take_snapshot(access, topic, self.live)
            except (TopicNotFoundError, InvalidOptionError) as exc:
                if topic in known:
                    self._gone(topic, exc)
                else:
                    log.info("topicPattern %r matches %r, which is skipped: %s", self.opts.pattern, topic, exc)
                    self._plain[topic] = now
        if not out and not known:
            raise TopicNotFoundError(f"no static topic matches topicPattern {self.opts.pattern!r}")
        return out

    def _gone(self, topic: str, exc: Exception) -> None:
        message = f"topic {topic!r}, which the query was reading (topicPattern {self.opts.pattern!r}), is gone: {exc}"
        if self.opts.fail_on_data_loss:
            raise DataLossError(message + " (failOnDataLoss=true; set failOnDataLoss=false to go on without it)")
        log.warning("%s; going on without it (failOnDataLoss=false)", message)
