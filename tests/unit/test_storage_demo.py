"""The storage demo (what `make demo` runs today) passes its own check end to end."""

from __future__ import annotations

from rich.console import Console

from epochlog.cli.storage_demo import run


def test_storage_demo_recovers_every_whole_batch(tmp_path) -> None:
    console = Console(record=True, width=120)
    assert run(tmp_path, console)
    text = console.export_text()
    assert "killed with SIGKILL" in text
    assert "batches differing from what was written" in text
