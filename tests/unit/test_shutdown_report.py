"""A controlled shutdown that leaves partitions led by the stopping broker is reported, not
taken for success (issue 20, item 3): the line the broker logs and what the CLI reads back."""

from __future__ import annotations

import argparse

from rich.console import Console

from epochlog.cli import commands
from epochlog.node.local_cluster import LocalCluster
from epochlog.node.shutdown_report import (
    IncompleteShutdown,
    incomplete_shutdown_in,
    report_line,
)


def test_the_reported_partitions_are_read_back_from_the_brokers_output():
    output = "\n".join(
        [
            "2026-11-26 INFO [broker 1] something else",
            "2026-11-26 ERROR [broker 1] epochlog.node.process: "
            + report_line(1, 4, True, ["big-3", "big-7"]),
            "2026-11-26 INFO [broker 1] broker 1 stopped",
        ]
    )
    assert incomplete_shutdown_in(output) == IncompleteShutdown(1, 4, True, ("big-3", "big-7"))


def test_a_clean_shutdown_reports_nothing():
    assert incomplete_shutdown_in("controlled shutdown of broker 1 succeeded\n") is None


def test_a_torn_report_line_is_not_taken_for_a_report():
    torn = report_line(2, 4, True, ["t-0"])[:-5]
    assert incomplete_shutdown_in(torn) is None


class FakeCluster:
    def __init__(self, left: IncompleteShutdown | None) -> None:
        self.brokers = {1: object()}
        self.left = left

    def stop_broker(self, broker_id: int) -> IncompleteShutdown | None:
        return self.left


def run_stop(monkeypatch, left: IncompleteShutdown | None) -> tuple[int, str]:
    monkeypatch.setattr(LocalCluster, "attach", staticmethod(lambda d: FakeCluster(left)))
    console = Console(record=True, width=200)
    args = argparse.Namespace(broker_command="stop", id=1, dir="/nowhere", config=None)
    code = commands.cmd_broker(args, console)
    return code, console.export_text()


def test_broker_stop_names_the_partitions_left_offline_and_fails(monkeypatch):
    code, text = run_stop(monkeypatch, IncompleteShutdown(1, 4, True, ("big-3", "big-7")))
    assert code == 1
    assert "left 2 partitions led by it after 4 attempts" in text
    assert "big-3, big-7" in text


def test_broker_stop_says_when_no_controller_answered(monkeypatch):
    code, text = run_stop(monkeypatch, IncompleteShutdown(1, 4, False, ()))
    assert code == 1
    assert "no controller answered in 4 attempts" in text


def test_broker_stop_names_the_error_when_the_controller_refused(monkeypatch):
    left = incomplete_shutdown_in(report_line(1, 4, True, [], "STALE_BROKER_EPOCH"))
    assert left is not None
    code, text = run_stop(monkeypatch, left)
    assert code == 1
    assert "the controller answered STALE_BROKER_EPOCH 4 times" in text


def test_broker_stop_succeeds_when_the_shutdown_was_complete(monkeypatch):
    code, text = run_stop(monkeypatch, None)
    assert code == 0
    assert "stop done" in text
