"""Prometheus metrics: every broker and the name server serve /metrics on their own port, listed
in the cluster's ready information; traffic shows up per topic and per request type."""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path

from staticmq_spark.client import Admin, Producer, PullConsumer
from staticmq_spark.local_clusters import LocalCluster


def scrape(addr: str) -> str:
    with urllib.request.urlopen(f"http://{addr}/metrics", timeout=10) as answer:
        return str(answer.read().decode())


def value(text: str, name: str, **labels: str) -> float:
    """The sample `name{labels}` of a Prometheus text page (labels in any order)."""
    for line in text.splitlines():
        metric, _, number = line.rpartition(" ")
        sample, _, label_text = metric.partition("{")
        found = dict(re.findall(r'(\w+)="([^"]*)"', label_text))
        if sample == name and found == labels:
            return float(number)
    raise AssertionError(f"{name}{labels} not in the metrics")


def test_brokers_and_name_server_serve_metrics_of_their_traffic(tmp_path: Path) -> None:
    with LocalCluster(brokers=2, data_dir=tmp_path / "c", metrics_port=0) as cluster:
        info = cluster.ready_info()
        assert info["namesrvMetrics"].startswith("127.0.0.1:")
        brokers = {name: b["metrics"] for name, b in info["brokers"].items()}
        assert len(set(brokers.values())) == 2, "each broker has its own metrics port"
        with Admin(cluster.namesrv) as admin:
            admin.update_topic("metered", cluster=cluster.cluster_name, read_queues=1, write_queues=1)
        with Producer(cluster.namesrv, active_detection=False) as producer:
            result = producer.send_batch("metered", [b"x" * 100] * 50, queue=0)[0]
        with PullConsumer(cluster.namesrv) as consumer:
            pulled = consumer.pull("metered", 0, 0, max_messages=100, broker=result.broker)
        assert pulled.count == 50
        with PullConsumer(cluster.namesrv, group="lagging") as consumer:
            consumer.commit("metered", 0, 20, broker=result.broker)
        text = scrape(cluster.ready_info()["brokers"][result.broker]["metrics"])
        assert value(text, "staticmq_messages_in_total", topic="metered") == 50
        bytes_in = value(text, "staticmq_bytes_in_total", topic="metered")
        assert 5000 <= bytes_in < 5000 + 50 * 64, "bodies plus each message's small header (key, tags, properties)"
        assert value(text, "staticmq_messages_out_total", topic="metered") == 50
        assert value(text, "staticmq_bytes_out_total", topic="metered") == bytes_in
        assert value(text, "staticmq_requests_total", method="Send", code="OK") >= 1
        assert value(text, "staticmq_request_seconds_count", method="Send") >= 1
        assert value(text, "staticmq_flush_seconds_count") >= 1, "flush=sync fsyncs every send"
        assert value(text, "staticmq_store_bytes") > 5000
        assert value(text, "staticmq_consumer_lag", group="lagging", topic="metered", queue="0") == 30
        names = scrape(info["namesrvMetrics"])
        assert value(names, "staticmq_requests_total", code="OK", method="RegisterBroker") >= 2
