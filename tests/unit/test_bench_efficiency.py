"""bench/efficiency.py's pieces that decide what a figure says: the workload names, the
met / not met verdicts against issue 20's targets, the medians over repeats, the saved JSON
read back by `--compare`, and the servers' CPU clock and pinning (on a child process)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import efficiency_results as er  # noqa: E402
import server_cpu  # noqa: E402


def phase(records: int, seconds: float, cpu_s: float, **kw) -> er.Phase:
    return er.Phase(records=records, seconds=seconds, server_cpu_s=cpu_s, idle_cores=0.0, **kw)


def test_workload_key_round_trips_and_bad_keys_are_named():
    workload = er.Workload(3, 100, "small")
    assert workload.key == "rf3-100B-small"
    assert er.Workload.parse(workload.key) == workload
    assert er.Workload.parse("rf1-1024B-large").label == "RF 1, 1 KiB, large batches"
    for bad in ("rf2-100B-small", "rf3-100B-tiny", "rf3-200B-large", "three-100-small"):
        with pytest.raises(argparse.ArgumentTypeError, match=bad):
            er.Workload.parse(bad)


def test_ratio_cell_marks_a_target_met_at_or_below_it_and_not_met_above():
    assert "met" in er.ratio_cell(2.0, 1.0, 2.0) and "not met" not in er.ratio_cell(2.0, 1.0, 2.0)
    assert "not met" in er.ratio_cell(2.1, 1.0, 2.0)
    assert er.ratio_cell(3.0, 2.0) == "1.50x"  # no target: the ratio alone
    assert er.ratio_cell(None, 1.0, 2.0) == "-"
    assert er.ratio_cell(1.0, 0.0) == "-"


def test_every_issue_target_names_a_100_byte_workload_the_matrix_runs():
    for (key, direction), ratio in er.TARGET_RATIOS.items():
        workload = er.Workload.parse(key)
        assert workload.size == 100 and direction in ("produce", "consume") and ratio >= 2
        # consume is measured for large batches only
        assert direction == "produce" or workload.batching == "large"


def test_per_record_figures_and_idle_share():
    p = er.Phase(records=1000, seconds=0.5, server_cpu_s=0.002, idle_cores=0.01)
    assert p.us_per_record == pytest.approx(2.0)
    assert p.idle_us_per_record == pytest.approx(0.01 * 0.5 / 1000 * 1e6)
    assert p.rate == pytest.approx(2000)


def test_medians_take_each_figure_over_the_repeats():
    results = er.Results({})
    for cpu in (0.003, 0.001, 0.002):
        results.runs.append(er.Run("epochlog", "rf1-100B-large", phase(1000, 1.0, cpu)))
    results.runs.append(er.Run("mock", "rf1-100B-large", phase(1000, 1.0, 0.001)))
    m = er.medians(results)
    assert m[("epochlog", "rf1-100B-large")]["produce_us"] == pytest.approx(2.0)
    assert m[("mock", "rf1-100B-large")]["produce_us"] == pytest.approx(1.0)
    assert m[("epochlog", "rf1-100B-large")]["consume_us"] is None


def test_saved_results_read_back_equal():
    results = er.Results({"date": "d", "commit": "c"})
    results.runs.append(
        er.Run(
            "epochlog",
            "rf3-100B-large",
            phase(100, 1.0, 0.5, records_per_batch=10.0, records_per_request=10.0),
            phase(116, 2.0, 0.25),
        )
    )
    results.latency.append(er.Latency("epochlog", 3, 10_000, 9000, 1.0, 5.0, 9.0, 9990.0, 30.0))
    results.skipped["tansu"] = "why"
    back = er.Results.from_json(results.to_json())
    assert back == results


def test_load_names_a_file_that_is_not_results(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text('{"runs": 1}')
    with pytest.raises(SystemExit, match="x.json: not a results file"):
        er.load(bad)


def test_percentile():
    values = [float(v) for v in range(1, 101)]
    assert er.percentile(values, 50) == 51.0
    assert er.percentile(values, 99) == 100.0


def test_cpu_seconds_of_a_busy_child_and_its_pinning():
    child = subprocess.Popen(
        [sys.executable, "-c", "import time\nend = time.time() + 30\nwhile time.time() < end: pass"]
    )
    try:
        core = min(os.sched_getaffinity(0))
        assert server_cpu.pin([child.pid], {core}) >= 1
        assert server_cpu.unpinned_threads([child.pid], {core}) == []
        before = server_cpu.cpu_seconds([child.pid])
        while server_cpu.cpu_seconds([child.pid]) - before < 0.05:
            time.sleep(0.01)  # it spins: its CPU clock moves (no bound on how fast)
        assert child.pid in server_cpu.process_tree([os.getpid()])
    finally:
        child.kill()
        child.wait()
