"""bench.peers' report: medians per system, ratios paired run by run, every run kept for the JSON."""

from __future__ import annotations

import pytest

from bench.common.report import Figures, paired_ratios, ratio_text, summary
from bench.peers.__main__ import main
from bench.peers.queue_chart import points
from bench.peers.queue_chart import table as queue_table
from bench.peers.report import table


def _figures() -> Figures:
    f = Figures({"staticmq": "0.1.0", "kafka": "4.1.0"})
    # run 0 is fast for both systems, run 2 slow for both: paired, the ratio stays 0.5 in every run
    for run, (ours, theirs) in enumerate([(200.0, 400.0), (150.0, 300.0), (100.0, 200.0)]):
        f.add("source", "staticmq", ours, run, case="100 B", cpu_s_per_m_rows=run + 1.0)
        f.add("source", "kafka", theirs, run, case="100 B", cpu_s_per_m_rows=4.0)
    return f


def test_ratios_pair_the_runs_of_one_round() -> None:
    ratios = paired_ratios(_figures().records, "source", "100 B", "staticmq", "kafka")
    assert ratios == [0.5, 0.5, 0.5]
    assert ratio_text(ratios) == "0.50x (0.50-0.50)"
    assert ratio_text([0.9]) == "0.90x"


def test_summary_keeps_every_run_and_gives_medians() -> None:
    merged = {r["system"]: r for r in summary(_figures().records)}
    assert merged["staticmq"]["runs"] == [200.0, 150.0, 100.0]
    assert merged["staticmq"]["value"] == 150.0
    assert merged["staticmq"]["cpu_runs"] == [1.0, 2.0, 3.0]
    assert merged["staticmq"]["cpu_s_per_m_rows"] == 2.0
    assert merged["kafka"]["version"] == "4.1.0"
    assert "run" not in merged["kafka"]


def test_table_prints_the_paired_ratio() -> None:
    line = next(x for x in table(_figures().records).splitlines() if x.startswith("source"))
    assert "0.50x (0.50-0.50)" in line


def test_peers_figures_option_names_an_unknown_figure(capsys: pytest.CaptureFixture[str]) -> None:

    with pytest.raises(SystemExit) as exited:
        main(["--figures", "source,speed"])
    assert exited.value.code == 2
    assert "--figures: speed; known: produce, consume, source, sink, latency" in capsys.readouterr().err


def test_queue_chart_takes_the_median_of_every_run_per_system_and_queue_count() -> None:
    files = [
        {"queues": q, "results": {"staticmq": [{"p50": 10.0 * q, "p99": 20.0}, {"p50": 30.0 * q, "p99": 40.0},
                                               {"p50": 20.0 * q, "p99": 30.0}],
                                  "kafka": [{"p50": 10.0, "p99": 50.0}]}}
        for q in (2, 8)
    ]  # fmt: skip
    by = points(files)
    assert by == {"staticmq": {2: (40.0, 30.0), 8: (160.0, 30.0)}, "kafka": {2: (10.0, 50.0), 8: (10.0, 50.0)}}
    again = {"queues": 2, "results": {"kafka": [{"p50": 30.0, "p99": 10.0}, {"p50": 40.0, "p99": 10.0}]}}
    assert points([*files, again])["kafka"][2] == (30.0, 10.0)  # the median of the three runs
    text = queue_table(by)
    assert "4.00x" in text and "16.00x" in text
