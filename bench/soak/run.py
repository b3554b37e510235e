"""The run: the fault plan, the run loop that produces, injects the faults and has the query catch
up, and the faults themselves (remap, broker kill -9 and restart, driver kill -9 and restart)."""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.soak.clusters import TOTAL_QUEUES, Backend, RocketMQBackend, StaticMQBackend
from bench.soak.query import Driver
from bench.soak.traffic import Sender, wait_route
from bench.soak.verdict import check, summary

REMAP_PLAN = [(1, 2), (0,), (0, 1, 2), (2,), (0, 1), (1,), (0, 2), (0, 1, 2), (1, 2), (0, 1, 2)]


def log(text: str) -> None:
    print(f"[soak {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


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
    summary(figures)
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
        targets = [backend.brokers[i] for i in REMAP_PLAN[n % len(REMAP_PLAN)]]
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
