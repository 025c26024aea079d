"""compression.type on the broker and the topic: the decision, the rebuild of a batch's bytes with
every codec pair, the configs, and the leader's append (idempotent dedup on rebuilt batches,
followers storing the leader's bytes as they are)."""

from __future__ import annotations

import asyncio
import os
import uuid

import pytest

from epochlog.broker.appends import append_records, apply_topic_compression
from epochlog.broker.broker import log_config_from
from epochlog.broker.collaborators import BrokerEpochHolder
from epochlog.broker.harness import leader_and_isr_request
from epochlog.broker.metadata_cache import MetadataCache
from epochlog.broker.produce_validation import ProduceValidationError, validate_partition_records
from epochlog.broker.replica_manager import ReplicaManager
from epochlog.config.broker import BrokerConfig, ConfigError
from epochlog.config.dynamic import (
    DYNAMIC_BROKER_KEYS,
    BrokerLayers,
    ConfigSource,
    describe_topic,
)
from epochlog.config.topic import TopicConfigError, validate_topic_configs
from epochlog.protocol.compression import Compression, compress, decompress
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.recompression import (
    COMPRESSION_TYPES,
    fetch_compression_error,
    rebuild_batch,
    rebuild_codec,
    target_codec,
)
from epochlog.protocol.records import (
    TIMESTAMP_TYPE_MASK,
    RecordBatchBuilder,
    decode_batch,
    decode_batches,
    parse_batch_header,
    set_log_append_time,
    stamp_batch,
)
from epochlog.storage import LogConfig, LogManager

CODECS = list(Compression)
MAX_DECOMPRESSED = 10**7
TYPE_OF_CODEC = {
    Compression.NONE: "uncompressed",
    Compression.GZIP: "gzip",
    Compression.SNAPPY: "snappy",
    Compression.LZ4: "lz4",
    Compression.ZSTD: "zstd",
}


def producer_batch(
    codec: Compression = Compression.NONE,
    n: int = 5,
    pid: int = -1,
    epoch: int = -1,
    seq: int = -1,
    transactional: bool = False,
    value: bytes = b"value-" * 20,
) -> bytes:
    builder = RecordBatchBuilder(
        compression=codec,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=transactional,
    )
    for i in range(n):
        key = None if i == 1 else f"key-{i}".encode()
        headers = [("trace", f"t{i}".encode()), ("empty", None)] if i % 2 == 0 else []
        # timestamps out of order: the max is not the last record's
        builder.append(1_700_000_000_000 + (7 * i) % 5, key, value + bytes([i]), headers)
    return builder.build()


def records_of(batch: bytes) -> list[tuple]:
    (decoded,) = decode_batches(batch)
    return [
        (r.offset, r.timestamp, r.key, r.value, [(h.key, h.value) for h in r.headers])
        for r in decoded.records
    ]


# ------------------------------------------------------------------------------ the decision


@pytest.mark.parametrize("source", CODECS)
def test_producer_keeps_every_codec(source):
    assert rebuild_codec(source, "producer") is None


@pytest.mark.parametrize("source", CODECS)
@pytest.mark.parametrize("target", CODECS)
def test_a_codec_type_rebuilds_exactly_the_batches_of_other_codecs(source, target):
    expected = None if source is target else target
    assert rebuild_codec(source, TYPE_OF_CODEC[target]) is expected


def test_none_is_not_a_broker_compression_type():
    # The producer's name for no compression is `none`; Kafka's topic and broker say uncompressed.
    with pytest.raises(ValueError, match="'none' is not one of uncompressed, zstd"):
        target_codec("none")
    assert COMPRESSION_TYPES == ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")


@pytest.mark.parametrize("compression_type", COMPRESSION_TYPES)
def test_only_zstd_topics_refuse_consumer_fetches_below_v10(compression_type):
    zstd = compression_type == "zstd"
    assert fetch_compression_error(9, compression_type) is (
        ErrorCode.UNSUPPORTED_COMPRESSION_TYPE if zstd else ErrorCode.NONE
    )
    assert fetch_compression_error(4, compression_type) is fetch_compression_error(
        9, compression_type
    )
    assert fetch_compression_error(10, compression_type) is ErrorCode.NONE


# ------------------------------------------------------------------------------- the rebuild


@pytest.mark.parametrize("source", CODECS)
@pytest.mark.parametrize("target", CODECS)
def test_rebuild_keeps_records_header_fields_and_a_valid_crc(source, target):
    original = producer_batch(source, pid=42, epoch=3, seq=17)
    header = validate_partition_records(original, version=9, max_message_bytes=10**6, where="t-0")
    rebuilt = rebuild_batch(original, header, target, max_decompressed_bytes=MAX_DECOMPRESSED)
    new = parse_batch_header(rebuilt)
    assert new.compression is target
    assert records_of(rebuilt) == records_of(original)  # decode_batch checks the CRC
    for name in (
        "base_offset",
        "partition_leader_epoch",
        "last_offset_delta",
        "base_timestamp",
        "max_timestamp",
        "producer_id",
        "producer_epoch",
        "base_sequence",
        "records_count",
    ):
        assert getattr(new, name) == getattr(header, name), name
    assert new.attributes & ~0x07 == header.attributes & ~0x07
    assert new.size == len(rebuilt)
    # what the broker then stores passes the producer checks again
    validate_partition_records(rebuilt, version=9, max_message_bytes=10**6, where="t-0")


@pytest.mark.parametrize("target", [Compression.NONE, Compression.ZSTD])
def test_rebuild_keeps_the_transactional_flag_and_the_timestamp_type(target):
    original = bytearray(
        producer_batch(Compression.GZIP, pid=9, epoch=0, seq=0, transactional=True)
    )
    set_log_append_time(original, 0, len(original), 1_800_000_000_000)
    header = parse_batch_header(original)
    rebuilt = rebuild_batch(original, header, target, max_decompressed_bytes=MAX_DECOMPRESSED)
    new = parse_batch_header(rebuilt)
    assert new.is_transactional and new.attributes & TIMESTAMP_TYPE_MASK
    assert new.max_timestamp == 1_800_000_000_000
    assert [r.timestamp for r in decode_batch(rebuilt).records] == [1_800_000_000_000] * 5


def test_rebuilt_batch_takes_offsets_and_epoch_like_any_other():
    original = producer_batch(Compression.SNAPPY)
    header = parse_batch_header(original)
    rebuilt = bytearray(
        rebuild_batch(original, header, Compression.LZ4, max_decompressed_bytes=MAX_DECOMPRESSED)
    )
    stamp_batch(rebuilt, 0, 1000, 7)
    decoded = decode_batch(rebuilt)
    assert [r.offset for r in decoded.records] == [1000, 1001, 1002, 1003, 1004]
    assert decoded.header.partition_leader_epoch == 7


def test_compression_levels_reach_the_codec():
    data = os.urandom(2000).hex().encode() * 4  # compressible, but not trivially
    for codec, low, high in (
        (Compression.GZIP, 1, 9),
        (Compression.ZSTD, -5, 19),
        (Compression.LZ4, 1, 17),
    ):
        fast, best = compress(codec, data, low), compress(codec, data, high)
        assert len(best) < len(fast), codec
        assert decompress(codec, best) == data
    with pytest.raises(ValueError, match="gzip compression level 0 must be -1"):
        compress(Compression.GZIP, data, 0)


def test_rebuild_uses_the_given_level():
    original = producer_batch(Compression.NONE, n=50, value=os.urandom(300).hex().encode())
    header = parse_batch_header(original)
    fast = rebuild_batch(original, header, Compression.GZIP, max_decompressed_bytes=10**7, level=1)
    best = rebuild_batch(original, header, Compression.GZIP, max_decompressed_bytes=10**7, level=9)
    assert len(best) < len(fast)
    assert records_of(best) == records_of(fast) == records_of(original)


# ------------------------------------------------------------------------------ the produce step


def test_a_rebuilt_batch_past_max_message_bytes_is_message_too_large():
    builder = RecordBatchBuilder()
    for i in range(3):
        builder.append(1000 + i, None, os.urandom(500))  # incompressible
    original = builder.build()
    header = parse_batch_header(original)
    config = LogConfig(compression_type="gzip", max_message_bytes=len(original))
    with pytest.raises(ProduceValidationError) as info:
        apply_topic_compression(original, header, config, "t-0")
    assert info.value.error_code is ErrorCode.MESSAGE_TOO_LARGE
    assert "compression.type=gzip" in str(info.value) and str(len(original)) in str(info.value)


def test_producer_type_returns_the_same_bytes():
    original = producer_batch(Compression.LZ4)
    header = parse_batch_header(original)
    records, new = apply_topic_compression(original, header, LogConfig(), "t-0")
    assert records is original and new is header


# ------------------------------------------------------------------------------------ configs


def test_topic_config_compression_type_is_validated_by_name():
    validate_topic_configs({"compression.type": "zstd", "compression.zstd.level": "-7"})
    for key, value, words in (
        ("compression.type", "none", "compression.type 'none' is not one of"),
        ("compression.type", "brotli", "compression.type 'brotli' is not one of"),
        ("compression.gzip.level", "0", "compression.gzip.level=0 must be -1"),
        ("compression.lz4.level", "18", "compression.lz4.level=18 must be between 1 and 17"),
        ("compression.zstd.level", "23", "compression.zstd.level=23 must be between"),
        ("compression.zstd.level", "x", "compression.zstd.level='x' is not an integer"),
    ):
        with pytest.raises(TopicConfigError, match=words):
            validate_topic_configs({key: value})


def test_topic_overrides_reach_the_log_config():
    config = LogConfig().with_topic_overrides(
        {"compression.type": "gzip", "compression.gzip.level": "9"}
    )
    assert config.compression_type == "gzip"
    assert config.compression_level(Compression.GZIP) == 9
    assert config.compression_level(Compression.LZ4) == 9  # Kafka's default lz4 level
    assert config.compression_level(Compression.ZSTD) == 3
    assert config.compression_level(Compression.SNAPPY) is None


def test_broker_keys_are_validated_and_dynamic():
    base = {"broker.id": 0, "zookeeper.connect": "zk:2181"}
    config = BrokerConfig.from_dict({**base, "compression.type": "lz4"})
    assert config["compression.type"] == "lz4" and config["compression.lz4.level"] == 9
    with pytest.raises(ConfigError, match="compression.zstd.level"):
        BrokerConfig.from_dict({**base, "compression.zstd.level": "99"})
    with pytest.raises(ConfigError, match="compression.type"):
        BrokerConfig.from_dict({**base, "compression.type": "none"})
    assert {
        "compression.type",
        "compression.gzip.level",
        "compression.lz4.level",
        "compression.zstd.level",
    } <= DYNAMIC_BROKER_KEYS


def test_describe_topic_shows_compression_type_with_its_broker_synonym():
    static = BrokerConfig.from_dict({"broker.id": 0, "zookeeper.connect": "zk:2181"})
    layers = BrokerLayers(static, cluster_default={"compression.type": "zstd"})
    (entry,) = describe_topic({}, layers, keys=["compression.type"], include_synonyms=True)
    assert entry.value == "zstd" and entry.source is ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    (entry,) = describe_topic(
        {"compression.type": "gzip"}, layers, keys=["compression.type"], include_synonyms=True
    )
    assert entry.value == "gzip" and entry.source is ConfigSource.TOPIC_CONFIG
    assert [(s.name, s.value) for s in entry.synonyms] == [
        ("compression.type", "gzip"),
        ("compression.type", "zstd"),
        ("compression.type", "producer"),
    ]


# ------------------------------------------------------------- the leader's log and the follower's

TOPIC_ID = uuid.uuid4()


def make_rm(tmp_path, log_config: LogConfig) -> ReplicaManager:
    config = BrokerConfig.from_dict(
        {"broker.id": 1, "zookeeper.connect": "zk:2181", "log.dirs": str(tmp_path)}
    )
    log_manager = LogManager([tmp_path], log_config)
    log_manager.startup(1)
    rm = ReplicaManager(
        broker_id=1,
        config=config,
        log_manager=log_manager,
        metadata_cache=MetadataCache(),
        epoch_holder=BrokerEpochHolder(100),
    )
    rm._stored_hws = log_manager.read_high_watermarks()
    return rm


def become(rm: ReplicaManager, replicas: list[int]) -> None:
    request = leader_and_isr_request(
        topic="t",
        topic_id=TOPIC_ID,
        assignment={0: replicas},
        leader_epoch=4,
        controller_id=1,
        controller_epoch=1,
    )
    rm.apply_leader_and_isr(request, 6)


def produce(rm: ReplicaManager, records: bytes):
    results = asyncio.run(
        append_records(
            rm, timeout_ms=1000, required_acks=1, entries=[(("t", 0), records)], version=9
        )
    )
    return results[("t", 0)]


def stored(rm: ReplicaManager) -> bytes:
    return rm.get_partition("t", 0).log.read(0, 10**7).read_bytes()


def test_leader_stores_gzip_and_idempotent_dedup_still_works(tmp_path):
    rm = make_rm(tmp_path, LogConfig(compression_type="gzip"))
    become(rm, [1])
    first = producer_batch(Compression.SNAPPY, pid=7, epoch=0, seq=0)
    result = produce(rm, first)
    assert (result.error, result.base_offset, result.last_offset) == (ErrorCode.NONE, 0, 4)
    again = produce(rm, first)  # the producer's retry: same pid, epoch, sequence
    assert (again.error, again.base_offset, again.last_offset) == (ErrorCode.NONE, 0, 4)
    nxt = produce(rm, producer_batch(Compression.NONE, n=2, pid=7, epoch=0, seq=5))
    assert (nxt.error, nxt.base_offset) == (ErrorCode.NONE, 5)
    gap = produce(rm, producer_batch(Compression.NONE, n=2, pid=7, epoch=0, seq=9))
    assert gap.error is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    batches = decode_batches(stored(rm))
    assert [b.header.compression for b in batches] == [Compression.GZIP, Compression.GZIP]
    assert [(b.header.producer_id, b.header.base_sequence) for b in batches] == [(7, 0), (7, 5)]
    assert [b.header.partition_leader_epoch for b in batches] == [4, 4]
    assert [r.offset for b in batches for r in b.records] == list(range(7))
    assert records_of(stored(rm)[: batches[0].header.size]) == records_of(first)


def test_follower_stores_the_leaders_bytes_as_they_are(tmp_path):
    rm = make_rm(tmp_path, LogConfig(compression_type="gzip"))
    become(rm, [2, 1])
    leader_batch = bytearray(producer_batch(Compression.LZ4))
    stamp_batch(leader_batch, 0, 0, 4)
    rm.get_partition("t", 0).append_records_as_follower(bytes(leader_batch), 1)
    assert stored(rm) == bytes(leader_batch)


def test_a_dynamic_change_of_the_default_applies_to_the_next_batch(tmp_path):
    rm = make_rm(tmp_path, LogConfig())
    become(rm, [1])
    produce(rm, producer_batch(Compression.NONE))
    broker = BrokerConfig.from_dict(
        {"broker.id": 1, "zookeeper.connect": "zk:2181", "compression.type": "zstd"}
    )
    rm.apply_broker_config(broker, log_config_from(broker))
    produce(rm, producer_batch(Compression.NONE))
    codecs = [b.header.compression for b in decode_batches(stored(rm))]
    assert codecs == [Compression.NONE, Compression.ZSTD]
