"""Ordered lanes: the machinery of `Producer.send_batch_async`, with no wire in it.

A lane is one logic queue of one topic. Jobs of one lane run one at a time in the order they were
submitted; jobs of different lanes run at once on a shared pool of threads (a lane gives its thread
back after each job, so a busy lane cannot starve the others). When a job fails, the jobs already
waiting behind it in its lane are not run: each fails with `NotSentError`, because sending them
would store later rows of the queue before the failed ones a caller will retry. Jobs submitted after
the failure was reported run as usual. `submit` blocks while `max_pending` jobs are queued or running
(back-pressure: what waits is bounded, not the caller's memory).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from staticmq_spark.errors import InvalidArgumentError, NotSentError, StaticMQError

T = TypeVar("T")


class OrderedLanes:
    def __init__(self, *, workers: int = 8, max_pending: int = 64, name: str = "staticmq-lane") -> None:
        if max_pending < 1:
            raise InvalidArgumentError(f"max_pending must be at least 1, got {max_pending}")
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name)
        self._lanes: dict[Hashable, deque[tuple[Future[Any], Callable[[], Any]]]] = {}
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._room = threading.Semaphore(max_pending)
        self._pending = 0
        self._closed = False

    def submit(self, lane: Hashable, job: Callable[[], T]) -> Future[T]:
        """Queue `job` at the end of `lane`; its Future holds what it returned or raised."""
        self._room.acquire()
        future: Future[T] = Future()
        with self._lock:
            if self._closed:
                self._room.release()
                raise InvalidArgumentError("this producer is closed")
            self._pending += 1
            jobs = self._lanes.get(lane)
            start = jobs is None
            if jobs is None:
                jobs = self._lanes[lane] = deque()
            jobs.append((future, job))
        if start:  # no job of this lane is under way: start it; else its drain picks this one up
            self._pool.submit(self._run_next, lane)
        return future

    def wait(self, timeout_s: float | None = None) -> int:
        """Wait until no job is pending or `timeout_s` passed; returns the jobs still pending."""
        with self._idle:
            self._idle.wait_for(lambda: self._pending == 0, timeout_s)
            return self._pending

    def close(self) -> None:
        """Refuse new jobs, run the pending ones to their end, stop the threads."""
        with self._lock:
            self._closed = True
        self.wait()
        self._pool.shutdown(wait=True)

    def _run_next(self, lane: Hashable) -> None:
        with self._lock:
            future, job = self._lanes[lane][0]
        failure: BaseException | None = None
        result: Any = None
        if future.set_running_or_notify_cancel():  # False: the caller cancelled it before it ran
            try:
                result = job()
            except BaseException as exc:  # handed to the caller through the Future
                failure = exc
        with self._lock:  # the lane moves on before the Future resolves: what a caller submits
            jobs = self._lanes[lane]  # once it has seen the outcome is not "behind" the job
            jobs.popleft()
            behind = [waiting for waiting, _ in jobs] if failure is not None else []
            if behind:
                jobs.clear()
            more = bool(jobs)
            if not more:
                del self._lanes[lane]
        if failure is None:
            self._finish([future], lambda f: f.set_result(result) if f.running() else None)
        else:
            self._finish([future], lambda f: f.set_exception(failure))
        if behind:
            cause = failure if isinstance(failure, StaticMQError) else None
            reason = f"{cause.code}: {cause.message}" if cause is not None else repr(failure)
            error = NotSentError(f"not sent: an earlier request to the same logic queue failed ({reason})")
            self._finish(behind, lambda f: f.set_exception(error) if f.set_running_or_notify_cancel() else None)
        if more:
            self._pool.submit(self._run_next, lane)  # the lane's next job, behind other lanes' work

    def _finish(self, futures: list[Future[Any]], resolve: Callable[[Future[Any]], object]) -> None:
        """Free the jobs' places, resolve their Futures, then count them done: a callback may submit
        (there is room), and `wait` returns only once every Future it waited for is resolved."""
        for _ in futures:
            self._room.release()
        for future in futures:
            resolve(future)
        with self._idle:
            self._pending -= len(futures)
            self._idle.notify_all()
