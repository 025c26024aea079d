"""CPU of the leader's rebuild of a produced batch with the topic's compression.type.

Builds ~1 MB producer batches of keyed 100-byte records (values half random hex, half repeated,
so that they compress as text does) and times, per (producer codec -> topic codec) pair, what the
leader does before appending: validation's record walk alone (compression.type=producer, or the
codec already matching) and the walk plus `recompression.rebuild_batch` at the codec's Kafka
default level. Prints the best of --repeat rounds: ms per batch for each, and the ratio of the
two, the CPU cost of recompression against none.

Run: `.venv/bin/python bench/recompression.py [--repeat 5]`.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from epochlog.protocol.compression import Compression  # noqa: E402
from epochlog.protocol.recompression import rebuild_batch  # noqa: E402
from epochlog.protocol.record_validation import check_batch_records  # noqa: E402
from epochlog.protocol.records import RecordBatchBuilder, parse_batch_header  # noqa: E402
from epochlog.storage import LogConfig  # noqa: E402

BATCH_BYTES = 1_000_000
BOUND = 64 * BATCH_BYTES
PAIRS = [
    (Compression.NONE, Compression.GZIP),
    (Compression.NONE, Compression.LZ4),
    (Compression.NONE, Compression.ZSTD),
    (Compression.SNAPPY, Compression.ZSTD),
    (Compression.ZSTD, Compression.NONE),
    (Compression.GZIP, Compression.LZ4),
]


def producer_batch(codec: Compression) -> tuple[bytes, int]:
    builder = RecordBatchBuilder(compression=codec)
    n = 0
    while builder.estimated_size < BATCH_BYTES:
        value = os.urandom(25).hex().encode() + b"x" * 50
        builder.append(1_700_000_000_000 + n // 100, b"k%07d" % n, value)
        n += 1
    return builder.build(), n


def best_ms(action, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return min(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    levels = LogConfig()
    print(
        f"{'producer -> topic':<18} {'records':>8} {'walk ms':>8} {'+rebuild ms':>12} {'ratio':>6}"
    )
    for source, target in PAIRS:
        batch, n = producer_batch(source)
        header = parse_batch_header(batch)

        def walk(batch: bytes = batch, header=header) -> None:
            check_batch_records(batch, header, max_decompressed_bytes=BOUND)

        def walk_and_rebuild(batch: bytes = batch, header=header, target=target) -> None:
            check_batch_records(batch, header, max_decompressed_bytes=BOUND)
            rebuild_batch(
                batch,
                header,
                target,
                max_decompressed_bytes=BOUND,
                level=levels.compression_level(target),
            )

        plain = best_ms(walk, args.repeat)
        rebuilt = best_ms(walk_and_rebuild, args.repeat)
        pair = f"{source.name.lower()} -> {target.name.lower()}"
        print(f"{pair:<18} {n:>8} {plain:>8.1f} {rebuilt:>12.1f} {rebuilt / plain:>6.2f}")


if __name__ == "__main__":
    main()
