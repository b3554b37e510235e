"""The figures of `bench.peers`: one record per run, their medians per figure and system, the ratios
staticmq / Kafka paired run by run (median and min-max), and the printed table."""

from __future__ import annotations

import statistics
from typing import Any

from bench.harness import log

UNITS = {"latency_p50": "ms", "latency_p99": "ms"}
SYSTEMS = ("staticmq", "staticmq-on-rocketmq", "kafka", "rocketmq")


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


def table(records: list[dict[str, Any]]) -> str:
    """One line per figure and case: the median of each system, then staticmq / Kafka paired by run
    (median and min-max) and, when measured, staticmq-on-rocketmq / staticmq."""
    merged = summary(records)
    systems = [s for s in SYSTEMS if any(r["system"] == s for r in merged)]
    keys: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for r in merged:
        keys.setdefault((r["figure"], r["case"]), {})[r["system"]] = r
    head = f"{'figure':<12} {'case':<44}" + "".join(f"{s:>22}" for s in systems)
    head += f"{'staticmq/kafka':>22}{'on-rocketmq/staticmq':>22}"
    lines = [head, "-" * len(head)]
    for (figure, case), by in keys.items():
        cells = []
        for s in systems:
            cell = by.get(s)
            if cell is None:
                cells.append(f"{'':>22}")
            elif cell["unit"] == "ms":
                cells.append(f"{cell['value']:>19,.1f} ms")
            elif "cpu_s_per_m_rows" in cell:
                cells.append(f"{cell['value']:>9,.0f} /s {cell['cpu_s_per_m_rows']:>5.1f} cpu")
            else:
                cells.append(f"{cell['value']:>9,.0f} /s {'-':>9}")
        vs_kafka = ratio_text(paired_ratios(records, figure, case, "staticmq", "kafka"))
        on_rmq = ratio_text(paired_ratios(records, figure, case, "staticmq-on-rocketmq", "staticmq"))
        lines.append(f"{figure:<12} {case:<44}" + "".join(cells) + f"{vs_kafka:>22}{on_rmq:>22}")
    lines.append(
        "medians of the runs; rows/s and CPU-seconds per million rows (all processes of the system + client);"
        " ratios paired run by run: median (min-max); latency: lower is better"
    )
    return "\n".join(lines)
