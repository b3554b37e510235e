"""Read-ahead for remote reads of fenced segments: when a pull of another broker's finished
segment comes back full, the next chunk is requested at once, so a sequential reader does not
wait for a second broker-to-broker round trip on every pull. Only fenced segments (whose end is
set) are read ahead: their data never changes, so a prefetched answer is always still right."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable

import grpc

from staticmq_spark.protocol.pb import staticmq_pb2 as pb

MAX_ENTRIES = 16  # about 16 pull answers (~20 MB) at most
TTL_S = 10.0

Key = tuple[str, str, int, int, int, int]  # broker, topic, queue, offset, max messages, max bytes


class ReadAhead:
    def __init__(self, start_pull: Callable[[str, pb.PullRequest], grpc.Future[pb.PullResponse]]) -> None:
        self._start_pull = start_pull
        self._lock = threading.Lock()
        self._pending: OrderedDict[Key, tuple[float, grpc.Future[pb.PullResponse]]] = OrderedDict()

    def take(self, key: Key) -> pb.PullResponse | None:
        """The prefetched answer for exactly this request, if one was started and succeeded."""
        with self._lock:
            entry = self._pending.pop(key, None)
        if entry is None or time.monotonic() - entry[0] > TTL_S:
            return None
        try:
            answer: pb.PullResponse = entry[1].result()
        except grpc.RpcError:
            return None  # the caller pulls again itself and gets the error, if it persists
        return answer

    def start(self, key: Key) -> None:
        bname, topic, queue, offset, max_messages, max_bytes = key
        request = pb.PullRequest(
            topic=topic, queue_id=queue, offset=offset, max_messages=max_messages, max_bytes=max_bytes, physical=True
        )
        future = self._start_pull(bname, request)
        with self._lock:
            self._pending[key] = (time.monotonic(), future)
            while len(self._pending) > MAX_ENTRIES:
                _, (_, old) = self._pending.popitem(last=False)
                old.cancel()
