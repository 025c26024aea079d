"""The cluster demo (what `make demo` runs) passes its own check on a real local cluster."""

from __future__ import annotations

from rich.console import Console

from epochlog.cli.cluster_demo import run


def test_cluster_demo_keeps_every_acknowledged_event_through_a_leader_kill(tmp_path) -> None:
    console = Console(record=True, width=120)
    assert run(tmp_path, console, events=2000, rate=1000)
    text = console.export_text()
    assert "lost (acknowledged, not read)" in text
    assert "OK: every event was acknowledged and read back exactly once." in text
