"""The broker logs garbage collections that hold it for long (`node.process`)."""

from __future__ import annotations

import logging

import pytest

from epochlog.node import process as main


def collection(monkeypatch: pytest.MonkeyPatch, seconds: float, generation: int = 2) -> None:
    clock = iter([100.0, 100.0 + seconds])
    monkeypatch.setattr(main.time, "perf_counter", lambda: next(clock))
    main._log_slow_collections("start", {"generation": generation})
    main._log_slow_collections("stop", {"generation": generation, "collected": 7})


def test_a_slow_collection_is_logged_with_its_generation_and_duration(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger=main.__name__):
        collection(monkeypatch, 0.35)
    assert "garbage collection of generation 2 took 350 ms (7 collected)" in caplog.text


def test_a_quick_collection_is_not(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger=main.__name__):
        collection(monkeypatch, main.SLOW_COLLECTION_S / 2, generation=0)
    assert "garbage collection" not in caplog.text
