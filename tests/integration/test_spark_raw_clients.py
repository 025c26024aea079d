"""The Spark source's executor-side clients against a real broker: `BatchSender` and `RangeFetcher`.

The Spark tests reach these through Spark; here they are driven directly, for the paths a Spark
job rarely takes: every `acks` setting, a batch the broker refuses as too large (split in halves
until it fits, in order, every record once), a single record that can never fit (an error that
names it, nothing written), and the fetcher's answers for an offset out of range and a partition
that does not exist.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator

import pytest

from epochlog.client import Admin
from epochlog.client.errors import MessageTooLargeError
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.records import RecordBatchBuilder, decode_batches
from epochlog.spark.arrow_records import EncodedBatch
from epochlog.spark.raw_clients import BatchSender, RangeFetcher
from epochlog.testing.cluster import LocalCluster

TIMEOUT_S = 30
_topics = itertools.count()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    c = LocalCluster(tmp_path_factory.mktemp("raw-clients"), 1)
    c.start()
    try:
        yield c
    finally:
        c.close()


@pytest.fixture(scope="module")
def fetcher(cluster: LocalCluster) -> Iterator[RangeFetcher]:
    f = RangeFetcher({"bootstrap.servers": cluster.bootstrap_servers})
    try:
        yield f
    finally:
        f.close()


def new_topic(cluster: LocalCluster, partitions: int = 1, **configs: str) -> str:
    name = f"raw-{next(_topics)}"
    with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
        admin.create_topic(name, partitions, 1, configs)
    return name


def build(values: list[bytes]) -> EncodedBatch:
    builder = RecordBatchBuilder()
    for i, value in enumerate(values):
        builder.append(1_700_000_000_000 + i, str(i).encode(), value, [("h", value[:4])])
    return EncodedBatch(builder.build(), len(values))


def send_all(sender: BatchSender, tp: tuple[str, int], batches: list[EncodedBatch]) -> None:
    for future in sender.send(tp, batches):
        future.result(TIMEOUT_S)


def read_all(
    fetcher: RangeFetcher, tp: tuple[str, int], batch_sizes: list[int] | None = None
) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every record in the partition, fetched from offset 0 to the end;
    `batch_sizes` gets the number of records of each batch read."""
    out: list[tuple[int, bytes | None]] = []
    offset = 0
    while True:
        result = fetcher.submit(tp, offset).result(TIMEOUT_S)
        assert result.error is ErrorCode.NONE, result
        for batch in decode_batches(result.records or b""):
            for r in batch.records:
                if r.offset >= offset:
                    out.append((r.offset, r.value))
            if batch_sizes is not None:
                batch_sizes.append(len(batch.records))
            offset = batch.header.last_offset + 1
        if offset >= result.high_watermark:
            return out


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_every_acks_setting_delivers_batches_in_order(
    cluster: LocalCluster, fetcher: RangeFetcher, acks: str
) -> None:
    topic = new_topic(cluster)
    values = [f"{acks}-{i:04d}".encode() * 5 for i in range(300)]
    settings = {"bootstrap.servers": cluster.bootstrap_servers, "acks": acks}
    if acks != "all":
        settings["enable.idempotence"] = "false"  # idempotence requires acks=all, as Kafka's
    sender = BatchSender(settings)
    try:
        send_all(sender, (topic, 0), [build(values[i : i + 50]) for i in range(0, 300, 50)])
    finally:
        sender.close()
    # acks=0 has no answer to wait for: the broker has the records once a read sees them all
    records = read_all(fetcher, (topic, 0))
    assert [v for _, v in records] == values
    assert [o for o, _ in records] == list(range(300))


def test_a_batch_too_large_for_the_topic_is_split_until_it_fits(
    cluster: LocalCluster, fetcher: RangeFetcher
) -> None:
    # 40 records of ~300 bytes (~13 KB in one batch) to a topic taking batches up to 2,000 bytes:
    # the sender halves the refused batch until each part fits (at most 5 records a part)
    topic = new_topic(cluster, **{"max.message.bytes": "2000"})
    values = [bytes([65 + i % 26]) * 300 for i in range(40)]
    sender = BatchSender({"bootstrap.servers": cluster.bootstrap_servers})
    try:
        send_all(sender, (topic, 0), [build(values), build([b"after"])])
    finally:
        sender.close()
    sizes: list[int] = []
    records = read_all(fetcher, (topic, 0), sizes)
    assert [v for _, v in records] == [*values, b"after"]  # each once, in order
    assert sizes == [5] * 8 + [1]  # 40 -> 20 -> 10 -> 5 records a batch


def test_a_record_that_can_never_fit_fails_naming_the_partition_and_writes_nothing(
    cluster: LocalCluster, fetcher: RangeFetcher
) -> None:
    topic = new_topic(cluster, **{"max.message.bytes": "2000"})
    sender = BatchSender({"bootstrap.servers": cluster.bootstrap_servers})
    try:
        (future,) = sender.send((topic, 0), [build([b"x" * 5000])])
        with pytest.raises(MessageTooLargeError, match=f"{topic}"):
            future.result(TIMEOUT_S)
    finally:
        sender.close()
    result = fetcher.submit((topic, 0), 0).result(TIMEOUT_S)
    assert result.error is ErrorCode.NONE and result.high_watermark == 0


def test_fetcher_answers_out_of_range_and_missing_partitions_with_their_error(
    cluster: LocalCluster, fetcher: RangeFetcher
) -> None:
    topic = new_topic(cluster)
    sender = BatchSender({"bootstrap.servers": cluster.bootstrap_servers})
    try:
        send_all(sender, (topic, 0), [build([b"one", b"two"])])
    finally:
        sender.close()
    assert fetcher.submit((topic, 0), 10).result(TIMEOUT_S).error is ErrorCode.OFFSET_OUT_OF_RANGE
    missing = fetcher.submit((topic, 7), 0).result(TIMEOUT_S)
    assert missing.error is not ErrorCode.NONE and missing.records is None
    assert [v for _, v in read_all(fetcher, (topic, 0))] == [b"one", b"two"]


def test_fetcher_reconnects_after_the_broker_restarts(cluster: LocalCluster) -> None:
    """Fetches use connections of their own (`raw_clients._FetchConnection`): one the broker
    closed gives a retriable error, and a later fetch connects again and reads on. Last in
    this module: it restarts the module's broker."""
    topic = new_topic(cluster)
    sender = BatchSender({"bootstrap.servers": cluster.bootstrap_servers})
    try:
        send_all(sender, (topic, 0), [build([b"a" * 100] * 50), build([b"b" * 100] * 50)])
    finally:
        sender.close()
    f = RangeFetcher({"bootstrap.servers": cluster.bootstrap_servers, "retry.backoff.ms": "50"})
    try:
        assert len(read_all(f, (topic, 0))) == 100
        broker_id = next(iter(cluster.brokers))
        cluster.kill_broker(broker_id)
        down = f.submit((topic, 0), 0).result(TIMEOUT_S)
        assert down.error.retriable and down.records is None, down
        cluster.start_broker(broker_id)
        deadline = time.monotonic() + TIMEOUT_S
        while (result := f.submit((topic, 0), 50).result(TIMEOUT_S)).error is not ErrorCode.NONE:
            assert result.error.retriable, result
            assert time.monotonic() < deadline, f"no fetch succeeded after the restart: {result}"
            time.sleep(0.1)
        values = [r.value for b in decode_batches(result.records or b"") for r in b.records]
        assert values == [b"b" * 100] * 50
    finally:
        f.close()
