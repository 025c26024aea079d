"""The `epochlog` command end to end: up, status, topics, produce, consume, broker ops, down."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable

import pytest


def epochlog(
    *args: str, input: str | None = None, check: bool = True
) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [sys.executable, "-m", "epochlog", *args],
        input=input,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if check:
        assert result.returncode == 0, result.stdout + result.stderr
    return result


@pytest.fixture
def cluster_dir(tmp_path):
    directory = tmp_path / "cluster"
    yield str(directory)
    epochlog("down", "--dir", str(directory), check=False)
    state = directory / "cluster.json"
    if state.exists():  # `down` failed: stop what `up` started, by pid
        info = json.loads(state.read_text())
        pids = [b["pid"] for b in info["brokers"].values()] + [info["zookeeper_pid"]]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, TypeError):
                os.kill(pid, signal.SIGKILL)


def status(directory: str) -> dict:
    return json.loads(epochlog("status", "--json", "--dir", directory).stdout)


def under_replicated(state: dict, topic: str) -> list[int]:
    return [
        p["partition"] for p in state["partitions"] if p["topic"] == topic and p["under_replicated"]
    ]


def wait_for_status(directory: str, ok: Callable[[dict], bool], what: str) -> dict:
    deadline = time.monotonic() + 60
    while True:
        state = status(directory)
        if ok(state):
            return state
        assert time.monotonic() < deadline, f"no {what} within 60 s: {state['partitions']}"
        time.sleep(0.5)


def test_a_local_cluster_from_the_command_line(cluster_dir) -> None:
    up = epochlog("up", "--brokers", "3", "--dir", cluster_dir)
    assert "bootstrap servers" in up.stdout
    # `up` prints each broker's Prometheus endpoint, and each answers a scrape
    endpoints = dict(re.findall(r"broker (\d+) metrics: (http://\S+/metrics)", up.stdout))
    assert sorted(endpoints) == ["1", "2", "3"], up.stdout
    for endpoint in endpoints.values():
        with urllib.request.urlopen(endpoint, timeout=10) as scraped:
            assert b"epochlog_broker_epoch " in scraped.read()
    before = status(cluster_dir)
    assert before["controller"] in (1, 2, 3)
    assert [b["id"] for b in before["brokers"]] == [1, 2, 3]

    epochlog(
        "topics",
        "create",
        "--topic",
        "events",
        "--partitions",
        "3",
        "--replication-factor",
        "1",
        "--dir",
        cluster_dir,
    )
    assert "events" in epochlog("topics", "list", "--dir", cluster_dir).stdout
    described = epochlog("topics", "describe", "--topic", "events", "--dir", cluster_dir).stdout
    assert described.count("events") >= 3
    again = epochlog(
        "topics",
        "create",
        "--topic",
        "events",
        "--partitions",
        "3",
        "--dir",
        cluster_dir,
        check=False,
    )
    assert again.returncode != 0 and "TOPIC_ALREADY_EXISTS" in again.stderr + again.stdout

    elected = epochlog("leaders", "elect", "--preferred", "--topic", "events", "--dir", cluster_dir)
    assert "3 of 3 partitions are led by their preferred replica" in elected.stdout

    lines = [f"user-{i}:click {i}" for i in range(50)]
    epochlog(
        "produce",
        "events",
        "--key-separator",
        ":",
        "--dir",
        cluster_dir,
        input="\n".join(lines) + "\n",
    )
    consumed = epochlog(
        "consume",
        "events",
        "--from-beginning",
        "--max-messages",
        "50",
        "--print-key",
        "--timeout-ms",
        "20000",
        "--dir",
        cluster_dir,
    ).stdout
    assert sorted(consumed.splitlines()) == sorted(line.replace(":", "\t") for line in lines)

    epochlog(
        "topics",
        "create",
        "--topic",
        "replicated",
        "--partitions",
        "2",
        "--replication-factor",
        "3",
        "--dir",
        cluster_dir,
    )
    wait_for_status(cluster_dir, lambda s: not under_replicated(s, "replicated"), "a full ISR")

    epochlog("broker", "kill", "2", "--dir", cluster_dir)
    epochlog("broker", "start", "2", "--dir", cluster_dir)
    wait_for_status(cluster_dir, lambda s: not under_replicated(s, "replicated"), "2 back in ISRs")
    epochlog("broker", "stop", "3", "--dir", cluster_dir)
    # A controlled shutdown shrinks the broker out of every ISR: the status says so.
    stopped = status(cluster_dir)
    replicated = [p for p in stopped["partitions"] if p["topic"] == "replicated"]
    assert [p["under_replicated"] for p in replicated] == [True, True]
    assert all(3 not in p["isr"] and p["leader"] != 3 for p in replicated)
    text = epochlog("status", "--dir", cluster_dir).stdout
    assert text.count("under-replicated") == 2 and "broker epoch" in text
    epochlog("broker", "start", "3", "--dir", cluster_dir)
    wait_for_status(cluster_dir, lambda s: not under_replicated(s, "replicated"), "3 back in ISRs")
    after = status(cluster_dir)
    epochs = {b["id"]: b["epoch"] for b in after["brokers"]}
    old = {b["id"]: b["epoch"] for b in before["brokers"]}
    assert epochs[1] == old[1]
    assert epochs[2] > old[2] and epochs[3] > old[3]  # new generations (KIP-380)
    assert all(not p["offline"] for p in after["partitions"])
    consumed = epochlog(
        "consume",
        "events",
        "--from-beginning",
        "--max-messages",
        "50",
        "--timeout-ms",
        "20000",
        "--dir",
        cluster_dir,
    ).stdout
    assert len(consumed.splitlines()) == 50

    # As a group member (kafka-console-consumer's --group): it commits what it read, so a second
    # run of the same group reads nothing again.
    def consume_as_group() -> list[str]:
        return epochlog(
            "consume",
            "events",
            "--group",
            "console",
            "--from-beginning",
            "--timeout-ms",
            "5000",
            "--dir",
            cluster_dir,
        ).stdout.splitlines()

    assert len(consume_as_group()) == 50
    assert consume_as_group() == []
    described = epochlog("groups", "describe", "console", "--json", "--dir", cluster_dir).stdout
    assert '"console"' in described

    epochlog("topics", "delete", "--topic", "events", "--dir", cluster_dir)
    assert "events" not in epochlog("topics", "list", "--dir", cluster_dir).stdout
    down = epochlog("down", "--dir", cluster_dir)
    assert "stopped" in down.stdout


def test_bad_command_line_input_names_what_was_wrong(cluster_dir, tmp_path) -> None:
    bad = epochlog("up", "--dir", cluster_dir, "--config", "log.retention.hourz=1", check=False)
    assert bad.returncode == 2 and "log.retention.hourz" in bad.stderr
    assert not (tmp_path / "cluster" / "cluster.json").exists()  # nothing was started
    missing = epochlog("status", "--dir", str(tmp_path / "nowhere"), check=False)
    assert missing.returncode == 2 and "epochlog up" in missing.stderr
    properties = tmp_path / "server.properties"
    properties.write_text("broker.id=1\nzookeeper.connect=127.0.0.1:1\nlisteners=nonsense\n")
    broker = epochlog("broker", "start", "--config", str(properties), check=False)
    assert broker.returncode == 2 and "listeners" in broker.stderr
