"""Reading static topics from Apache RocketMQ over its remoting protocol: every broker's mapping,
physical pulls with one read-ahead per queue, offsets by time and group offsets."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import TypeVar

from staticmq_spark.backends.read_ahead import ReadAhead
from staticmq_spark.backends.retry import retry_read
from staticmq_spark.backends.rocketmq.client_instance import RocketMQClientInstance
from staticmq_spark.backends.rocketmq.wire.codes import RequestCode, ResponseCode
from staticmq_spark.backends.rocketmq.wire.remoting import PullAnswer, RocketMQError, check_answer
from staticmq_spark.backends.rocketmq.wire.routes import TopicRoute
from staticmq_spark.backends.types import BrokerState, Capabilities, PhysicalBounds, PhysicalRead
from staticmq_spark.errors import AccessDeniedError, BrokerUnavailableError, StaticMQError
from staticmq_spark.mapping import Chain
from staticmq_spark.protocol.consume.pull_status import PullStatus

log = logging.getLogger(__name__)
T = TypeVar("T")


class RocketMQReader:
    """Reads segments physically (`lo=false`) the way RocketMQ's brokers forward to each other:
    the driver resolves logic offsets through every broker's TopicQueueMappingDetail."""

    capabilities = Capabilities(two_phase_staging=True, pop=True, exclusive=True)

    def __init__(self, instance: RocketMQClientInstance) -> None:
        """`instance`: the backend's client instance (connections, ACL keys, routes)."""
        self.address = instance.address
        self.instance = instance
        self.client = instance.remoting
        self._known_groups: set[str] = set()  # groups ensure_group was run for
        self._ahead: ReadAhead[Callable[[], PullAnswer]] = ReadAhead()
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="rocketmq-gather")

    # ---------------------------------------------------------------- metadata

    def masters(self, refresh: bool = False) -> dict[str, str]:
        return self.instance.brokers(refresh)

    def route(self, topic: str, refresh: bool = False) -> TopicRoute:
        return self.instance.route(topic, refresh)

    def topic_names(self) -> set[str]:
        return self.client.topic_names()

    def live_brokers(self) -> dict[str, str]:
        return dict(self.masters(refresh=True))

    def gather(self, topic: str, brokers: Mapping[str, str] | None = None) -> dict[str, BrokerState]:
        masters = self.masters(refresh=True) if brokers is None else brokers
        names = sorted(masters)
        found = [s for s in self._pool.map(lambda n: self._broker_state(topic, n, masters[n]), names) if s]
        return {s.name: s for s in fence_segments(found)}

    def _broker_state(self, topic: str, name: str, addr: str) -> BrokerState | None:
        try:
            found = self.client.topic_config(addr, topic)
        except BrokerUnavailableError as exc:
            log.warning("broker %s (%s) is unreachable: %s", name, addr, exc.message)
            return None
        if found is None:
            return BrokerState(name, addr, None, "", None, {})
        config, mapping = found
        queues: set[int] = set(range(config.write_queues))
        if mapping is not None:
            queues |= {i.queue for chain in mapping.hosted.values() for i in chain if i.bname == name}
        bounds = self.client.physical_bounds(addr, topic, sorted(queues))
        physical = {q: PhysicalBounds(lo, hi) for q, (lo, hi) in bounds.items()}
        return BrokerState(name, addr, mapping, "", config, physical)

    # ---------------------------------------------------------------- reads

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
        subscription: str = "",
    ) -> PhysicalRead:
        ahead = None if subscription else self._ahead.take((topic, bname, queue, offset))
        target = self.instance.known_master(bname) or addr

        def attempt(n: int) -> PullAnswer:
            nonlocal target
            if n == 0 and ahead is not None:
                return ahead()
            if n > 0:
                target = self.masters(refresh=True).get(bname, addr)
            return self.client.pull(
                target, topic, queue, offset, max_messages, logic=False, bname=bname, subscription=subscription
            )

        answer = retry_read(f"reading {topic} queue {queue} on {bname}", retry_timeout_s, attempt)
        if answer.status is not PullStatus.FOUND:
            return PhysicalRead(answer.status, answer.next_offset, None)
        if until is not None and offset < answer.next_offset < until and not subscription:
            self._pull_ahead(
                topic, bname, target, queue, answer.next_offset, min(max_messages, until - answer.next_offset)
            )
        # imported here: only read tasks decode (Arrow kernels)
        from staticmq_spark.backends.rocketmq.wire.stored_messages import decode_stored

        stored = decode_stored(answer.body, properties=include_properties)
        return PhysicalRead(answer.status, answer.next_offset, stored)

    def _pull_ahead(self, topic: str, bname: str, addr: str, queue: int, offset: int, count: int) -> None:
        """Send the next pull of a planned range now; its answer arrives while this one is decoded."""
        try:
            waiter = self.client.submit_pull(addr, topic, queue, offset, count, logic=False, bname=bname)
        except StaticMQError:
            return  # the next pull_physical asks again, with retries
        self._ahead.put((topic, bname, queue, offset), waiter)

    def on_leader(self, topic: str, queue: int, call: Callable[[str, str], T], timeout_s: float = 10.0) -> T:
        """`call(bname, addr)` on the logic queue's leader (RocketMQClientInstance.on_leader)."""
        return self.instance.on_leader(topic, queue, call, timeout_s)

    def offset_for_timestamp(self, topic: str, queue: int, timestamp_ms: int) -> int:
        return int(self.on_leader(topic, queue, lambda b, a: self.client.search_offset(a, topic, queue, timestamp_ms)))

    def min_offset(self, topic: str, queue: int) -> int:
        return int(self.on_leader(topic, queue, lambda b, a: self.client.min_offset(a, topic, queue)))

    def max_offset(self, topic: str, queue: int) -> int:
        return int(self.on_leader(topic, queue, lambda b, a: self.client.max_offset(a, topic, queue)))

    # ---------------------------------------------------------------- group offsets

    def commit_offset(self, group: str, topic: str, queue: int, offset: int) -> None:
        """Commit the group's logic offset at the queue's leader; the first commit of a group makes
        it known first (ensure_group), without making this client a member of it."""
        if group not in self._known_groups:
            self.ensure_group(group)

        def commit(bname: str, addr: str) -> None:
            try:
                self.client.update_consumer_offset(addr, group, topic, queue, offset)
            except RocketMQError as exc:
                if exc.response_code != ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST:
                    raise
                try:
                    self.create_group(group)
                except AccessDeniedError:
                    # keys without the right to create groups: a pull naming the group makes it on
                    # a broker that creates groups on first use (autoCreateSubscriptionGroup, the
                    # default), as a consumer's heartbeat would, but without making this a member
                    self.client.pull(addr, topic, queue, offset, 1, logic=True, group=group, bname=bname)
                self.client.update_consumer_offset(addr, group, topic, queue, offset)

        self.on_leader(topic, queue, commit)

    def committed_offset(self, group: str, topic: str, queue: int) -> int | None:
        found = self.on_leader(topic, queue, lambda b, a: self.client.query_consumer_offset(a, group, topic, queue))
        return None if found is None else int(found)

    def ensure_group(self, group: str) -> None:
        """Make the group known on every master without a member: its subscription group (RocketMQ
        stores offsets only for known groups) and its %RETRY% topic (`mqadmin consumerProgress`
        finds a group's brokers by that topic's route). A consumer heartbeat would make both, but
        would also list this client among the group's consumers, and RocketMQ's orderly consumers
        and staticmq's exclusive ones would then allocate it queues that nobody reads. Best effort:
        a broker that refuses (e.g. a user without the right to create them) is logged, and a
        commit it then refuses says why."""
        self._known_groups.add(group)  # once per reader: a group missing later is made by the commit
        try:
            self.create_group(group)
            for name, addr in self.masters().items():
                resp = self.client.call(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, _retry_topic(group))
                if resp.code != ResponseCode.SUCCESS:
                    raise RocketMQError(f"creating %RETRY%{group} on {name} failed: {resp.remark}", resp.code)
        except StaticMQError as exc:
            log.warning("making group %s known to the brokers: %s", group, exc.message)

    def create_group(self, group: str) -> None:
        """The subscription group on every master (RocketMQ stores offsets only for known groups)."""
        body = json.dumps({"groupName": group, "consumeEnable": True, "consumeFromMinEnable": True}).encode()
        for name, addr in self.masters(refresh=True).items():
            resp = self.client.call(addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, body)
            check_answer(resp, f"creation of group {group!r} on {name}")  # AccessDeniedError: no right

    def close(self) -> None:
        self._pool.shutdown(wait=False)  # the connections are the backend's


def _retry_topic(group: str) -> dict[str, object]:
    """UPDATE_AND_CREATE_TOPIC's header of the group's %RETRY% topic, as a heartbeat makes it."""
    return {
        "topic": f"%RETRY%{group}",
        "defaultTopic": "TBW102",
        "readQueueNums": 1,
        "writeQueueNums": 1,
        "perm": 6,
        "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": 0,
        "order": False,
    }


def fence_segments(states: list[BrokerState]) -> list[BrokerState]:
    """RocketMQ never writes an item's endOffset (it stays -1): an item that no longer leads ends at
    its physical queue's max offset, which is final because only the leader accepts sends."""
    maxima = {(s.name, q): o.max_offset for s in states for q, o in s.physical.items()}
    out = []
    for state in states:
        if state.mapping is None:
            out.append(state)
            continue
        hosted = {q: _fenced(chain, maxima) for q, chain in state.mapping.hosted.items()}
        out.append(replace(state, mapping=state.mapping.with_chains(state.mapping.epoch, hosted)))
    return out


def _fenced(chain: Chain, maxima: dict[tuple[str, int], int]) -> Chain:
    items = list(chain)
    for i, item in enumerate(items[:-1]):
        end = maxima.get((item.bname, item.queue))
        if item.end_offset < 0 and end is not None:
            items[i] = replace(item, end_offset=max(end, item.start_offset))
    return tuple(items)
