"""CPU of produce validation's record walk (protocol.record_validation.check_batch_records).

Builds ~1 MB producer batches of keyed records (8-byte keys; 10 B, 100 B and 1 KiB values;
timestamps moving by 1 ms every 100 records, as a producer's batch looks) and times the walk the
broker does before appending each one: uncompressed in place, and (with --codecs) lz4 and zstd
decompressed as a stream. Prints the best of --repeat rounds per case: ms per batch, ns per
record and MB/s of batch bytes. The walk's cost is per record, whatever the value size; it is
compiled by `python -m epochlog._build` (`make setup`), pure Python otherwise: run it from the
tree that was built. Compiled, 100 B values, uncompressed: 348-353 ns a record while the walk
took a bytes/bytearray/memoryview union, 158 ns since it takes bytes (lz4 380 -> 172-175 ns).

Run: `.venv/bin/python bench/record_validation.py [--codecs] [--repeat 7]`.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from epochlog.protocol.compression import Compression  # noqa: E402
from epochlog.protocol.record_validation import check_batch_records  # noqa: E402
from epochlog.protocol.records import RecordBatchBuilder, parse_batch_header  # noqa: E402

BATCH_BYTES = 1_000_000


def producer_batch(value_size: int, codec: Compression) -> tuple[bytes, int]:
    builder = RecordBatchBuilder(compression=codec)
    n = 0
    while builder.estimated_size < BATCH_BYTES:
        builder.append(1_700_000_000_000 + n // 100, b"k%07d" % n, b"v" * value_size)
        n += 1
    return builder.build(), n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--codecs", action="store_true", help="also lz4 and zstd batches")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    codecs = [Compression.NONE]
    if args.codecs:
        codecs += [Compression.LZ4, Compression.ZSTD]
    for codec in codecs:
        for value_size in (10, 100, 1000):
            raw, n = producer_batch(value_size, codec)
            header = parse_batch_header(raw)
            best = float("inf")
            for _ in range(args.repeat):
                started = time.perf_counter()
                check_batch_records(raw, header, max_decompressed_bytes=64 * BATCH_BYTES)
                best = min(best, time.perf_counter() - started)
            print(
                f"{codec.name.lower():5} value {value_size:5d} B: {n:6d} records, "
                f"{best * 1e3:6.2f} ms/batch, {best / n * 1e9:5.0f} ns/record, "
                f"{len(raw) / best / 1e6:6.0f} MB/s"
            )


if __name__ == "__main__":
    main()
