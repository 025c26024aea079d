"""How fast the log cleaner compacts 100 B records, beside a plain copy of the same segments.

Builds a compacted partition log of --mb megabytes of keyed records with 100-byte values (16 KiB
producer batches, as librdkafka sends them, uncompressed or --codec), seals it, and times one
cleaner pass (`LogCleaner.clean_once`: offset map, filter, write `.cleaned`, fsync, swap) for
three key spaces: every record superseded many times (10,000 keys), half the records
superseded, and every key unique (nothing to remove: batches are copied as they are). The anchor,
measured in the same run on the same files, is a plain copy: each segment read with pread in
`log.cleaner.io.buffer.size` chunks, written to a new file and fsynced, which is the I/O a pass
cannot avoid. MB/s counts the bytes of the log cleaned. A benchmark, not a timed test.

Run: `.venv/bin/python bench/compaction.py [--mb 64] [--codec lz4]`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from epochlog.protocol.compression import Compression  # noqa: E402
from epochlog.protocol.records import RecordBatchBuilder  # noqa: E402
from epochlog.storage import LogConfig, LogManager  # noqa: E402
from epochlog.storage.cleaner import CleanerConfig  # noqa: E402

NOW = 1_700_000_000_000
BATCH_BYTES = 16 * 1024
VALUE = 100


def progress(message: str) -> None:
    print(f"... {message}", file=sys.stderr, flush=True)


def build_log(directory: Path, megabytes: int, keys: int, codec: Compression) -> LogManager:
    config = LogConfig(
        segment_bytes=32 * 1024 * 1024, cleanup_policy="compact", min_cleanable_dirty_ratio=0.0
    )
    manager = LogManager([directory], config, cleaner_config=CleanerConfig())
    manager.startup(1, "bench", now_ms=NOW)
    log = manager.get_or_create_log("bench", 0)
    target = megabytes * 1_000_000
    values = os.urandom(VALUE * 1024)
    n = 0
    while log.size_in_bytes < target:
        builder = RecordBatchBuilder(codec)
        while builder.estimated_size < BATCH_BYTES:
            start = (n * 37) % (len(values) - VALUE)
            builder.append(NOW + n // 100, b"key-%08d" % (n % keys), values[start : start + VALUE])
            n += 1
        log.append_as_leader(builder.build(), 0, NOW)
    log.roll()
    log.flush()
    return manager


def plain_copy(source: Path, target: Path, buffer_size: int) -> int:
    """Copy every segment file of `source` into `target` chunk by chunk, fsynced; bytes copied."""
    target.mkdir()
    copied = 0
    for path in sorted(source.glob("*.log")):
        src = os.open(path, os.O_RDONLY)
        dst = os.open(target / path.name, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            position = 0
            while chunk := os.pread(src, buffer_size, position):
                os.pwrite(dst, chunk, position)
                position += len(chunk)
            os.fsync(dst)
            copied += position
        finally:
            os.close(src)
            os.close(dst)
    return copied


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=64, help="megabytes of log per case")
    parser.add_argument("--codec", default="none", choices=[c.name.lower() for c in Compression])
    parser.add_argument("--dir", default=None, help="where to build the logs (default: a temp dir)")
    args = parser.parse_args()
    codec = Compression[args.codec.upper()]
    io_buffer = CleanerConfig().io_buffer_size
    root = Path(tempfile.mkdtemp(prefix="epochlog-bench-compaction-", dir=args.dir))
    rows = []
    try:
        for label, keys_for in (
            ("10,000 keys", lambda records: 10_000),
            ("half superseded", lambda records: records // 2),
            ("every key unique", lambda records: 10**12),
        ):
            records = args.mb * 1_000_000 // (VALUE + 20)
            directory = root / label.replace(" ", "-").replace(",", "")
            progress(f"{label}: building {args.mb} MB of {VALUE} B records ({codec.name.lower()})")
            manager = build_log(directory, args.mb, keys_for(records), codec)
            log = manager.get_log("bench", 0)
            size = sum(s.size for s in log.segments)
            progress(f"{label}: plain copy of {size / 1e6:.0f} MB")
            started = time.perf_counter()
            copied = plain_copy(log.directory, root / f"copy-{directory.name}", io_buffer)
            copy_s = time.perf_counter() - started
            progress(f"{label}: one cleaner pass")
            started = time.perf_counter()
            assert manager.cleaner.clean_once()
            clean_s = time.perf_counter() - started
            stats = manager.cleaner.passes[-1]
            rows.append(
                (
                    label,
                    stats.records_read,
                    stats.records_kept,
                    stats.bytes_read / 1e6,
                    stats.bytes_written / 1e6,
                    stats.bytes_read / 1e6 / clean_s,
                    copied / 1e6 / copy_s,
                )
            )
            manager.shutdown()
            shutil.rmtree(directory)
            shutil.rmtree(root / f"copy-{directory.name}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(
        f"\nlog cleaner, {VALUE} B values, {BATCH_BYTES // 1024} KiB {codec.name.lower()} batches"
    )
    header = (
        f"{'case':18} {'records':>9} {'kept':>9} {'MB in':>7} {'MB out':>7} "
        f"{'clean MB/s':>10} {'copy MB/s':>10} {'clean/copy':>10}"
    )
    print(header)
    print("-" * len(header))
    for label, read, kept, mb_in, mb_out, clean_rate, copy_rate in rows:
        print(
            f"{label:18} {read:9d} {kept:9d} {mb_in:7.1f} {mb_out:7.1f} "
            f"{clean_rate:10.1f} {copy_rate:10.1f} {clean_rate / copy_rate:10.3f}"
        )


if __name__ == "__main__":
    main()
