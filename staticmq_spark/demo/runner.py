"""`staticmq demo`: a local cluster, a stream of page views, a medallion pipeline through Delta Lake
(bronze -> silver / gold -> a results topic keyed by user, see `medallion`), a remap of the input
topic while it runs, and a verified report. Everything runs in a temporary directory that is
removed at the end, unless `--keep DIR` names a directory to leave the cluster and tables in."""

from __future__ import annotations

import json
import random
import shutil
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from staticmq_spark.client.producer import Producer
from staticmq_spark.client.pull_consumer import PullConsumer
from staticmq_spark.demo.checks import Check, LakeContents, OutputRows, check_refuses_unsigned, verify, verify_lake
from staticmq_spark.demo.clusters import DemoCluster, open_demo_cluster
from staticmq_spark.demo.events import EventLog, page_views
from staticmq_spark.demo.sparkline import landed_events, per_second, report_lines

QUERIES = ("bronze", "silver_gold", "results")


@dataclass(frozen=True, slots=True)
class DemoSettings:
    events: int = 50_000
    users: int = 400
    rate: float = 5_000.0  # events per second the producer paces itself to
    brokers: int = 3
    queues: int = 8
    seed: int = 7
    data_dir: Path | None = None
    rocketmq: bool = False  # a local Apache RocketMQ instead of the embedded staticmq cluster
    namesrv: str | None = None  # an existing Apache RocketMQ cluster (rocketmq://host:port)
    secure: bool = False  # the embedded cluster with an ACL and TLS; the pipeline signs every call


@dataclass
class DemoReport:
    checks: list[Check] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(c.passed for c in self.checks)

    def as_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "facts": self.facts,
            "checks": [{"name": c.name, "passed": c.passed, "detail": c.detail} for c in self.checks],
        }


def run_demo(settings: DemoSettings, echo: Any = print) -> DemoReport:
    keep = settings.data_dir is not None
    root = settings.data_dir or Path(tempfile.mkdtemp(prefix="staticmq-demo-"))
    try:
        return _run(settings, root, echo)
    finally:
        if keep:
            echo(f"cluster data, Delta tables and checkpoints kept in {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


def _run(settings: DemoSettings, root: Path, echo: Any) -> DemoReport:
    report = DemoReport()
    cluster = open_demo_cluster(root, settings.brokers, settings.rocketmq, settings.namesrv, settings.secure)
    echo(f"running on {cluster.description}")
    try:
        brokers = cluster.broker_names
        cluster.create_static_topic(cluster.input_topic, settings.queues, brokers[:2])
        cluster.create_static_topic(cluster.output_topic, settings.queues, None)
        echo(
            f"static topics {cluster.input_topic!r} (on {brokers[:2]}) and {cluster.output_topic!r}: "
            f"{settings.queues} logic queues each"
        )
        from staticmq_spark.demo import medallion

        echo("starting Spark (local[2], Delta Lake) and the pipeline: bronze, silver/gold, results ...")
        spark = medallion.demo_session()
        lake = medallion.Lake(root)
        try:
            secured = cluster.spark_options
            medallion.create_tables(spark, lake, cluster.namesrv, cluster.input_topic, secured)
            queries = [
                medallion.start_bronze_query(spark, lake, cluster.namesrv, cluster.input_topic, secured),
                medallion.start_silver_gold_query(spark, lake),
                medallion.start_results_query(spark, lake, cluster.namesrv, cluster.output_topic, secured),
            ]
            medallion.wait_first_triggers(queries)
            log, remap_info, produce_s, sent_at = _produce_while_remapping(cluster, settings, brokers, echo)
            for query in queries:  # in pipeline order: each drains what the one before it wrote
                query.processAllAvailable()
            recent = {q.name: q.recentProgress for q in queries}  # in pipeline order, bronze first
            progress = [p for p in recent[queries[0].name] if p["numInputRows"]]
            drains = catch_up_seconds(sent_at[-1][0], {name: landed_events(r) for name, r in recent.items()})
            for query in queries:
                query.stop()
            output = OutputRows.from_rows(
                spark.read.format("staticmq")
                .option("namesrv", cluster.namesrv)
                .option("topic", cluster.output_topic)
                .options(**secured)
                .load()
                .select("key", "queueId", "queueOffset", "value")
                .collect()
            )
            contents = LakeContents.read(spark, lake)
        finally:
            spark.stop()
        report.checks = verify(log.views_per_user, output, settings.queues)
        report.checks += verify_lake(log.views_per_user, contents)
        report.checks.append(remap_info.pop("check"))
        if settings.secure:
            report.checks.append(check_refuses_unsigned(cluster))
        report.facts = _facts(cluster, log, output, remap_info, produce_s, drains, progress)
        report.facts.update(_per_second(sent_at, progress))
        report.facts["delta_tables"] = contents.summary()
    finally:
        cluster.close()
    return report


def _produce_while_remapping(
    cluster: DemoCluster, settings: DemoSettings, brokers: list[str], echo: Any
) -> tuple[EventLog, dict[str, Any], float, list[tuple[float, int]]]:
    """The page views sent, the remap's outcome, the seconds it took, and (time, rows) of each send."""
    log = EventLog()
    sent_at: list[tuple[float, int]] = []
    rng = random.Random(settings.seed)
    remap_info: dict[str, Any] = {}
    remap_at = int(settings.events * 0.4)
    chunk = 500
    remapper: threading.Thread | None = None
    started = time.monotonic()
    with (
        Producer(cluster.namesrv, active_detection=False, **cluster.client_options) as producer,
        tqdm(total=settings.events, desc="producing page views", unit="ev", leave=True) as bar,
    ):
        for first in range(0, settings.events, chunk):
            n = min(chunk, settings.events - first)
            keys, bodies = page_views(n, settings.users, rng, int(time.time() * 1000))
            producer.send_batch(cluster.input_topic, bodies, keys=keys)
            sent_at.append((time.time(), n))
            log.record(keys)
            bar.update(n)
            if remapper is None and log.sent >= remap_at:
                remapper = threading.Thread(target=_remap, args=(cluster, brokers, remap_info))
                remapper.start()
            ahead = log.sent / settings.rate - (time.monotonic() - started)
            if ahead > 0:
                time.sleep(ahead)
    elapsed = time.monotonic() - started
    if remapper is not None:
        remapper.join(120)
    if "moved" in remap_info:
        echo(f"remapped {cluster.input_topic!r} while streaming: {remap_info['moved']}")
    return log, remap_info, elapsed, sent_at


def catch_up_seconds(last_sent: float, landed: Mapping[str, Sequence[tuple[float, int]]]) -> list[float]:
    """Seconds from the last event's send until each query (in pipeline order) had processed it: the
    end of the query's last micro-batch with rows (`landed`: query name -> (end of a micro-batch in
    epoch seconds, rows), see `landed_events`), once every query has drained what came before it.
    Bronze's last batch with rows landed the last event; the last one of each query after it read
    what the one before it wrote last."""
    out = []
    for name, batches in landed.items():
        if not batches:
            raise ValueError(f"streaming query {name} processed no rows")
        out.append(max(t for t, _ in batches) - last_sent)
    return out


def _per_second(sent_at: list[tuple[float, int]], progress: Sequence[Any]) -> dict[str, Any]:
    """Rows produced and rows landed in bronze per second, from the first send to the last landing."""
    landed = landed_events(progress)
    if not sent_at:
        return {}
    start = sent_at[0][0]
    seconds = int(max(t for t, _ in [*sent_at, *landed]) - start) + 1
    return {"produced_per_s": per_second(sent_at, start, seconds), "landed_per_s": per_second(landed, start, seconds)}


def _remap(cluster: DemoCluster, brokers: list[str], info: dict[str, Any]) -> None:
    from staticmq_spark.demo.checks import Check

    targets = brokers[1:] if len(brokers) > 2 else brokers[:1]
    try:
        moved, consistent = cluster.remap(cluster.input_topic, targets)
        info["moved"] = moved
        info["targets"] = targets
        info["check"] = Check(
            "remap of the input topic while streaming",
            bool(moved) and consistent,
            f"{len(moved)} logic queues moved onto {targets}; mapping consistent: {consistent}",
        )
    except Exception as exc:  # reported, not raised: the demo still verifies the data
        info["check"] = Check("remap of the input topic while streaming", False, f"remap failed: {exc}")


def _facts(
    cluster: DemoCluster,
    log: EventLog,
    output: OutputRows,
    remap_info: dict[str, Any],
    produce_s: float,
    drains: Sequence[float],
    progress: Sequence[Any],
) -> dict[str, Any]:
    """`drains`: seconds from the last event's send until bronze, silver/gold and the results query
    had each processed it (`catch_up_seconds`)."""
    with PullConsumer(cluster.namesrv, **cluster.client_options) as consumer:
        offsets = {
            o.queue.queue_id: (o.min_offset, o.max_offset, o.queue.broker)
            for o in consumer.offsets(cluster.input_topic)
        }
    rates = [p["processedRowsPerSecond"] for p in progress if p.get("processedRowsPerSecond")]
    return {
        "messages_in": log.sent,
        "users": len(log.views_per_user),
        "messages_out": output.rows,
        "input_queues": {q: {"min": lo, "max": hi, "leader": b} for q, (lo, hi, b) in sorted(offsets.items())},
        "remap": remap_info.get("moved", {}),
        "produce_rate": round(log.sent / produce_s) if produce_s else 0,
        "stream_rows_per_s_peak": round(max(rates)) if rates else 0,
        "stream_catch_up_s": round(drains[0], 1),  # bronze (the staticmq source) landed the last event
        "silver_gold_catch_up_s": round(drains[1], 1),
        "pipeline_catch_up_s": round(drains[-1], 1),  # its update is in the results topic
    }


def print_report(report: DemoReport, echo: Any = print) -> None:
    f = report.facts
    echo("")
    echo("staticmq demo report")
    echo("====================")
    echo(f"messages in:  {f.get('messages_in', 0):>9,} page views from {f.get('users', 0):,} users")
    echo(f"messages out: {f.get('messages_out', 0):>9,} per-user statistic updates")
    echo(
        "delta tables: "
        + ", ".join(
            f"{name} {t['rows']:,} rows (version {t['version']})" for name, t in f.get("delta_tables", {}).items()
        )
    )
    echo(
        f"throughput:   produced {f.get('produce_rate', 0):,} ev/s; "
        f"streaming peak {f.get('stream_rows_per_s_peak', 0):,} rows/s"
    )
    echo(
        f"caught up:    bronze {f.get('stream_catch_up_s', 0)} s, silver/gold {f.get('silver_gold_catch_up_s', 0)} s, "
        f"the results topic {f.get('pipeline_catch_up_s', 0)} s after the last event was sent"
    )
    if f.get("produced_per_s"):
        for line in report_lines(f["produced_per_s"], f.get("landed_per_s", [])):
            echo(f"              {line}")
    echo("input logic queues (min .. max logic offset, leader):")
    for q, info in f.get("input_queues", {}).items():
        echo(f"  queue {q}: {info['min']:>7} .. {info['max']:<7} on {info['leader']}")
    moved = f.get("remap", {})
    echo("remap: " + (", ".join(f"queue {q}: {m}" for q, m in moved.items()) if moved else "none"))
    echo("checks:")
    for c in report.checks:
        echo(f"  [{'PASS' if c.passed else 'FAIL'}] {c.name}: {c.detail}")
    echo("result: " + ("all checks passed" if report.ok else "SOME CHECKS FAILED"))


def write_json(report: DemoReport, path: Path) -> None:
    path.write_text(json.dumps(report.as_json(), indent=1, default=str))
