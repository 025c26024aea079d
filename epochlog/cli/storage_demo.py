"""The storage demo: a writer killed with SIGKILL, a torn tail, recovery, and a check.

A child process appends record batches in every compression to a partition log (small segments,
so the log rolls) and prints each batch it has appended. The parent kills it with SIGKILL in the
middle, then cuts the active segment in the middle of its last batch, as a power cut during a
write would. Reopening the log without the clean-shutdown marker runs recovery; the parent then
reads everything back and checks that every whole batch the writer reported is there, byte for
byte, and nothing else.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from epochlog.protocol.compression import Compression
from epochlog.protocol.records import RecordBatchBuilder, decode_batches
from epochlog.storage import LogConfig, LogManager

TOPIC = "clickstream"
RECORDS_PER_BATCH = 20
SEGMENT_BYTES = 64 * 1024


def _batch(seq: int) -> tuple[bytes, Compression]:
    compression = list(Compression)[seq % len(Compression)]
    builder = RecordBatchBuilder(compression=compression)
    for i in range(RECORDS_PER_BATCH):
        event = {"seq": seq, "i": i, "page": f"/p/{(seq * 7 + i) % 13}", "country": "NL"}
        builder.append(1_700_000_000_000 + seq, f"user-{i}".encode(), json.dumps(event).encode())
    return builder.build(), compression


def writer(log_dir: str) -> None:
    """Child process: append batches forever, printing `seq base_offset` after each append."""
    manager = LogManager([log_dir], LogConfig(segment_bytes=SEGMENT_BYTES))
    manager.startup(broker_id=0)
    log = manager.get_or_create_log(TOPIC, 0)
    seq = 0
    while True:
        raw, _ = _batch(seq)
        info = log.append_as_leader(bytearray(raw), leader_epoch=seq // 100, now_ms=0)
        print(seq, info.first_offset, flush=True)
        seq += 1
        time.sleep(0.001)


def run(cluster_dir: Path, console: Console) -> bool:
    log_dir = cluster_dir / "storage-demo"
    shutil.rmtree(log_dir, ignore_errors=True)
    log_dir.mkdir(parents=True)
    console.rule("[bold]epochlog storage demo: kill -9, torn write, recovery")
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import epochlog.cli.storage_demo as d; d.writer({str(log_dir)!r})",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    acknowledged: dict[int, int] = {}
    assert child.stdout is not None
    with console.status("writer appending batches ...") as status:
        for line in child.stdout:
            seq, offset = map(int, line.split())
            acknowledged[seq] = offset
            status.update(f"writer appended {len(acknowledged)} batches")
            if len(acknowledged) >= 600:
                break
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    for line in child.stdout:  # lines printed before the kill
        seq, offset = map(int, line.split())
        acknowledged[seq] = offset
    console.print(f"writer (pid {child.pid}) killed with SIGKILL after {len(acknowledged)} batches")

    partition_dir = log_dir / f"{TOPIC}-0"
    segments = sorted(partition_dir.glob("*.log"))
    active = segments[-1]
    size = active.stat().st_size
    with open(active, "r+b") as f:
        f.truncate(size - 37)  # a torn write: the last batch loses its last 37 bytes
    console.print(
        f"{len(segments)} segments on disk; cut the active segment {active.name} from "
        f"{size} to {size - 37} bytes (mid-batch)"
    )

    started = time.perf_counter()
    manager = LogManager([log_dir], LogConfig(segment_bytes=SEGMENT_BYTES))
    manager.startup(broker_id=0)
    log = manager.get_log(TOPIC, 0)
    assert log is not None
    recovery_ms = (time.perf_counter() - started) * 1000
    offset = 0
    chunks = []
    while offset < log.log_end_offset:
        piece = log.read(offset, 1 << 30).read_bytes()
        chunks.append(piece)
        found = decode_batches(piece)
        offset = found[-1].next_offset
    batches = decode_batches(b"".join(chunks))

    kept = {b.records[0].offset // RECORDS_PER_BATCH: b for b in batches}
    ok = True
    mismatched = 0
    per_codec: dict[str, int] = {}
    for seq, batch in kept.items():
        expected, compression = _batch(seq)
        if decode_batches(expected)[0].records != [
            type(r)(r.offset - batch.base_offset, r.timestamp, r.key, r.value, r.headers)
            for r in batch.records
        ]:
            mismatched += 1
        per_codec[compression.name.lower()] = per_codec.get(compression.name.lower(), 0) + 1
    highest_written = max(acknowledged) if acknowledged else -1
    lost = sorted(set(acknowledged) - set(kept))
    phantom = sorted(set(kept) - set(range(highest_written + 2)))
    # Only the torn batch may be missing, and it must be the last one written.
    if mismatched or phantom or any(seq < max(kept) for seq in lost) or len(lost) > 1:
        ok = False
    log_end = log.log_end_offset
    manager.shutdown()

    table = Table(title="recovery after kill -9 and a torn write")
    table.add_column("what")
    table.add_column("value", justify="right")
    table.add_row("batches acknowledged by the writer", str(len(acknowledged)))
    table.add_row("batches kept after recovery", str(len(kept)))
    table.add_row("records kept", f"{sum(len(b.records) for b in batches):,}")
    table.add_row("log end offset", f"{log_end:,}")
    table.add_row("torn batch dropped", ", ".join(map(str, lost)) or "none")
    table.add_row("batches differing from what was written", str(mismatched))
    table.add_row("batches per compression", ", ".join(f"{k} {v}" for k, v in per_codec.items()))
    table.add_row("recovery time", f"{recovery_ms:.0f} ms")
    console.print(table)
    if ok:
        console.print(
            "[bold green]OK[/]: every whole batch survived byte for byte; the torn one "
            "was cut and nothing else."
        )
    else:
        console.print("[bold red]FAILED[/]: recovery lost or changed data (see the table).")
    return ok
