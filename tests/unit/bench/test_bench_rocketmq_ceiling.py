"""bench.rocketmq_ceiling's report: the best Java configuration of each round, the ratios paired round by round."""

from __future__ import annotations

from typing import Any

from bench.rocketmq_ceiling.report import add_best, table


def _records() -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    # (kafka-sink, java-plain-1t, java-plain-4t, java-txn-8t, staticmq-EO) per round: round 1 is slow for all
    for run, values in enumerate([(300.0, 100.0, 150.0, 3.0, 1.5), (150.0, 60.0, 45.0, 1.5, 0.75)]):
        for system, value in zip(("kafka-sink", "java-plain-1t", "java-plain-4t", "java-txn-8t", "staticmq-EO"),
                                 values, strict=True):  # fmt: skip
            records.append({"figure": "sink", "case": "100 B", "value_bytes": 100, "system": system, "value": value,
                            "run": run, "rows": 1000, "cpu_s_per_m_rows": 10.0, "server_cpu_s_per_m_rows": 5.0,
                            "unit": "rows/s", "version": "5.5.0"})  # fmt: skip
        add_best(records, 100, run)
    return records


def test_the_best_thread_count_of_each_round_stands_for_java() -> None:
    best = {(r["system"], r["run"]): r for r in _records() if "best_of" in r}
    assert best[("java-plain", 0)]["value"] == 150.0 and best[("java-plain", 0)]["best_of"] == "java-plain-4t"
    assert best[("java-plain", 1)]["value"] == 60.0 and best[("java-plain", 1)]["best_of"] == "java-plain-1t"
    assert best[("java-transactional", 1)]["best_of"] == "java-txn-8t"


def test_the_table_pairs_the_ratios_by_round() -> None:
    lines = table(_records(), [100], ["kafka-sink", "java-plain", "java-transactional", "staticmq-EO"]).splitlines()
    systems = lines[2 : lines.index("")]  # after the header and its rule, before the ratios
    rows = {line.split()[0]: line for line in systems}
    assert rows["java-plain"].split()[2] == "105"  # median of 150 and 60
    assert "0.45x (0.40-0.50)" in next(x for x in lines if x.startswith("java-plain / kafka-sink"))
    assert "0.50x (0.50-0.50)" in next(x for x in lines if x.startswith("staticmq-EO / java-transactional"))
    assert "0.01x" in next(x for x in lines if x.startswith("staticmq-EO / kafka-sink"))
