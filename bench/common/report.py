"""The report every benchmark prints: progress lines on stderr, timed runs of each side interleaved
(warm-ups first), their medians (or best), ratios against a reference measured in the same run, and
the table on stdout (on stderr when the JSON goes to stdout).

- `log`, `emit`: progress lines (stderr) and the final table;
- `interleaved`: warm-up runs, then `repeat` rounds running every side in turn (A B A B ...);
- `measure`: `repeat` timed runs of one side, msgs/s each (the Redis comparisons);
- `versus`: best-of rows staticmq / Redis against a target (the Redis comparisons);
- `run_summary`: median and best rows/s of AvailableNow query runs (`bench.common.spark.run_query`);
- `Figures`, `summary`, `paired_ratios`, `ratio_text`: one record per run, the medians per figure and
  system, ratios paired round by round, median (min-max) (`bench.peers`, `bench.rocketmq_ceiling`).
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any, TextIO, TypeVar

T = TypeVar("T")
Runner = Callable[[int], Callable[[], None]]  # setup(run index) -> the timed part


def log(text: str) -> None:
    """A progress line, on stderr (stdout is kept for --json)."""
    print(text, file=sys.stderr, flush=True)


def emit(lines: list[str], json_too: bool) -> None:
    """The result table: on stdout, or on stderr when --json prints JSON on stdout."""
    stream: TextIO = sys.stderr if json_too else sys.stdout
    print("\n".join(lines), file=stream)


def interleaved(
    sides: Iterable[str],
    warmup: int,
    repeat: int,
    run: Callable[[str, int], T],
    show: Callable[[str, str, T], None] | None = None,
    after_round: Callable[[str, dict[str, T]], None] | None = None,
) -> dict[str, list[T]]:
    """`warmup` untimed rounds, then `repeat` timed ones; each round runs every side in turn,
    `run(side, round index)`. `show(side, label, result)` after each run and `after_round(label,
    results of the round)` after each round, the label "warm-up" or "run i/repeat". The timed
    results per side, in round order."""
    results: dict[str, list[T]] = {side: [] for side in sides}
    for n in range(warmup + repeat):
        timed = n >= warmup
        label = f"run {n - warmup + 1}/{repeat}" if timed else "warm-up"
        got: dict[str, T] = {}
        for side in results:
            got[side] = run(side, n)
            if show is not None:
                show(side, label, got[side])
        if timed:
            for side, result in got.items():
                results[side].append(result)
        if after_round is not None:
            after_round(label, got)
    return results


def measure(label: str, setup: Runner, messages: int, repeat: int, width: int = 44) -> list[float]:
    """`repeat` runs of `setup(i)()`, only the returned closure timed; msgs/s of each run."""
    rates = []
    for i in range(repeat):
        run = setup(i)
        t0 = time.perf_counter()
        run()
        rates.append(messages / (time.perf_counter() - t0))
        print(f"  {label:<{width}} run {i + 1}/{repeat}: {rates[-1]:>11,.0f} msgs/s", file=sys.stderr, flush=True)
    return rates


def versus(
    rows: list[tuple[str, list[float], list[float], float | None]], width: int
) -> tuple[list[dict[str, Any]], list[str]]:
    """Rows (test, staticmq msgs/s runs, Redis msgs/s runs, target or None): the best run of each
    side, their ratio and verdict (PASS/FAIL, `info` without a target); the results and the table."""
    results = []
    for test, sm, red, target in rows:
        ratio = max(sm) / max(red)
        results.append(
            {
                "test": test,
                "staticmq_msgs_per_s": round(max(sm)),
                "redis_msgs_per_s": round(max(red)),
                "ratio": round(ratio, 2),
                "target": target,
                "pass": None if target is None else ratio >= target,
                "staticmq_runs": [round(r) for r in sm],
                "redis_runs": [round(r) for r in red],
            }
        )
    table = [f"{'test':<{width}} {'staticmq msgs/s':>15} {'redis msgs/s':>13} {'ratio':>6} {'target':>7}  result"]
    for r in results:
        target_text = "-" if r["target"] is None else f"{r['target']:.1f}x"
        verdict = "info" if r["pass"] is None else ("PASS" if r["pass"] else "FAIL")
        table.append(
            f"{r['test']:<{width}} {r['staticmq_msgs_per_s']:>15,} {r['redis_msgs_per_s']:>13,} "
            f"{r['ratio']:>5.2f}x {target_text:>7}  {verdict}"
        )
    return results, table


def run_summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Median and best rows/s of query runs (`run_query`'s results), every run rounded."""
    return {
        "rows_per_s_median": round(statistics.median(r["rows_per_s"] for r in runs)),
        "rows_per_s_best": round(max(r["rows_per_s"] for r in runs)),
        "spark_rows_per_s_median": round(statistics.median(r["spark_rows_per_s"] for r in runs)),
        "outside_batches_s_median": round(statistics.median(r["outside_batches_s"] for r in runs), 2),
        "runs": [
            {**r, "rows_per_s": round(r["rows_per_s"]), "spark_rows_per_s": round(r["spark_rows_per_s"])} for r in runs
        ],
    }


# ------------------------------------------------------------------- figures paired round by round


UNITS = {"latency_p50": "ms", "latency_p99": "ms"}


class Figures:
    """Every measured figure, one record per run (`run` counts the interleaved rounds from 0)."""

    def __init__(self, versions: dict[str, str]) -> None:
        self.versions = versions
        self.records: list[dict[str, Any]] = []

    def add(self, figure: str, system: str, value: float, run: int = 0, **extra: Any) -> None:
        unit = UNITS.get(figure, "rows/s")
        version = self.versions.get(system, self.versions["staticmq"])
        self.records.append({"figure": figure, "system": system, "value": round(value, 2), "unit": unit,
                             "version": version, "run": run, **extra})  # fmt: skip
        shown = f"{value:,.1f} {unit}" if unit == "ms" else f"{value:,.0f} rows/s"
        cpu = f", {extra['cpu_s_per_m_rows']:.1f} CPU-s/M rows" if "cpu_s_per_m_rows" in extra else ""
        log(f"  {figure:<12} {system:<10} {extra.get('case', ''):<34} run {run + 1}: {shown}{cpu}")


def summary(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One record per figure, case and system: `value` and `cpu_s_per_m_rows` the medians of its runs,
    `runs` / `cpu_runs` every run's value in run order (the JSON `--json` writes)."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in records:
        groups.setdefault((r["figure"], r["case"], r["system"]), []).append(r)
    out = []
    for group in groups.values():
        runs = sorted(group, key=lambda r: r["run"])
        merged = {k: v for k, v in runs[0].items() if k != "run"}
        merged["runs"] = [r["value"] for r in runs]
        merged["value"] = round(statistics.median(merged["runs"]), 2)
        if all("cpu_s_per_m_rows" in r for r in runs):
            merged["cpu_runs"] = [r["cpu_s_per_m_rows"] for r in runs]
            merged["cpu_s_per_m_rows"] = round(statistics.median(merged["cpu_runs"]), 2)
        out.append(merged)
    return out


def paired_ratios(records: list[dict[str, Any]], figure: str, case: str, num: str, den: str) -> list[float]:
    """num / den for every run both systems measured (runs pair by their round: A B A B ...)."""
    by_run: dict[int, dict[str, float]] = {}
    for r in records:
        if r["figure"] == figure and r["case"] == case and r["system"] in (num, den):
            by_run.setdefault(r["run"], {})[r["system"]] = r["value"]
    return [v[num] / v[den] for _, v in sorted(by_run.items()) if num in v and den in v and v[den]]


def ratio_text(ratios: list[float]) -> str:
    """`1.02x (0.95-1.10)`: the median of the paired ratios and their range; one run: the ratio alone."""
    if not ratios:
        return ""
    median = f"{statistics.median(ratios):.2f}x"
    return median if len(ratios) == 1 else f"{median} ({min(ratios):.2f}-{max(ratios):.2f})"
