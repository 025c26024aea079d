"""The demo's check of its output topic, as any Kafka user would read it.

The counts job writes `clickstream-counts` with the exactly-once sink (Kafka transactions). The
demo reads the whole topic with a confluent-kafka (librdkafka) consumer at
isolation.level=read_committed, and once more at read_uncommitted to show what the log holds
besides (rows of aborted attempts), then `check_counts` compares the committed rows with what
the generator produced: each (window, dimension, value) once, and per-dimension and per-minute
totals equal to the acknowledged events. `check_counts` is pure; `read_topic` is the I/O.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

READ_TIMEOUT_S = 120.0  # a failure bound for reading the whole (small) topic


@dataclass
class CountsCheck:
    """What the committed rows of the counts topic say."""

    rows: int = 0
    repeated: int = 0  # rows of a (window, dimension, value) already read
    unreadable: int = 0  # rows that are not the counts job's JSON
    totals: Counter[str] = field(default_factory=Counter)  # per dimension
    per_minute: dict[int, int] = field(default_factory=dict)  # page counts per window start ms

    def exactly_once(self, produced: int, produced_per_minute: Mapping[int, int]) -> bool:
        return (
            self.repeated == 0
            and self.unreadable == 0
            and self.totals["page"] == produced
            and self.totals["country"] == produced
            and self.per_minute == dict(produced_per_minute)
        )


def check_counts(values: Iterable[bytes | None]) -> CountsCheck:
    """The counts job's rows (JSON: window_start ms, dimension, value, count) -> CountsCheck."""
    check = CountsCheck()
    seen: set[tuple[int, str, str]] = set()
    per_minute: Counter[int] = Counter()
    for raw in values:
        check.rows += 1
        try:
            row = json.loads(raw or b"")
            window, dimension, value, count = (
                int(row["window_start"]),
                str(row["dimension"]),
                str(row["value"]),
                int(row["count"]),
            )
        except (ValueError, KeyError, TypeError):
            check.unreadable += 1
            continue
        if (window, dimension, value) in seen:
            check.repeated += 1
            continue
        seen.add((window, dimension, value))
        check.totals[dimension] += count
        if dimension == "page":
            per_minute[window] += count
    check.per_minute = dict(per_minute)
    return check


def read_topic(bootstrap: str, topic: str, isolation_level: str) -> list[bytes | None]:
    """Every value in `topic` from the beginning to each partition's end at the time of reading
    (its last stable offset with read_committed), read by confluent-kafka."""
    import confluent_kafka as ck

    consumer = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"epochlog-demo-check-{isolation_level}",
            "isolation.level": isolation_level,
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    try:
        metadata = consumer.list_topics(topic, timeout=30)
        partitions = sorted(metadata.topics[topic].partitions)
        consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in partitions])
        values: list[bytes | None] = []
        at_end: set[int] = set()
        deadline = time.monotonic() + READ_TIMEOUT_S
        while len(at_end) < len(partitions):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}: not read to its end in {READ_TIMEOUT_S:.0f} s")
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            error = msg.error()
            if error is not None:
                if error.code() != ck.KafkaError._PARTITION_EOF:
                    raise RuntimeError(f"{topic}: {error}")
                at_end.add(msg.partition())
                continue
            values.append(msg.value())
        return values
    finally:
        consumer.close()
