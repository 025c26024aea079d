"""Znode JSON codecs: Kafka's exact field names and formats, round trips, clear errors."""

from __future__ import annotations

import json
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from epochlog.zk import znodes
from epochlog.zk.znodes import (
    BrokerRegistration,
    Endpoint,
    PartitionState,
    ProducerIdBlock,
    TopicAssignment,
    ZNodeDecodeError,
)


def _json(data: bytes) -> dict:
    return json.loads(data)


# -- paths --------------------------------------------------------------------------------------


def test_paths_follow_kafkas_layout():
    assert znodes.broker_path(3) == "/brokers/ids/3"
    assert znodes.topic_path("orders") == "/brokers/topics/orders"
    assert znodes.partition_state_path("orders", 7) == "/brokers/topics/orders/partitions/7/state"
    assert znodes.delete_topic_path("orders") == "/admin/delete_topics/orders"
    assert znodes.topic_config_path("a.b-c_d") == "/config/topics/a.b-c_d"
    assert znodes.NEXT_CONTROLLER_PATH == "/admin/next_controller"
    assert znodes.READY_TO_SERVE_PATH == "/admin/ready_to_serve_as_controller"


@pytest.mark.parametrize("bad", ["", ".", "..", "a/b", "sp ace", "x" * 250, "é"])
def test_illegal_topic_names_are_refused_before_making_a_path(bad):
    with pytest.raises(ValueError, match="topic name"):
        znodes.topic_path(bad)


def test_non_numeric_broker_child_is_a_clear_error():
    with pytest.raises(ZNodeDecodeError, match="/brokers/ids/abc"):
        znodes.parse_broker_id("abc")


# -- uuids --------------------------------------------------------------------------------------


def test_kafka_uuid_text_is_urlsafe_base64_without_padding():
    value = uuid.UUID(bytes=bytes(range(250, 256)) + bytes(range(10)))
    text = znodes.kafka_uuid_text(value)
    assert len(text) == 22 and "=" not in text and "+" not in text and "/" not in text
    assert text == "-vv8_f7_AAECAwQFBgcICQ"
    assert znodes.parse_kafka_uuid(text) == value
    assert znodes.parse_kafka_uuid(text + "==") == value


@given(st.uuids())
def test_kafka_uuid_round_trip(value):
    assert znodes.parse_kafka_uuid(znodes.kafka_uuid_text(value)) == value


@pytest.mark.parametrize("bad", ["", "short", "!" * 22, "A" * 23, 42])
def test_bad_kafka_uuid_text_raises(bad):
    with pytest.raises(ValueError, match="Kafka uuid"):
        znodes.parse_kafka_uuid(bad)


def test_new_kafka_uuid_avoids_reserved_values():
    for _ in range(200):
        value = znodes.new_kafka_uuid()
        assert value not in (znodes.ZERO_UUID, znodes.METADATA_TOPIC_UUID)
        assert not znodes.kafka_uuid_text(value).startswith("-")


# -- broker registration ------------------------------------------------------------------------


def test_broker_registration_is_kafkas_v5_json():
    reg = BrokerRegistration(
        broker_id=1,
        endpoints=(Endpoint("PLAINTEXT", "localhost", 9092),),
        timestamp_ms=1700000000123,
    )
    obj = _json(znodes.encode_broker_registration(reg))
    assert obj == {
        "version": 5,
        "host": "localhost",
        "port": 9092,
        "jmx_port": -1,
        "timestamp": "1700000000123",
        "endpoints": ["PLAINTEXT://localhost:9092"],
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
        "features": {},
    }
    assert b" " not in znodes.encode_broker_registration(reg)


def test_broker_registration_round_trip_with_rack_and_two_listeners():
    reg = BrokerRegistration(
        broker_id=2,
        endpoints=(
            Endpoint("CLIENT", "10.0.0.2", 9093, "SSL"),
            Endpoint("REPLICATION", "::1", 9094, "PLAINTEXT"),
        ),
        rack="dc1",
        timestamp_ms=5,
    )
    data = znodes.encode_broker_registration(reg)
    obj = _json(data)
    assert obj["rack"] == "dc1"
    assert obj["endpoints"] == ["CLIENT://10.0.0.2:9093", "REPLICATION://[::1]:9094"]
    assert obj["host"] == "::1" and obj["port"] == 9094  # the first PLAINTEXT endpoint
    assert znodes.decode_broker_registration(2, data, "/brokers/ids/2") == reg


def test_broker_registration_without_plaintext_has_null_host_and_port_minus_one():
    reg = BrokerRegistration(3, (Endpoint("SSL", "h", 1, "SSL"),))
    obj = _json(znodes.encode_broker_registration(reg))
    assert obj["host"] is None and obj["port"] == -1


def test_decodes_kafka_written_registration_and_old_v1():
    kafka = (
        b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
        b'"endpoints":["PLAINTEXT://broker-1:9092"],"jmx_port":-1,"port":9092,'
        b'"host":"broker-1","version":5,"timestamp":"1699999999999"}'
    )
    reg = znodes.decode_broker_registration(1, kafka, "/brokers/ids/1")
    assert reg.endpoints == (Endpoint("PLAINTEXT", "broker-1", 9092),)
    assert reg.timestamp_ms == 1699999999999 and reg.rack is None
    v1 = znodes.decode_broker_registration(
        4, b'{"version":1,"host":"h","port":9000,"jmx_port":-1}', "/brokers/ids/4"
    )
    assert v1.endpoints == (Endpoint("PLAINTEXT", "h", 9000),)


@pytest.mark.parametrize(
    "data, reason",
    [
        (b"", "no data"),
        (b"{not json", "not JSON"),
        (b"[1,2]", "JSON object"),
        (b'{"endpoints":[]}', "missing field 'version'"),
        (b'{"version":5,"endpoints":["garbage"]}', "LISTENER://host:port"),
        (b'{"version":5,"endpoints":"x"}', "endpoints must be a list"),
    ],
)
def test_malformed_registration_names_the_path(data, reason):
    with pytest.raises(ZNodeDecodeError, match=reason) as err:
        znodes.decode_broker_registration(1, data, "/brokers/ids/1")
    assert "/brokers/ids/1" in str(err.value)
    assert isinstance(err.value, ValueError)


# -- controller ---------------------------------------------------------------------------------


def test_controller_json_and_epoch_text():
    assert _json(znodes.encode_controller(3, 1234)) == {
        "version": 2,
        "brokerid": 3,
        "timestamp": "1234",
        "kraftControllerEpoch": -1,
    }
    node = znodes.decode_controller(znodes.encode_controller(3, 1234))
    assert (node.broker_id, node.timestamp_ms, node.kraft_controller_epoch) == (3, 1234, -1)
    assert znodes.decode_controller(b"7").broker_id == 7
    assert znodes.decode_controller(b'{"version":1,"brokerid":2,"timestamp":"9"}').broker_id == 2
    assert znodes.encode_controller_epoch(12) == b"12"
    assert znodes.decode_controller_epoch(b"12") == 12
    with pytest.raises(ZNodeDecodeError, match="/controller_epoch"):
        znodes.decode_controller_epoch(b"twelve")
    with pytest.raises(ZNodeDecodeError, match="'brokerid'"):
        znodes.decode_controller(b'{"version":2}')


# -- topics and partition states ----------------------------------------------------------------


def test_topic_assignment_is_kafkas_v3_json():
    topic_id = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
    assignment = TopicAssignment({1: (2, 3), 0: (1, 2)}, topic_id)
    data = znodes.encode_topic_assignment(assignment)
    assert _json(data) == {
        "version": 3,
        "partitions": {"0": [1, 2], "1": [2, 3]},
        "adding_replicas": {},
        "removing_replicas": {},
        "topic_id": znodes.kafka_uuid_text(topic_id),
    }
    decoded = znodes.decode_topic_assignment(data, "/brokers/topics/t")
    assert decoded == assignment
    assert list(decoded.partitions) == [0, 1]


def test_topic_assignment_without_id_and_older_versions():
    data = b'{"version":1,"partitions":{"0":[1]}}'
    decoded = znodes.decode_topic_assignment(data, "/brokers/topics/t")
    assert decoded == TopicAssignment({0: (1,)})
    assert "topic_id" not in _json(znodes.encode_topic_assignment(decoded))


@pytest.mark.parametrize(
    "data, reason",
    [
        (b'{"version":3}', "missing field 'partitions'"),
        (b'{"version":3,"partitions":{"x":[1]}}', "not a partition"),
        (b'{"version":3,"partitions":{"0":[1,"2"]}}', "must be an integer"),
        (b'{"version":3,"partitions":{},"topic_id":"nope"}', "topic_id"),
    ],
)
def test_malformed_topic_assignment(data, reason):
    with pytest.raises(ZNodeDecodeError, match=reason):
        znodes.decode_topic_assignment(data, "/brokers/topics/t")


def test_partition_state_json():
    state = PartitionState(leader=1, leader_epoch=4, isr=(1, 2, 3), controller_epoch=7)
    data = znodes.encode_partition_state(state)
    assert _json(data) == {
        "controller_epoch": 7,
        "leader": 1,
        "version": 1,
        "leader_epoch": 4,
        "isr": [1, 2, 3],
    }
    assert znodes.decode_partition_state(data, "/p") == state
    recovering = PartitionState(2, 5, (2,), 7, znodes.LEADER_RECOVERY_RECOVERING)
    assert _json(znodes.encode_partition_state(recovering))["leader_recovery_state"] == 1
    assert znodes.decode_partition_state(znodes.encode_partition_state(recovering), "/p") == (
        recovering
    )


def test_partition_state_records_the_isr_members_broker_epochs():
    state = PartitionState(1, 4, (1, 2), 7, isr_broker_epochs=((1, 4294967312), (2, 40)))
    data = znodes.encode_partition_state(state)
    assert _json(data)["isr_broker_epochs"] == {"1": 4294967312, "2": 40}
    assert znodes.decode_partition_state(data, "/p") == state
    # A state Kafka (or an older epochlog) wrote has none: nothing is known about bounces.
    kafka = b'{"controller_epoch":7,"leader":1,"version":1,"leader_epoch":4,"isr":[1,2]}'
    assert znodes.decode_partition_state(kafka, "/p").isr_broker_epochs == ()


@given(
    leader=st.integers(-1, 2**31 - 1),
    leader_epoch=st.integers(0, 2**31 - 1),
    isr=st.lists(st.integers(0, 2**31 - 1), max_size=5),
    controller_epoch=st.integers(0, 2**31 - 1),
)
def test_partition_state_round_trip(leader, leader_epoch, isr, controller_epoch):
    state = PartitionState(leader, leader_epoch, tuple(isr), controller_epoch)
    assert znodes.decode_partition_state(znodes.encode_partition_state(state), "/p") == state


@pytest.mark.parametrize(
    "data, reason",
    [
        (b'{"leader":1,"leader_epoch":0,"controller_epoch":1}', "missing field 'isr'"),
        (b'{"leader":true,"leader_epoch":0,"isr":[],"controller_epoch":1}', "integer"),
        (b'{"leader":1,"leader_epoch":0,"isr":1,"controller_epoch":1}', "list of integers"),
        (
            b'{"leader":1,"leader_epoch":0,"isr":[1],"controller_epoch":1,'
            b'"isr_broker_epochs":{"x":1}}',
            "'isr_broker_epochs' key 'x' is not a broker id",
        ),
        (
            b'{"leader":1,"leader_epoch":0,"isr":[1],"controller_epoch":1,"isr_broker_epochs":[1]}',
            "'isr_broker_epochs' must be an object",
        ),
    ],
)
def test_malformed_partition_state(data, reason):
    with pytest.raises(ZNodeDecodeError, match=reason) as err:
        znodes.decode_partition_state(data, "/brokers/topics/t/partitions/0/state")
    assert "/brokers/topics/t/partitions/0/state" in str(err.value)


# -- configs, admin znodes, producer ids, cluster id --------------------------------------------


def test_topic_config_json():
    data = znodes.encode_topic_config({"retention.ms": "1000"})
    assert _json(data) == {"version": 1, "config": {"retention.ms": "1000"}}
    assert znodes.decode_topic_config(data, "/config/topics/t") == {"retention.ms": "1000"}
    assert znodes.decode_topic_config(b"", "/config/topics/t") == {}
    with pytest.raises(ZNodeDecodeError, match="config must be an object"):
        znodes.decode_topic_config(b'{"version":1,"config":[]}', "/config/topics/t")


def test_kip39_znodes():
    data = znodes.encode_broker_id_node(5)
    assert _json(data) == {"version": 1, "brokerid": 5}
    assert znodes.decode_broker_id_node(data, znodes.NEXT_CONTROLLER_PATH) == 5
    assert znodes.decode_broker_id_node(b"6", znodes.READY_TO_SERVE_PATH) == 6
    with pytest.raises(ZNodeDecodeError, match="/admin/next_controller"):
        znodes.decode_broker_id_node(b"{}", znodes.NEXT_CONTROLLER_PATH)


def test_producer_id_block_json_and_sequence():
    first = znodes.next_producer_id_block(None, broker_id=1)
    assert (first.block_start, first.block_end, first.size) == (0, 999, 1000)
    assert 999 in first and 1000 not in first
    data = znodes.encode_producer_id_block(first)
    assert _json(data) == {"version": 1, "broker": 1, "block_start": "0", "block_end": "999"}
    assert znodes.decode_producer_id_block(data) == first
    second = znodes.next_producer_id_block(first, broker_id=2)
    assert second == ProducerIdBlock(2, 1000, 1999)
    assert znodes.decode_producer_id_block(b"") is None
    assert znodes.decode_producer_id_block(
        b'{"version":1,"broker":1,"block_start":5,"block_end":9}'
    ) == ProducerIdBlock(1, 5, 9)
    with pytest.raises(ZNodeDecodeError, match="block_end"):
        znodes.decode_producer_id_block(b'{"version":1,"broker":1,"block_start":"0"}')
    with pytest.raises(OverflowError):
        znodes.next_producer_id_block(ProducerIdBlock(1, 0, 2**63 - 10), 1)


def test_cluster_id_json_has_string_version():
    data = znodes.encode_cluster_id("AAAAAAAAAAAAAAAAAAAAAA")
    assert _json(data) == {"version": "1", "id": "AAAAAAAAAAAAAAAAAAAAAA"}
    assert znodes.decode_cluster_id(data) == "AAAAAAAAAAAAAAAAAAAAAA"
    with pytest.raises(ZNodeDecodeError, match="/cluster/id"):
        znodes.decode_cluster_id(b'{"version":"1"}')


@given(
    leader=st.integers(-1, 2**31 - 1),
    leader_epoch=st.integers(0, 2**31 - 1),
    controller_epoch=st.integers(0, 2**31 - 1),
    isr=st.lists(st.integers(0, 2**31 - 1), max_size=5, unique=True),
    epochs=st.dictionaries(st.integers(0, 2**31 - 1), st.integers(0, 2**63 - 1), max_size=5),
)
def test_partition_state_fast_encoding_is_byte_for_byte_the_json_one(
    leader: int,
    leader_epoch: int,
    controller_epoch: int,
    isr: list[int],
    epochs: dict[int, int],
) -> None:
    state = znodes.PartitionState(
        leader=leader,
        leader_epoch=leader_epoch,
        isr=tuple(isr),
        controller_epoch=controller_epoch,
        isr_broker_epochs=tuple(sorted(epochs.items())),
    )
    assert znodes.encode_partition_state(state) == znodes._encode_partition_state_json(state)
