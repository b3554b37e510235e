"""Soak run: a Delta bronze stream over a remapped static topic while brokers and the driver are killed.

    python -m bench.soak --backend staticmq    # 1,000,000 messages, 10 remaps, 3 broker kills, 1 driver kill
    python -m bench.soak --backend rocketmq --messages 200000 --json soak.json
    python -m bench.soak --messages 50000 --remaps 3 --broker-kills 1 --dir /tmp/soak   # a quick one

Run on demand, not in CI (a full run takes many minutes). It starts a cluster of 3 brokers (a
`LocalCluster` of broker_stub processes, or a real Apache RocketMQ 5.5 through `LocalRocketMQ`),
creates a static topic of 16 logic queues, and starts a Structured Streaming query in a child
process (`python -m bench.soak driver ...`): `readStream.format("staticmq")` into a Delta table
(bronze: every message with key, value, queueId and queueOffset), with a checkpoint. Meanwhile a
producer sends keyed messages (5,000 keys; the body is `k<key>:<seq>`, seq counting that key's
messages) in batches until N were acknowledged. A batch whose send raised is "unacked": it may or
may not be stored, so it may appear at most once. The faults, spread evenly over the production
(the producer never runs more than one fault ahead): remaps of the topic over the 3 brokers
(`Admin.remapping_static_topic`, or RocketMQ's `mqadmin remappingStaticTopic`), kill -9 of one
broker and its restart on the same port and data directory, and kill -9 of the driver (the query's
whole process group) and its restart on the same checkpoint.

At the end the driver is told to catch up (`processAllAvailable`), stops the query and exports
(key, value, queueId, queueOffset) of the table; the checks: every acknowledged message exactly
once, no unacknowledged one more than once, nothing unknown, each key on one logic queue and its
acknowledged messages in send order by (queueId, queueOffset). Exit status 1 when a check fails
(or the query died), 0 otherwise; `--json FILE` writes the figures. Results: docs/soak.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
TOTAL_QUEUES = 16
WORKER_TIMEOUT = "Python worker failed to connect back"
RESTART_MARK = "SOAK-QUERY-RESTART"
REMAP_PLAN = [(1, 2), (0,), (0, 1, 2), (2,), (0, 1), (1,), (0, 2), (0, 1, 2), (1, 2), (0, 1, 2)]
# RocketMQ 5.5.0's mqadmin remappingStaticTopic fails for good after a few remaps onto several
# brokers ("The non-latest item has negative logic offset", docs/soak.md); one broker at a time works
ROCKETMQ_REMAP_PLAN = [(1,), (2,), (0,)]


def log(text: str) -> None:
    print(f"[soak {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------- clusters


class Backend:
    """The cluster under test: start, create the topic, remap, kill and restart a broker."""

    name = ""
    address = ""
    brokers: list[str] = []
    remap_plan: list[tuple[int, ...]] = REMAP_PLAN
    last_targets: list[str] = []

    def start(self) -> None: ...
    def create_topic(self, topic: str) -> None: ...
    def remap(self, topic: str, brokers: list[str]) -> None: ...
    def kill_broker(self, name: str) -> None: ...
    def start_broker(self, name: str) -> None: ...
    def close(self) -> None: ...

    def producer(self) -> Any:
        from staticmq_spark.client import Producer

        return Producer(self.address)


class StaticMQBackend(Backend):
    name = "staticmq"

    def __init__(self, root: Path) -> None:
        from staticmq_spark.testing import LocalCluster

        self.cluster = LocalCluster(brokers=3, data_dir=root / "cluster", flush="sync")

    def start(self) -> None:
        self.cluster.start()
        self.address = self.cluster.namesrv
        self.brokers = self.cluster.broker_names

    def create_topic(self, topic: str) -> None:
        from staticmq_spark.client import Admin

        with Admin(self.address) as admin:
            admin.update_static_topic(topic, TOTAL_QUEUES, cluster=self.cluster.cluster_name)

    def remap(self, topic: str, brokers: list[str]) -> None:
        from staticmq_spark.client import Admin

        with Admin(self.address) as admin:
            admin.remapping_static_topic(topic, brokers=brokers)

    def kill_broker(self, name: str) -> None:
        self.cluster.kill_broker(name)

    def start_broker(self, name: str) -> None:
        self.cluster.start_broker(name)

    def close(self) -> None:
        self.cluster.stop()

    def producer(self) -> Any:
        from staticmq_spark.client import Producer

        return Producer(self.address, send_timeout_s=15, active_detection=False)


class RocketMQBackend(Backend):
    name = "rocketmq"
    remap_plan = ROCKETMQ_REMAP_PLAN

    def __init__(self, root: Path) -> None:
        from staticmq_spark.testing.rocketmq_cluster import LocalRocketMQ

        self.cluster = LocalRocketMQ(root / "rocketmq", brokers=3)

    def start(self) -> None:
        self.cluster.start()
        self.address = self.cluster.address
        self.brokers = list(self.cluster.broker_names)

    def create_topic(self, topic: str) -> None:
        self.cluster.update_static_topic(topic, TOTAL_QUEUES)

    def remap(self, topic: str, brokers: list[str]) -> None:
        self.cluster.remap_static_topic(topic, brokers)  # staticmq's Admin cannot remap on RocketMQ

    def kill_broker(self, name: str) -> None:
        self.cluster.kill(name)

    def start_broker(self, name: str) -> None:
        self.cluster.start_broker(name)  # same port (kept in broker_ports), same store
        self.cluster.wait_registered()

    def close(self) -> None:
        self.cluster.close()


def wait_route(backend: Backend, topic: str, timeout_s: float = 60.0) -> None:
    from staticmq_spark.errors import StaticMQError

    deadline = time.monotonic() + timeout_s
    with backend.producer() as producer:
        while True:
            try:
                if producer.topic_is_static(topic):
                    return
            except StaticMQError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"no static route for {topic} after {timeout_s}s")
            time.sleep(0.2)


# ---------------------------------------------------------------------------- the producer


def body_of(g: int, keys: int) -> tuple[str, bytes]:
    key, seq = g % keys, g // keys
    return f"k{key}", f"k{key}:{seq}".encode()


@dataclass
class Sender:
    """Sends messages g = 0, 1, 2, ... (key g % keys, seq g // keys) in batches, one batch in
    flight, until `target` were acknowledged; `limit` holds it back (the fault schedule)."""

    backend: Backend
    topic: str
    target: int
    keys: int
    batch: int
    rate: float
    stall_s: float = 300.0
    limit: int = 0
    next_g: int = 0
    acked: int = 0
    acked_ranges: list[tuple[int, int]] = field(default_factory=list)
    unacked_ranges: list[tuple[int, int]] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    error_samples: dict[str, str] = field(default_factory=dict)
    done: threading.Event = field(default_factory=threading.Event)
    failure: BaseException | None = None
    finished_at: float = 0.0

    def run(self) -> None:
        try:
            self._run()
        except BaseException as e:
            self.failure = e
        finally:
            self.finished_at = time.monotonic()
            self.done.set()

    def _run(self) -> None:
        started = time.monotonic()
        progress = started  # the last acknowledged send, or the end of a pause for the next fault
        with self.backend.producer() as producer:
            while self.acked < self.target:
                while self.acked >= self.limit:
                    time.sleep(0.05)  # pacing: the next fault has not happened yet (not a wait on the system)
                    progress = time.monotonic()
                if time.monotonic() - progress > self.stall_s:
                    raise RuntimeError(
                        f"the producer stalled: no send acknowledged for {self.stall_s:g} s "
                        f"({self.acked:,} acked); errors {self.errors}, e.g. {self.error_samples}"
                    )
                if self.rate > 0:
                    ahead = self.next_g / self.rate - (time.monotonic() - started)
                    if ahead > 0:
                        time.sleep(ahead)
                g0 = self.next_g
                n = min(self.batch, max(1, self.target - self.acked))
                rows = [body_of(g, self.keys) for g in range(g0, g0 + n)]
                self.next_g = g0 + n
                try:
                    producer.send_batch(self.topic, [b for _, b in rows], keys=[k for k, _ in rows])
                except Exception as e:
                    name = type(e).__name__
                    self.errors[name] = self.errors.get(name, 0) + 1
                    self.error_samples.setdefault(name, str(e)[:300])
                    self.unacked_ranges.append((g0, g0 + n))
                    time.sleep(0.2)  # pacing: no tight loop while a queue is unavailable
                else:
                    self.acked_ranges.append((g0, g0 + n))
                    self.acked += n
                    progress = time.monotonic()


# ---------------------------------------------------------------------------- the driver (child process)


def driver_main(args: argparse.Namespace) -> int:
    """The streaming query: staticmq -> Delta bronze until `control/finish` appears; then catch up,
    stop and export the table's (key, value, queueId, queueOffset) to `control/result.parquet`."""
    os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")
    from pyspark.sql import SparkSession

    from bench.harness import SPARK_CONF
    from staticmq_spark.lakehouse import start_bronze
    from staticmq_spark.spark_session import configure_spark

    control = Path(args.control)
    builder = SparkSession.builder.master("local[2]").appName("soak")
    for key, value in SPARK_CONF.items():
        builder = builder.config(key, value)
    spark = configure_spark(builder, delta=True).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")

    def start() -> Any:
        return start_bronze(
            spark,
            args.namesrv,
            args.topic,
            args.table,
            args.checkpoint,
            trigger_interval="2 seconds",
            maxMessagesPerTrigger=str(args.max_per_trigger),
        )

    query = start()
    (control / f"driver-{os.getpid()}.started").write_text("")
    finish = control / "finish"
    restarts = 0
    while True:
        try:
            while not finish.exists():
                if query.awaitTermination(1):
                    print(f"query ended: {query.exception()}", flush=True)
                    return 3
            t0 = time.monotonic()
            query.processAllAvailable()
            query.stop()
            break
        except Exception as e:
            # Spark gives a Python worker 10 s to start (not configurable); on an overloaded
            # machine that fails the query. A restart on the checkpoint, counted by the soak.
            if WORKER_TIMEOUT not in str(e) or restarts >= 20:
                print(f"query failed: {e}", flush=True)
                return 3
            restarts += 1
            print(f"{RESTART_MARK} {restarts}: {WORKER_TIMEOUT}", flush=True)
            time.sleep(5)  # pacing: give the overloaded machine a moment before the next start
            try:
                query.stop()
            except Exception:
                pass
            query = start()
    print(f"caught up in {time.monotonic() - t0:.1f} s", flush=True)
    import pyarrow.parquet as pq

    table = spark.read.format("delta").load(args.table).select("key", "value", "queueId", "queueOffset").toArrow()
    tmp = control / "result.parquet.tmp"
    pq.write_table(table, tmp)
    os.replace(tmp, control / "result.parquet")
    spark.stop()
    return 0


class Driver:
    """The query's process: start, kill -9 (its whole process group: python and Spark's JVM), wait."""

    def __init__(self, root: Path, namesrv: str, topic: str, max_per_trigger: int) -> None:
        self.root = root
        self.control = root / "control"
        self.control.mkdir(parents=True, exist_ok=True)
        self.checkpoint = root / "checkpoint"
        self.args = [
            sys.executable,
            "-m",
            "bench.soak",
            "driver",
            "--namesrv",
            namesrv,
            "--topic",
            topic,
            "--table",
            str(root / "bronze"),
            "--checkpoint",
            str(self.checkpoint),
            "--control",
            str(self.control),
            "--max-per-trigger",
            str(max_per_trigger),
        ]
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        out = (self.root / f"driver-{self.starts}.log").open("wb")
        self.proc = subprocess.Popen(
            self.args, stdout=out, stderr=subprocess.STDOUT, cwd=REPO, start_new_session=True, env=dict(os.environ)
        )
        out.close()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        assert self.proc is not None
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(60)

    def committed(self) -> set[int]:
        return _batch_ids(self.checkpoint / "commits")

    def planned(self) -> set[int]:
        return _batch_ids(self.checkpoint / "offsets")

    def query_restarts(self) -> int:
        """In-process restarts of the query after Spark's Python worker timeout, over all drivers."""
        logs = (self.root / f"driver-{i}.log" for i in range(1, self.starts + 1))
        return sum(p.read_text(errors="replace").count(RESTART_MARK) for p in logs if p.exists())

    def log_tail(self, lines: int = 40) -> str:
        path = self.root / f"driver-{self.starts}.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""


def _batch_ids(folder: Path) -> set[int]:
    return {int(p.name) for p in folder.iterdir() if p.name.isdigit()} if folder.exists() else set()


# ---------------------------------------------------------------------------- the checks


def check(result: Path, sender: Sender, keys: int) -> dict[str, Any]:
    import pyarrow.parquet as pq

    table = pq.read_table(result)
    sent = sender.next_g
    acked = np.zeros(sent, dtype=bool)
    for a, b in sender.acked_ranges:
        acked[a:b] = True
    counts = np.zeros(sent, dtype=np.int64)
    key_col = table.column("key").to_pylist()
    values = table.column("value").to_pylist()
    qid = np.asarray(table.column("queueId").to_numpy(zero_copy_only=False), dtype=np.int64)
    qoff = np.asarray(table.column("queueOffset").to_numpy(zero_copy_only=False), dtype=np.int64)
    g = np.full(len(values), -1, dtype=np.int64)
    unknown = 0
    for i, (k, v) in enumerate(zip(key_col, values, strict=True)):
        try:
            name, seq = bytes(v).decode().split(":")
            key = int(name[1:])
            gi = int(seq) * keys + key
        except (ValueError, UnicodeDecodeError, TypeError):
            unknown += 1
            continue
        if name != k or not name.startswith("k") or key >= keys or gi >= sent:
            unknown += 1
            continue
        g[i] = gi
    known = g >= 0
    np.add.at(counts, g[known], 1)
    lost = int(np.count_nonzero(acked & (counts == 0)))
    dup_acked = int(np.count_nonzero(acked & (counts > 1)))
    dup_unacked = int(np.count_nonzero(~acked & (counts > 1)))
    unacked_stored = int(np.count_nonzero(~acked & (counts == 1)))
    positions = qid * (1 << 40) + qoff
    same_position = len(positions) - len(np.unique(positions))
    # order: each key's acknowledged messages sorted by (queueId, queueOffset) have increasing seq
    sel = known.copy()
    sel[known] = acked[g[known]]
    gk, qk, ok = g[sel], qid[sel], qoff[sel]
    key_ids, seqs = gk % keys, gk // keys
    order = np.lexsort((ok, qk, key_ids))
    ks, ss, qs = key_ids[order], seqs[order], qk[order]
    same_key = ks[1:] == ks[:-1]
    out_of_order = int(np.count_nonzero(same_key & (ss[1:] < ss[:-1])))  # equal: a duplicate, counted above
    keys_on_several_queues = len(np.unique(ks[1:][same_key & (qs[1:] != qs[:-1])]))
    return {
        "rows": len(values),
        "lost": lost,
        "duplicated": dup_acked + dup_unacked,
        "duplicated_acked": dup_acked,
        "duplicated_unacked": dup_unacked,
        "unacked_stored": unacked_stored,
        "unknown": unknown,
        "out_of_order": out_of_order,
        "keys_on_several_queues": keys_on_several_queues,
        "same_position_twice": int(same_position),
        "lost_examples": [body_of(int(x), keys)[1].decode() for x in np.flatnonzero(acked & (counts == 0))[:5]],
        "duplicated_examples": [body_of(int(x), keys)[1].decode() for x in np.flatnonzero(counts > 1)[:5]],
    }


# ---------------------------------------------------------------------------- the run


def plan(remaps: int, broker_kills: int, driver_kills: int) -> list[str]:
    """The faults in the order they happen: remaps spread evenly, kills between them."""
    kills = ["broker"] * broker_kills + ["driver"] * driver_kills
    if driver_kills and broker_kills:  # the driver kill in the middle of the broker kills
        kills = ["broker"] * (broker_kills // 2 + broker_kills % 2) + ["driver"] * driver_kills
        kills += ["broker"] * (broker_kills // 2)
    events: list[str] = ["remap"] * remaps
    for i, kill in enumerate(kills):
        at = round((i + 1) * (len(events) + 1) / (len(kills) + 1))
        events.insert(min(at + i, len(events)), kill)
    return events


def run(args: argparse.Namespace) -> int:
    root = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="staticmq-soak-"))
    if root.exists() and any(root.iterdir()):
        raise SystemExit(f"--dir {root} is not empty")
    root.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # SIGTERM still stops the cluster and the driver
    backend: Backend = StaticMQBackend(root) if args.backend == "staticmq" else RocketMQBackend(root)
    events = plan(args.remaps, args.broker_kills, args.driver_kills)
    t_start = time.monotonic()
    figures: dict[str, Any] = {
        "backend": args.backend,
        "date": time.strftime("%Y-%m-%d"),
        "target_messages": args.messages,
        "keys": args.keys,
        "logic_queues": TOTAL_QUEUES,
        "brokers": 3,
        "events": [],
    }
    log(f"{args.backend}: starting 3 brokers in {root}; faults: {' '.join(events)}")
    backend.start()
    driver: Driver | None = None
    sender: Sender | None = None
    failed: list[str] = []
    try:
        topic = f"soak-{int(time.time())}"
        backend.create_topic(topic)
        wait_route(backend, topic)
        driver = Driver(root, backend.address, topic, args.max_per_trigger)
        driver.start()
        thresholds = [args.messages * (i + 1) // (len(events) + 1) for i in range(len(events))]
        sender = Sender(backend, topic, args.messages, args.keys, args.batch, args.rate, args.stall_timeout_s)
        sender.limit = thresholds[1] if len(thresholds) > 1 else args.messages
        thread = threading.Thread(target=sender.run, name="producer", daemon=True)
        thread.start()
        counters = {"remap": 0, "broker": 0, "driver": 0}
        for i, (event, threshold) in enumerate(zip(events, thresholds, strict=True)):
            while sender.acked < threshold and not sender.done.is_set():
                _watch(driver, failed)
                time.sleep(0.2)
            if sender.failure is not None:
                raise sender.failure
            t0 = time.monotonic()
            detail = _fault(event, counters[event], backend, topic, driver, failed)
            counters[event] += 1
            took = time.monotonic() - t0
            entry = {"event": event, "at_acked": sender.acked, "detail": detail, "seconds": round(took, 1)}
            figures["events"].append(entry)
            log(f"{event} {counters[event]}: {detail} ({took:.1f} s, {sender.acked:,} acked)")
            sender.limit = thresholds[i + 2] if i + 2 < len(thresholds) else args.messages
        while not sender.done.wait(1):
            _watch(driver, failed)
            if int(time.monotonic()) % 30 == 0:
                log(f"producing: {sender.acked:,} acked, {sum(b - a for a, b in sender.unacked_ranges):,} unacked")
        if sender.failure is not None:
            raise sender.failure
        produced_s = sender.finished_at - t_start
        log(f"produced: {sender.acked:,} acked of {sender.next_g:,} sent in {produced_s:.0f} s; catching up")
        (driver.control / "finish").write_text("")
        deadline = time.monotonic() + args.catchup_timeout_s
        result = driver.control / "result.parquet"
        while not result.exists():
            if not driver.alive():
                failed.append(
                    f"the driver exited ({driver.proc.returncode if driver.proc else '?'}) before catching up"
                )
                log(driver.log_tail())
                if len([f for f in failed if "exited" in f]) > 2:
                    raise RuntimeError("the driver keeps dying; see its logs")
                driver.start()
            if time.monotonic() > deadline:
                raise TimeoutError(f"the query did not catch up in {args.catchup_timeout_s} s")
            time.sleep(1)
        driver.proc.wait(120) if driver.proc else None
        caught_up_s = time.monotonic() - t_start
        found = check(result, sender, args.keys)
        figures.update(
            {
                "sent": sender.next_g,
                "acked": sender.acked,
                "unacked": sum(b - a for a, b in sender.unacked_ranges),
                "send_errors": sender.errors,
                "send_error_samples": sender.error_samples,
                "remaps": counters["remap"],
                "broker_kills": counters["broker"],
                "driver_kills": counters["driver"],
                "driver_starts": driver.starts,
                "micro_batches": len(driver.committed()),
                "query_restarts_worker_timeout": driver.query_restarts(),
                "produce_seconds": round(produced_s, 1),
                "wall_seconds": round(caught_up_s, 1),
                **found,
            }
        )
    except Exception as e:  # the run could not finish: reported with the figures so far
        failed.append(f"aborted: {type(e).__name__}: {str(e)[:500]}")
        log(f"aborted: {type(e).__name__}: {e}")
        if sender is not None:
            figures.update(sent=sender.next_g, acked=sender.acked, send_errors=sender.errors)
            figures["unacked"] = sum(b - a for a, b in sender.unacked_ranges)
    finally:
        if driver is not None and driver.alive():
            driver.kill()
        backend.close()
    for name in ("lost", "duplicated_acked", "duplicated_unacked", "unknown", "out_of_order"):
        if figures.get(name):
            failed.append(f"{name}: {figures[name]}")
    if figures.get("keys_on_several_queues"):
        failed.append(f"keys on several logic queues: {figures['keys_on_several_queues']}")
    figures["failures"] = failed
    figures["ok"] = not failed
    _summary(figures)
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1) + "\n")
    if figures["ok"] and not args.keep and not args.dir:
        shutil.rmtree(root, ignore_errors=True)
    else:
        log(f"logs and data kept in {root}")
    return 0 if figures["ok"] else 1


def _watch(driver: Driver, failed: list[str]) -> None:
    """A driver that died on its own (not killed by the soak) is a failure; it is restarted."""
    if not driver.alive():
        causes = [ln.strip() for ln in driver.log_tail(400).splitlines() if ln.startswith("Caused by")]
        status = driver.proc.returncode if driver.proc else "?"
        failed.append(f"the driver exited by itself (status {status}; {causes[-1] if causes else 'see its log'})")
        log(f"the driver exited by itself:\n{driver.log_tail()}")
        driver.start()


def _fault(event: str, n: int, backend: Backend, topic: str, driver: Driver, failed: list[str]) -> str:
    if event == "remap":
        plan = backend.remap_plan
        targets = [backend.brokers[i] for i in plan[n % len(plan)]]
        for attempt in range(5):
            try:
                backend.remap(topic, targets)
                backend.last_targets = targets
                return f"remapped to {','.join(targets)}"
            except Exception as e:
                log(f"remap to {targets} failed (attempt {attempt + 1}): {type(e).__name__}: {str(e)[:300]}")
                time.sleep(3)
        failed.append(f"remap {n + 1} to {targets} failed 5 times")
        return "remap failed"
    if event == "broker":  # a broker that leads logic queues now: one of the last remap's targets
        leaders = backend.last_targets or backend.brokers
        victim = leaders[n % len(leaders)]
        backend.kill_broker(victim)
        time.sleep(3.0)  # the broker stays down this long while the producer and the query go on
        backend.start_broker(victim)
        return f"kill -9 {victim}, down 3 s, restarted"
    # the driver: wait for a query that has committed a batch since it started and has one under way
    deadline = time.monotonic() + 180
    first = len(driver.committed())
    while time.monotonic() < deadline and len(driver.committed()) < first + 1:
        _watch(driver, failed)
        time.sleep(0.2)
    in_flight = False
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if driver.planned() - driver.committed():
            in_flight = True
            break
        time.sleep(0.05)
    batches = len(driver.committed())
    driver.kill()
    driver.start()
    when = "a batch in flight" if in_flight else "between batches"
    return f"kill -9 of the driver after {batches} committed batches ({when}), restarted"


def _summary(f: dict[str, Any]) -> None:
    lines = [
        f"soak on {f['backend']} ({f['date']}): {'OK' if f['ok'] else 'FAILED'}",
        f"  messages sent {f.get('sent', 0):,}, acked {f.get('acked', 0):,}, unacked {f.get('unacked', 0):,} "
        f"(stored {f.get('unacked_stored', 0):,}), rows in the table {f.get('rows', 0):,}",
        f"  remaps {f.get('remaps', 0)}, broker kills {f.get('broker_kills', 0)}, "
        f"driver kills {f.get('driver_kills', 0)}, micro-batches {f.get('micro_batches', 0)}, "
        f"query restarts after Spark's Python worker timeout {f.get('query_restarts_worker_timeout', 0)}",
        f"  lost {f.get('lost', '?')}, duplicated {f.get('duplicated', '?')}, "
        f"out of order {f.get('out_of_order', '?')}, "
        f"unknown {f.get('unknown', '?')}, keys on several queues {f.get('keys_on_several_queues', '?')}",
        f"  wall time {f.get('wall_seconds', 0):.0f} s (production {f.get('produce_seconds', 0):.0f} s)",
        *(f"  FAILED: {x}" for x in f["failures"]),
    ]
    print("\n".join(lines), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    d = sub.add_parser("driver", help="(internal) the streaming query's process")
    d.add_argument("--namesrv", required=True)
    d.add_argument("--topic", required=True)
    d.add_argument("--table", required=True)
    d.add_argument("--checkpoint", required=True)
    d.add_argument("--control", required=True)
    d.add_argument("--max-per-trigger", type=int, default=100_000)
    parser.add_argument("--backend", choices=["staticmq", "rocketmq"], default="staticmq")
    parser.add_argument("--messages", type=int, default=1_000_000, help="acknowledged messages to send")
    parser.add_argument("--keys", type=int, default=5000)
    parser.add_argument("--batch", type=int, default=1000, help="messages per send_batch")
    parser.add_argument("--rate", type=float, default=5000, help="messages/s the producer aims at (0: no limit)")
    parser.add_argument("--remaps", type=int, default=10)
    parser.add_argument("--broker-kills", type=int, default=3)
    parser.add_argument("--driver-kills", type=int, default=1)
    parser.add_argument("--max-per-trigger", type=int, default=100_000, help="the source's maxMessagesPerTrigger")
    parser.add_argument("--catchup-timeout-s", type=float, default=1800)
    parser.add_argument("--stall-timeout-s", type=float, default=300, help="fail when no send is acked this long")
    parser.add_argument("--dir", help="an empty directory for the cluster, checkpoint, table and logs (kept)")
    parser.add_argument("--keep", action="store_true", help="keep the temp directory even when the run passed")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args(argv)
    if args.command == "driver":
        return driver_main(args)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
