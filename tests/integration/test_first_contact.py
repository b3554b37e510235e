"""First contact fails fast, a server that went away is retried: a read planned the way the Spark
source plans it (the backend's reader under `with_retries` for retryTimeoutMs = 120 s) against an
address that never answered this process fails within seconds naming the address and the likely
cause (TLS expected, nothing listening, a CA given to a plain server), on broker_stub and on Apache
RocketMQ; a broker that answered before and is killed with kill -9 is retried until it is back.
(tests/spark/test_wrong_address.py and test_rocketmq_acl.py show the same through Spark.)"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from staticmq_spark.backends import open_backend
from staticmq_spark.backends.retry import with_retries
from staticmq_spark.backends.types import PLAIN, BrokerState, ClientSecurity
from staticmq_spark.client import Admin, Producer
from staticmq_spark.errors import NameServerUnreachableError, TlsError
from staticmq_spark.local_clusters import LocalCluster
from staticmq_spark.local_clusters.ports import free_port
from staticmq_spark.local_clusters.rocketmq import LocalRocketMQ
from staticmq_spark.local_clusters.tls_files import TlsFiles, write_tls_files
from staticmq_spark.protocol.consume.pull_status import PullStatus
from tests.support.cli import staticmq

TOPIC = "orders"
RETRY_TIMEOUT_S = 120.0  # the source's default retryTimeoutMs
FAST_S = 10.0  # "within seconds": well under RETRY_TIMEOUT_S


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, TlsFiles]]:
    root = tmp_path_factory.mktemp("first-contact")
    tls = write_tls_files(root / "tls")
    with LocalCluster(1, root / "cluster", tls_cert=tls.cert, tls_key=tls.key, tls_ca=tls.ca) as cluster:
        # this process's TLS client answers first: a plain client of the same address must still fail fast
        with Admin(cluster.namesrv, **cluster.client_options) as admin:
            admin.update_static_topic(TOPIC, 2, cluster="DefaultCluster")
        yield cluster, tls


def plan(namesrv: str, security: ClientSecurity = PLAIN, topic: str = TOPIC) -> dict[str, BrokerState]:
    """Every broker's state of `topic`, retried as the Spark source's planning is."""
    backend = open_backend(namesrv, security)
    try:
        return with_retries("planning the read", lambda: backend.reader().gather(topic), RETRY_TIMEOUT_S)
    finally:
        backend.close()


def failing_fast(call: Callable[[], Any], error: type[Exception], match: str) -> float:
    started = time.monotonic()
    with pytest.raises(error, match=match):
        call()
    elapsed = time.monotonic() - started
    assert elapsed < FAST_S, f"{elapsed:.1f} s: retried as a broker that went away"
    return elapsed


def test_reading_a_tls_cluster_without_the_ca_fails_in_seconds_naming_tls(
    tls_cluster: tuple[LocalCluster, TlsFiles],
) -> None:
    ns = tls_cluster[0].namesrv
    failing_fast(
        lambda: plan(ns),
        NameServerUnreachableError,
        rf"no name server at {ns} has answered: the server at {ns} closed the connection before answering: "
        r"does it expect TLS \(the tlsCaFile option",
    )
    assert set(plan(ns, ClientSecurity.of(None, tls_cluster[1].ca))) == {"broker-0"}


def test_the_cli_without_the_ca_names_tls_too(tls_cluster: tuple[LocalCluster, TlsFiles]) -> None:
    ns = tls_cluster[0].namesrv
    started = time.monotonic()
    out = staticmq("pull", "-n", ns, "-t", TOPIC, "--from", "earliest")
    assert out.returncode != 0
    assert "closed the connection before answering: does it expect TLS" in out.stdout + out.stderr
    assert time.monotonic() - started < FAST_S + 10  # a Python start and its imports besides


def test_a_ca_given_for_a_plain_cluster_fails_in_seconds_as_a_tls_error(
    staticmq_session_cluster: LocalCluster, tls_cluster: tuple[LocalCluster, TlsFiles]
) -> None:
    ns = staticmq_session_cluster.namesrv
    with_ca = ClientSecurity.of(None, tls_cluster[1].ca)
    failing_fast(lambda: plan(ns, with_ca), TlsError, rf"the TLS handshake with {ns} failed \(WRONG_VERSION_NUMBER")


def test_a_wrong_port_fails_in_seconds_naming_the_address() -> None:
    wrong = f"127.0.0.1:{free_port()}"  # nothing listens there
    failing_fast(
        lambda: plan(wrong),
        NameServerUnreachableError,
        rf"no name server at {wrong} has answered: connection refused: nothing listens at {wrong}",
    )


def test_a_wrong_rocketmq_port_fails_in_seconds_naming_the_address() -> None:
    wrong = f"127.0.0.1:{free_port()}"  # nothing listens there
    failing_fast(
        lambda: plan(f"rocketmq://{wrong}"),
        NameServerUnreachableError,
        rf"no RocketMQ name server at {wrong} has answered: connection refused: nothing listens at {wrong}",
    )


def _read_after_a_kill(
    namesrv: str, topic: str, broker: str, kill: Callable[[], None], restart: Callable[[], None]
) -> float:
    """Reads `broker`'s first physical queue with messages, kills the broker, reads the queue again
    in a thread with the source's retryTimeoutMs while the broker is started again: the read waits
    for the broker (retried, not failed fast: its address answered this process). Returns how long
    the read took."""
    backend = open_backend(namesrv, PLAIN)
    try:
        reader = backend.reader()
        state = with_retries("planning", lambda: reader.gather(topic), RETRY_TIMEOUT_S)[broker]
        queue = next(q for q, b in sorted(state.physical.items()) if b.max_offset > b.min_offset)
        start = state.physical[queue].min_offset
        before = reader.pull_physical(topic, broker, state.addr, queue, start, 10, RETRY_TIMEOUT_S)
        assert before.status is PullStatus.FOUND
        kill()
        with ThreadPoolExecutor(1) as pool:
            started = time.monotonic()
            after = pool.submit(reader.pull_physical, topic, broker, state.addr, queue, start, 10, RETRY_TIMEOUT_S)
            time.sleep(1.0)
            assert not after.done(), f"the read did not wait for the broker: {after.result()}"
            restart()
            read = after.result()
        assert read.status is PullStatus.FOUND and read.next_offset == before.next_offset
        return time.monotonic() - started
    finally:
        backend.close()


def test_a_broker_that_answered_and_was_killed_is_retried_until_it_is_back(
    local_cluster: Callable[..., LocalCluster], unique_topic: Callable[[str], str]
) -> None:
    c = local_cluster(brokers=2)
    topic = unique_topic("first-contact")
    with Admin(c.namesrv) as admin:
        admin.update_static_topic(topic, 4, cluster="DefaultCluster")
    with Producer(c.namesrv) as producer:
        producer.send_batch(topic, [f"m{i}" for i in range(40)], keys=[f"k{i}" for i in range(40)])

    waited = _read_after_a_kill(
        c.namesrv, topic, "broker-1", lambda: c.kill_broker("broker-1"), lambda: c.start_broker("broker-1")
    )
    assert waited >= 1.0


@pytest.mark.slow
def test_a_rocketmq_broker_that_answered_and_was_killed_is_retried_until_it_is_back(
    rocketmq_cluster: LocalRocketMQ,
) -> None:
    c = rocketmq_cluster
    topic = f"first-contact-{int(time.time() * 1000) % 100000}"
    victim = sorted(c.broker_names)[-1]
    c.update_static_topic(topic, 2, [victim])
    with Producer(c.address) as producer:
        producer.send_batch(topic, [f"m{i}" for i in range(40)], keys=[f"k{i}" for i in range(40)])

    def restart() -> None:
        c.start_broker(victim)
        c.wait_registered()

    waited = _read_after_a_kill(c.address, topic, victim, lambda: c.kill(victim), restart)
    assert waited >= 1.0
