"""The chaos fault registry and the pure helpers behind the faults."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from epochlog.cli import chaos_cmd
from epochlog.protocol.records import RecordBatchBuilder, decode_batches
from epochlog.testing.chaos import faults
from epochlog.testing.chaos.faults import (
    FAULTS,
    Fault,
    _cut_tail,
    coordinator_partition,
    fault_kinds,
    register,
    session_password,
)


def test_the_session_password_is_the_one_zookeeper_generates() -> None:
    # java: new Random(0x0100000000000001L ^ 0xB3415C00L).nextBytes(new byte[16])
    assert session_password(72057594037927937).hex() == "054cc74a37327db215e702e20c73f005"


def test_every_kind_but_the_named_only_ones_is_on_by_default() -> None:
    kinds = fault_kinds(None)
    assert "kill-leader" in kinds and "zombie" in kinds
    assert "disk-loss-isr-race" not in kinds
    assert fault_kinds(["pause", " bounce "]) == ["pause", "bounce"]


def test_an_unknown_fault_kind_is_named_in_the_error() -> None:
    with pytest.raises(ValueError, match=r"unknown fault kinds \['net-cat'\]"):
        fault_kinds(["pause", "net-cat"])


def test_a_module_registers_a_new_kind_and_a_clash_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(faults, "FAULTS", dict(FAULTS))

    class Jam(Fault):
        kind = "jam"

    register(Jam)
    assert faults.FAULTS["jam"] is Jam

    class Other(Fault):
        kind = "jam"

    with pytest.raises(ValueError, match="registered twice"):
        register(Other)


def test_coordinator_partition_follows_kafkas_hash() -> None:
    # Utils.abs("chaos-group".hashCode()) % 50, as Kafka's GroupMetadataManager computes
    assert coordinator_partition("chaos-group", 50) == abs(_java_hash("chaos-group")) % 50


def _java_hash(text: str) -> int:
    h = 0
    for ch in text:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def test_cutting_the_tail_drops_whole_batches(tmp_path: Path) -> None:
    segment = tmp_path / "00000000000000000000.log"
    data = b""
    for base in range(5):
        builder = RecordBatchBuilder(base_offset=base)
        builder.append(0, None, f"v{base}".encode())
        data += builder.build()
    segment.write_bytes(data)
    assert _cut_tail(segment, 2) == 2
    assert [b.base_offset for b in decode_batches(segment.read_bytes())] == [0, 1, 2]


def test_the_cli_passes_every_argument_to_the_harness() -> None:
    parser = argparse.ArgumentParser()
    chaos_cmd.add_arguments(parser)
    args = parser.parse_args(
        [
            "--seed",
            "4",
            "--faults",
            "pause",
            "--config",
            "a=b",
            "--fault-module",
            "m",
            "--zk-ensemble",
            "3",
        ]  # fmt: skip
    )
    again = parser.parse_args(chaos_cmd.to_argv(args))
    assert vars(again) == vars(args)
    assert again.zk_ensemble == 3
