# ruff: noqa: F811 - pytest fixtures imported from spark_fixtures are parameters here
"""The demo (what `make demo` runs) passes its own check on a real local cluster, in a short run:
the Spark pipeline counts every event exactly once through a leader killed mid-stream, and its
transactionally written counts topic reads back with read_committed every window once."""

from __future__ import annotations

import pytest
from rich.console import Console

from epochlog.cli.cluster_demo import run as run_cluster_demo
from epochlog.cli.spark_demo import DemoSettings
from epochlog.cli.spark_demo import run as run_spark_demo
from tests.integration.spark_fixtures import spark  # noqa: F401 - fixture


def test_spark_demo_counts_every_event_once_through_a_leader_kill(spark, tmp_path) -> None:
    console = Console(record=True, width=140)
    settings = DemoSettings(events=2000, rate=200.0, trigger="2 seconds", stall_s=90.0)
    assert run_spark_demo(tmp_path, console, settings, spark=spark)
    text = console.export_text()
    assert "counted in Parquet, per page" in text and "2,000 of 2,000" in text
    assert "leader of clickstream-0 killed -9" in text and "events sent when killed" in text
    assert "counts topic read committed (confluent-kafka)" in text
    assert "OK: every event was counted exactly once" in text
    assert "read committed: every window once" in text
    assert (tmp_path / "spark-demo" / "events_per_minute.png").stat().st_size > 1000
    assert not spark.streams.active  # the demo stopped its queries; the session is the test's


@pytest.mark.slow
def test_cluster_demo_keeps_every_acknowledged_event_through_a_leader_kill(tmp_path) -> None:
    console = Console(record=True, width=120)
    assert run_cluster_demo(tmp_path, console, events=2000, rate=1000)
    text = console.export_text()
    assert "lost (acknowledged, not read)" in text
    assert "OK: every event was acknowledged and read back exactly once." in text


def test_demo_refuses_a_non_positive_size_before_starting_anything(tmp_path, capsys) -> None:
    from epochlog.cli.main import main

    assert main(["demo", "--events", "0", "--dir", str(tmp_path)]) == 2
    assert main(["demo", "--no-spark", "--rate", "-5", "--dir", str(tmp_path)]) == 2
    out = capsys.readouterr().out
    assert "--events must be positive, not 0" in out and "--rate must be positive, not -5" in out
    assert list(tmp_path.iterdir()) == []  # no cluster directory was made
