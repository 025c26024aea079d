"""Exactly-once consume-transform-produce with epochlog's client (Kafka's EOS pattern).

    input topic --(read_committed consumer in group G)--> transform
        --(transactional producer)--> output topic, and G's offsets in the same transaction

Each batch of polled records becomes one transaction: the transformed records and the group's
next offsets (`send_offsets_to_transaction` with the consumer's `group_metadata()`) commit
together or not at all. A crash or a failed commit leaves neither the output nor the offsets,
so the records are read and transformed again and every input record appears in the output
exactly once for read_committed readers. A rebalance fences a member of the old generation
(TxnOffsetCommit refuses it), and a second copy of this process with the same transactional.id
fences the first (PRODUCER_FENCED).

Run it against any Kafka-protocol cluster:

    python examples/consume_transform_produce.py --bootstrap-servers HOST:9092 \\
        --input words --output upper-words --group upper --transactional-id upper-1
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable, Mapping
from typing import Any

from epochlog.client import (
    Consumer,
    ConsumerRecord,
    Producer,
    TopicPartition,
    TransactionStateError,
)

log = logging.getLogger("consume_transform_produce")


def upper(record: ConsumerRecord) -> bytes | None:
    return record.value.upper() if record.value is not None else None


def run(
    bootstrap_servers: str,
    input_topic: str,
    output_topic: str,
    group_id: str,
    transactional_id: str,
    transform: Callable[[ConsumerRecord], bytes | None] = upper,
    *,
    stop_after_idle_polls: int | None = None,
    consumer_config: Mapping[str, Any] | None = None,
) -> int:
    """Process until `stop_after_idle_polls` polls in a row return nothing once partitions are
    assigned (None: forever); returns how many input records were committed."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": group_id,
            "isolation.level": "read_committed",  # never transform an aborted input record
            "enable.auto.commit": False,  # offsets commit with the transaction instead
            "auto.offset.reset": "earliest",
            **(consumer_config or {}),
        }
    )
    producer = Producer(
        {"bootstrap.servers": bootstrap_servers, "transactional.id": transactional_id}
    )
    committed = 0
    try:
        producer.init_transactions()
        consumer.subscribe([input_topic])
        idle = 0
        while stop_after_idle_polls is None or idle < stop_after_idle_polls:
            records = consumer.poll(1.0)
            if not records:
                idle += 1 if consumer.assignment() else 0  # joining the group is not idling
                continue
            idle = 0
            if process(consumer, producer, output_topic, records, transform):
                committed += len(records)
    finally:
        producer.close()
        consumer.close()
    return committed


def process(
    consumer: Consumer,
    producer: Producer,
    output_topic: str,
    records: list[ConsumerRecord],
    transform: Callable[[ConsumerRecord], bytes | None],
) -> bool:
    """One transaction for `records`; False (and the consumer rewound) if it was aborted."""
    producer.begin_transaction()
    try:
        for record in records:
            producer.send(output_topic, transform(record), key=record.key)
        next_offsets: dict[tuple[str, int], int] = {}
        for record in records:
            next_offsets[(record.topic, record.partition)] = record.offset + 1
        producer.send_offsets_to_transaction(next_offsets, consumer.group_metadata())
        producer.commit_transaction()
        return True
    except TransactionStateError:
        raise  # fatal (fenced, unauthorized): this producer can only close
    except Exception as exc:
        log.warning("transaction aborted: %s", exc)
        producer.abort_transaction()  # raises TransactionStateError if the error was fatal
        rewind_to_committed(consumer, {(r.topic, r.partition) for r in records})
        return False


def rewind_to_committed(consumer: Consumer, partitions: set[tuple[str, int]]) -> None:
    """Read the aborted batch again from the group's committed offsets."""
    committed = consumer.committed(sorted(partitions))
    for tp in partitions:
        offset = committed.get(TopicPartition(*tp))
        if offset is not None:
            consumer.seek(tp, offset.offset)
        else:
            consumer.seek_to_beginning([tp])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap-servers", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--transactional-id", required=True)
    parser.add_argument("--stop-after-idle-polls", type=int, default=None)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO)
    count = run(
        args.bootstrap_servers,
        args.input,
        args.output,
        args.group,
        args.transactional_id,
        stop_after_idle_polls=args.stop_after_idle_polls,
    )
    print(f"committed {count} records")


if __name__ == "__main__":
    main()
