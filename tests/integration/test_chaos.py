"""The chaos harness (issue 19) on a real cluster: a short run of random faults finds nothing,
and the harness can fail: with a mechanism switched off, its schedule finds the damage.

- `test_a_short_chaos_run_finds_no_anomaly`: 3 brokers, every default fault kind, ~20 s of
  faults (the default suite's one run; `epochlog chaos --seeds 20` is the soak).
- `test_without_kip903_the_disk_loss_schedule_loses_acknowledged_records`: KAFKA-14139's
  schedule (an empty replica let into the ISR, then the leader dies) with the fetch-epoch check
  off: lost writes; with it on: none.
- `test_without_coordinator_fencing_the_zombie_schedule_finds_a_fenced_write`: a second
  producer with the loop's transactional id between its transactions; with the coordinator's
  fencing off the old producer's next transaction commits and is read.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from epochlog.testing.chaos.checker import Anomaly
from epochlog.testing.chaos.runner import ChaosConfig, RunResult, run


def chaos(tmp_path: Path, **kwargs: object) -> RunResult:
    config = ChaosConfig(out=tmp_path / "runs", **kwargs)  # type: ignore[arg-type]
    result = run(config)
    for line in result.result.findings[:20]:
        print(line)
    return result


def client_stall(note: str) -> bool:
    return "still running" in note or "still blocked" in note


def test_a_short_chaos_run_finds_no_anomaly(tmp_path: Path) -> None:
    result = chaos(tmp_path, seed=11, duration_s=20, brokers=3)
    assert result.history.faults, "no fault was injected"
    assert result.result.acknowledged > 100
    assert result.history.final_reads["ck"], "the final read returned nothing"
    # a client stuck past its timeout is reported, not an anomaly of the history (librdkafka's
    # send_offsets_to_transaction waits without limit: confluentinc/librdkafka#5456)
    assert not [n for n in result.notes if not client_stall(n)], result.notes
    assert result.result.ok, [str(f) for f in result.result.findings[:10]]
    # every partition of the data topic was read back from the three replicas' disks
    assert all(len(r) == 3 for tp, r in result.history.replicas.items() if tp[0] == "chaos")
    assert (result.directory / "timeline.txt").exists()


@pytest.mark.slow
@pytest.mark.parametrize("kip903", [True, False], ids=["kip903-on", "kip903-off"])
def test_without_kip903_the_disk_loss_schedule_loses_acknowledged_records(
    tmp_path: Path, kip903: bool
) -> None:
    result = chaos(
        tmp_path,
        seed=3,
        duration_s=3,
        pause_s=(1.0, 1.0),  # one fault, then the run ends
        faults=["disk-loss-isr-race"],
        broker_config={"epochlog.test.kip903.enabled": str(kip903).lower()},
    )
    assert [f.kind for f in result.history.faults] == ["disk-loss-isr-race"]
    lost = result.result.counts()[Anomaly.LOST_WRITE]
    if kip903:
        assert result.result.ok, [str(f) for f in result.result.findings[:10]]
    else:
        assert lost > 0


@pytest.mark.slow
@pytest.mark.parametrize("fencing", [True, False], ids=["fencing-on", "fencing-off"])
def test_without_coordinator_fencing_the_zombie_schedule_finds_a_fenced_write(
    tmp_path: Path, fencing: bool
) -> None:
    result = chaos(
        tmp_path,
        seed=2,
        duration_s=12,
        faults=["zombie"],
        broker_config={"epochlog.test.txn.fencing.enabled": str(fencing).lower()},
    )
    assert any(f.kind == "zombie" for f in result.history.faults)
    fenced = result.result.counts()[Anomaly.FENCED_WRITE]
    if fencing:
        assert result.result.ok, [str(f) for f in result.result.findings[:10]]
    else:
        assert fenced > 0


@pytest.mark.slow
def test_network_clock_and_zookeeper_node_faults_run_in_a_lab_and_find_nothing(
    tmp_path: Path,
) -> None:
    """The cluster in network namespaces with a 3-node ZooKeeper ensemble: link faults of every
    class, clock jumps and a lost ZooKeeper node; afterwards the lab is gone."""
    import os
    import subprocess

    kinds = ["net-cut", "net-one-way", "net-delay", "net-loss", "clock-jump", "zk-node-lost"]
    result = chaos(tmp_path, seed=8, duration_s=30, pause_s=(1.0, 2.0), faults=kinds, zk_ensemble=3)
    timeline = "\n".join(result.timeline)
    assert "(3 servers)" in timeline
    if os.geteuid() != 0:  # no lab: the network kinds are dropped, and the output says so
        assert "SKIPPED network faults" in timeline
        return
    assert "network lab" in timeline
    links = [s.detail for s in result.history.faults if s.kind.startswith("net-")]
    assert links and all(" link " in d for d in links), links
    assert result.result.acknowledged > 100
    assert not [n for n in result.notes if not client_stall(n)], result.notes
    assert result.result.ok, [str(f) for f in result.result.findings[:10]]
    prefix = f"e{os.getpid():x}l"
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert prefix not in namespaces
