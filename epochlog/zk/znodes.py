"""ZooKeeper paths and znode JSON in Kafka's formats (pure: no I/O, no clock).

Every znode epochlog reads or writes has a path function and an encode/decode pair here, byte for
byte what Apache Kafka's ZooKeeper mode writes (`ZkData.scala`), so an operator's tools and the
layout in DESIGN.md ("ZooKeeper layout") agree: broker registrations (BrokerIdZNode v5), the
controller and its epoch, topic assignments with their topic id, partition states, topic configs,
the admin znodes (topic deletion, KIP-39's next_controller and ready_to_serve_as_controller), the
producer id block and the cluster id. JSON is written compactly (no spaces) with Kafka's field
names. Decoders are lenient where Kafka is (older registration versions, missing optional fields)
and otherwise raise `ZNodeDecodeError`, a ValueError that names the path and what is wrong.

Kafka's uuids (topic ids, the cluster id) are shown as URL-safe base64 of the 16 bytes without
padding (22 characters); `kafka_uuid_text` and `parse_kafka_uuid` convert to and from
`uuid.UUID`.

Versions of znodes (the `Stat`) are not part of the data: a partition state's znode version is the
partition epoch and a registration's czxid is the broker epoch; the I/O modules pair them with the
decoded values (`VersionedPartitionState`, `RegisteredBroker`).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import secrets
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from epochlog.storage.layout import validate_topic_name as check_topic_name

TopicPartition = tuple[str, int]

# ---------------------------------------------------------------------------------------------
# Paths
# ---------------------------------------------------------------------------------------------

CLUSTER_ID_PATH = "/cluster/id"
CONTROLLER_PATH = "/controller"
CONTROLLER_EPOCH_PATH = "/controller_epoch"
BROKERS_PATH = "/brokers"
BROKER_IDS_PATH = "/brokers/ids"
BROKER_TOPICS_PATH = "/brokers/topics"
ADMIN_PATH = "/admin"
DELETE_TOPICS_PATH = "/admin/delete_topics"
NEXT_CONTROLLER_PATH = "/admin/next_controller"
READY_TO_SERVE_PATH = "/admin/ready_to_serve_as_controller"
LATEST_PRODUCER_ID_BLOCK_PATH = "/latest_producer_id_block"
CONFIG_PATH = "/config"
CONFIG_TOPICS_PATH = "/config/topics"

# Persistent paths every broker makes sure exist at startup (Kafka's PersistentZkPaths, the
# part of it epochlog uses). Watches on children need their parent to exist.
TOP_LEVEL_PATHS = (
    BROKER_IDS_PATH,
    BROKER_TOPICS_PATH,
    DELETE_TOPICS_PATH,
    CONFIG_TOPICS_PATH,
    LATEST_PRODUCER_ID_BLOCK_PATH,
)

# Kafka's initial /controller_epoch value (the first elected controller gets epoch 1).
INITIAL_CONTROLLER_EPOCH = 0
PRODUCER_ID_BLOCK_SIZE = 1000


class ZNodeDecodeError(ValueError):
    """A znode's data is not what its path requires."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"malformed znode {path}: {reason}")
        self.path = path
        self.reason = reason


def validate_topic_name(topic: str) -> str:
    """Kafka's topic name rule (storage's, the one place it is written); returns the name so
    path builders can validate inline (a bad name must never become a znode path)."""
    check_topic_name(topic)
    return topic


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS_PATH}/{int(broker_id)}"


def topic_path(topic: str) -> str:
    return f"{BROKER_TOPICS_PATH}/{validate_topic_name(topic)}"


@lru_cache(maxsize=16384)
def partitions_path(topic: str) -> str:
    # cached: the controller builds one path per partition it writes (100,000 in a failure),
    # and checking the name against the topic rule each time was most of the cost
    return f"{topic_path(topic)}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{partitions_path(topic)}/{int(partition)}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{partition_path(topic, partition)}/state"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS_PATH}/{validate_topic_name(topic)}"


def topic_config_path(topic: str) -> str:
    return f"{CONFIG_TOPICS_PATH}/{validate_topic_name(topic)}"


def parse_broker_id(child: str, parent: str = BROKER_IDS_PATH) -> int:
    """A child name of /brokers/ids as an int (a stray non-numeric child is an error)."""
    try:
        return int(child)
    except ValueError:
        raise ZNodeDecodeError(f"{parent}/{child}", "child name is not a broker id") from None


# ---------------------------------------------------------------------------------------------
# Kafka uuids
# ---------------------------------------------------------------------------------------------

ZERO_UUID = uuid.UUID(int=0)
# Kafka reserves 0 (no id) and 1 (the KRaft metadata topic); random ids avoid both.
METADATA_TOPIC_UUID = uuid.UUID(int=1)


def kafka_uuid_text(value: uuid.UUID) -> str:
    """Kafka's text form of a uuid: URL-safe base64 of the 16 bytes, no padding (22 chars)."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode("ascii")


def parse_kafka_uuid(text: str) -> uuid.UUID:
    """The uuid in Kafka's text form (padding optional). Raises ValueError."""
    if not isinstance(text, str) or len(text) not in (22, 24):
        raise ValueError(f"not a Kafka uuid (22 base64url characters): {text!r}")
    try:
        raw = base64.urlsafe_b64decode(text.rstrip("=") + "==")
    except (binascii.Error, ValueError):
        raise ValueError(f"not a Kafka uuid (bad base64url): {text!r}") from None
    if len(raw) != 16 or kafka_uuid_text(uuid.UUID(bytes=raw)) != text.rstrip("="):
        raise ValueError(f"not a Kafka uuid (not 16 bytes): {text!r}")
    return uuid.UUID(bytes=raw)


def new_kafka_uuid() -> uuid.UUID:
    """A random uuid as Kafka's Uuid.randomUuid makes them: not 0, not 1, text not led by '-'."""
    while True:
        value = uuid.UUID(bytes=secrets.token_bytes(16))
        if value not in (ZERO_UUID, METADATA_TOPIC_UUID) and not kafka_uuid_text(value).startswith(
            "-"
        ):
            return value


# ---------------------------------------------------------------------------------------------
# JSON helpers
# ---------------------------------------------------------------------------------------------


def _dump(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _load_object(data: bytes | None, path: str) -> dict[str, Any]:
    if not data:
        raise ZNodeDecodeError(path, "no data")
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ZNodeDecodeError(path, f"not JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise ZNodeDecodeError(path, f"expected a JSON object, got {type(obj).__name__}")
    return obj


def _get(obj: Mapping[str, Any], key: str, path: str) -> Any:
    if key not in obj:
        raise ZNodeDecodeError(path, f"missing field {key!r}")
    return obj[key]


def _as_int(value: Any, what: str, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ZNodeDecodeError(path, f"{what} must be an integer, got {value!r}")
    return value


def _as_long_text(value: Any, what: str, path: str) -> int:
    """Kafka writes some longs as strings ("timestamp", "block_start"); accept both forms."""
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            raise ZNodeDecodeError(path, f"{what} must be a number, got {value!r}") from None
    return _as_int(value, what, path)


def _as_int_list(value: Any, what: str, path: str) -> tuple[int, ...]:
    if not isinstance(value, list):
        raise ZNodeDecodeError(path, f"{what} must be a list of integers, got {value!r}")
    for v in value:  # a loop, not a call per element: a new controller reads 100,000 ISRs
        if type(v) is not int:  # JSON gives int or bool (an int subclass) or else
            raise ZNodeDecodeError(path, f"{what} must be an integer, got {v!r}")
    return tuple(value)


def _as_str(value: Any, what: str, path: str) -> str:
    if not isinstance(value, str):
        raise ZNodeDecodeError(path, f"{what} must be a string, got {value!r}")
    return value


def _int_field(obj: Mapping[str, Any], key: str, path: str) -> int:
    return _as_int(_get(obj, key, path), repr(key), path)


def _replica_map(value: Any, what: str, path: str) -> dict[int, tuple[int, ...]]:
    if not isinstance(value, dict):
        raise ZNodeDecodeError(path, f"{what} must be an object, got {value!r}")
    result: dict[int, tuple[int, ...]] = {}
    for key, replicas in value.items():
        try:
            partition = int(key)
        except ValueError:
            raise ZNodeDecodeError(path, f"{what} key {key!r} is not a partition") from None
        result[partition] = _as_int_list(replicas, f"{what}[{key}]", path)
    return dict(sorted(result.items()))


def _optional_replica_map(
    obj: Mapping[str, Any], key: str, path: str
) -> dict[int, tuple[int, ...]]:
    value = obj.get(key)
    return {} if value is None else _replica_map(value, key, path)


def _encode_replica_map(value: Mapping[int, Sequence[int]]) -> dict[str, list[int]]:
    return {str(p): [int(r) for r in value[p]] for p in sorted(value)}


# ---------------------------------------------------------------------------------------------
# /brokers/ids/<id>
# ---------------------------------------------------------------------------------------------

_ENDPOINT = re.compile(r"^([^:/]+)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)$")


@dataclass(frozen=True)
class Endpoint:
    """One listener of a broker: LISTENER://host:port with its security protocol."""

    listener: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener}://{host}:{self.port}"


def parse_endpoint(text: str, security_protocols: Mapping[str, str] | None = None) -> Endpoint:
    """Parse "LISTENER://host:port"; the protocol comes from the map or is the listener's name."""
    match = _ENDPOINT.match(text)
    if not match:
        raise ValueError(f"not a LISTENER://host:port endpoint: {text!r}")
    listener, host, port = match.group(1), match.group(2), int(match.group(3))
    protocol = (security_protocols or {}).get(listener, listener)
    return Endpoint(listener, host, port, protocol)


@dataclass(frozen=True)
class BrokerRegistration:
    """The data of /brokers/ids/<id> (Kafka's BrokerIdZNode v5). The epoch is the czxid."""

    broker_id: int
    endpoints: tuple[Endpoint, ...]
    rack: str | None = None
    timestamp_ms: int = 0
    jmx_port: int = -1
    features: Mapping[str, Any] = field(default_factory=dict)
    version: int = 5

    @property
    def plaintext_endpoint(self) -> Endpoint | None:
        for endpoint in self.endpoints:
            if endpoint.security_protocol == "PLAINTEXT":
                return endpoint
        return None

    @property
    def host(self) -> str | None:
        endpoint = self.plaintext_endpoint
        return endpoint.host if endpoint else None

    @property
    def port(self) -> int:
        endpoint = self.plaintext_endpoint
        return endpoint.port if endpoint else -1

    def endpoint(self, listener: str) -> Endpoint | None:
        return next((e for e in self.endpoints if e.listener == listener), None)


def encode_broker_registration(reg: BrokerRegistration) -> bytes:
    obj: dict[str, Any] = {
        "version": reg.version,
        "host": reg.host,
        "port": reg.port,
        "jmx_port": reg.jmx_port,
        "timestamp": str(reg.timestamp_ms),
        "endpoints": [str(e) for e in reg.endpoints],
        "listener_security_protocol_map": {e.listener: e.security_protocol for e in reg.endpoints},
        "features": dict(reg.features),
    }
    if reg.rack is not None:  # Kafka leaves the key out when there is no rack
        obj["rack"] = reg.rack
    return _dump(obj)


def decode_broker_registration(broker_id: int, data: bytes | None, path: str) -> BrokerRegistration:
    obj = _load_object(data, path)
    version = _int_field(obj, "version", path)
    protocols_raw = obj.get("listener_security_protocol_map")
    if protocols_raw is None:
        protocols_raw = {}
    if not isinstance(protocols_raw, dict):
        raise ZNodeDecodeError(path, "listener_security_protocol_map must be an object")
    protocols = {str(k): _as_str(v, "security protocol", path) for k, v in protocols_raw.items()}
    endpoints: list[Endpoint] = []
    if "endpoints" in obj:
        raw_endpoints = obj["endpoints"]
        if not isinstance(raw_endpoints, list):
            raise ZNodeDecodeError(path, "endpoints must be a list")
        for text in raw_endpoints:
            try:
                endpoints.append(parse_endpoint(_as_str(text, "endpoint", path), protocols))
            except ValueError as exc:
                raise ZNodeDecodeError(path, str(exc)) from None
    else:  # version 1: host and port only
        host = _as_str(_get(obj, "host", path), "host", path)
        endpoints.append(Endpoint("PLAINTEXT", host, _int_field(obj, "port", path)))
    rack = obj.get("rack")
    if rack is not None:
        rack = _as_str(rack, "rack", path)
    features = obj.get("features")
    if features is None:
        features = {}
    if not isinstance(features, dict):
        raise ZNodeDecodeError(path, "features must be an object")
    timestamp = obj.get("timestamp")
    return BrokerRegistration(
        broker_id=broker_id,
        endpoints=tuple(endpoints),
        rack=rack,
        timestamp_ms=_as_long_text(timestamp, "timestamp", path) if timestamp is not None else 0,
        jmx_port=_as_int(obj.get("jmx_port", -1), "jmx_port", path),
        features=features,
        version=version,
    )


@dataclass(frozen=True)
class RegisteredBroker:
    """A live broker as the controller sees it: registration, epoch (czxid), owning session."""

    registration: BrokerRegistration
    epoch: int
    session_id: int

    @property
    def broker_id(self) -> int:
        return self.registration.broker_id


# ---------------------------------------------------------------------------------------------
# /controller and /controller_epoch
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ControllerZNode:
    broker_id: int
    timestamp_ms: int = 0
    kraft_controller_epoch: int = -1
    version: int = 2


def encode_controller(broker_id: int, timestamp_ms: int) -> bytes:
    return _dump(
        {
            "version": 2,
            "brokerid": int(broker_id),
            "timestamp": str(timestamp_ms),
            "kraftControllerEpoch": -1,
        }
    )


def decode_controller(data: bytes | None, path: str = CONTROLLER_PATH) -> ControllerZNode:
    text = (data or b"").strip()
    if text.lstrip(b"-").isdigit():  # the oldest format: a bare broker id
        return ControllerZNode(int(text), version=0)
    obj = _load_object(data, path)
    timestamp = obj.get("timestamp")
    return ControllerZNode(
        broker_id=_int_field(obj, "brokerid", path),
        timestamp_ms=_as_long_text(timestamp, "timestamp", path) if timestamp is not None else 0,
        kraft_controller_epoch=_as_int(
            obj.get("kraftControllerEpoch", -1), "kraftControllerEpoch", path
        ),
        version=_as_int(obj.get("version", 1), "version", path),
    )


def encode_controller_epoch(epoch: int) -> bytes:
    return str(int(epoch)).encode("ascii")


def decode_controller_epoch(data: bytes | None, path: str = CONTROLLER_EPOCH_PATH) -> int:
    try:
        return int((data or b"").decode("ascii").strip())
    except (UnicodeDecodeError, ValueError):
        raise ZNodeDecodeError(path, f"expected an integer, got {data!r}") from None


# ---------------------------------------------------------------------------------------------
# /brokers/topics/<t> and its partition states
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TopicAssignment:
    """The data of /brokers/topics/<t>: replicas per partition (in preference order), topic id."""

    partitions: Mapping[int, tuple[int, ...]]
    topic_id: uuid.UUID | None = None
    adding_replicas: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    removing_replicas: Mapping[int, tuple[int, ...]] = field(default_factory=dict)


def encode_topic_assignment(assignment: TopicAssignment) -> bytes:
    obj: dict[str, Any] = {
        "version": 3,
        "partitions": _encode_replica_map(assignment.partitions),
        "adding_replicas": _encode_replica_map(assignment.adding_replicas),
        "removing_replicas": _encode_replica_map(assignment.removing_replicas),
    }
    if assignment.topic_id is not None:
        obj["topic_id"] = kafka_uuid_text(assignment.topic_id)
    return _dump(obj)


def decode_topic_assignment(data: bytes | None, path: str) -> TopicAssignment:
    obj = _load_object(data, path)
    topic_id = None
    if obj.get("topic_id") is not None:
        try:
            topic_id = parse_kafka_uuid(obj["topic_id"])
        except ValueError as exc:
            raise ZNodeDecodeError(path, f"topic_id: {exc}") from None
    return TopicAssignment(
        partitions=_replica_map(_get(obj, "partitions", path), "partitions", path),
        topic_id=topic_id,
        adding_replicas=_optional_replica_map(obj, "adding_replicas", path),
        removing_replicas=_optional_replica_map(obj, "removing_replicas", path),
    )


LEADER_RECOVERY_RECOVERED = 0
LEADER_RECOVERY_RECOVERING = 1
NO_LEADER = -1


@dataclass(frozen=True, slots=True)
class PartitionState:
    """The data of .../partitions/<p>/state: leader, ISR and the controller epoch that wrote it."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    leader_recovery_state: int = LEADER_RECOVERY_RECOVERED
    # epochlog's addition: (broker id, broker epoch) of each ISR member when the state was
    # written, so that any later controller can tell a member that registered again since
    # (a bounce) from one that did not. Kafka's tools ignore the extra field.
    isr_broker_epochs: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True, slots=True)
class VersionedPartitionState:
    """A partition state with its znode version, which is the partition epoch."""

    state: PartitionState
    version: int


def encode_partition_state(state: PartitionState) -> bytes:
    """The state znode's JSON, as Kafka writes it (keys in this order, no spaces)."""
    if state.leader_recovery_state == LEADER_RECOVERY_RECOVERED:
        # The common case, formatted directly: the controller writes one per partition of an
        # event, and json.dumps of a dict cost more than the ZooKeeper write itself. Same bytes
        # as the general path below (tests/unit/test_zk_znodes.py checks).
        isr = ",".join([str(int(r)) for r in state.isr])
        text = (
            f'{{"controller_epoch":{int(state.controller_epoch)},"leader":{int(state.leader)},'
            f'"version":1,"leader_epoch":{int(state.leader_epoch)},"isr":[{isr}]'
        )
        if state.isr_broker_epochs:
            epochs = ",".join([f'"{int(b)}":{int(e)}' for b, e in state.isr_broker_epochs])
            text += f',"isr_broker_epochs":{{{epochs}}}'
        return (text + "}").encode()
    return _encode_partition_state_json(state)


def _encode_partition_state_json(state: PartitionState) -> bytes:
    obj: dict[str, Any] = {
        "controller_epoch": state.controller_epoch,
        "leader": state.leader,
        "version": 1,
        "leader_epoch": state.leader_epoch,
        "isr": [int(r) for r in state.isr],
    }
    if state.leader_recovery_state != LEADER_RECOVERY_RECOVERED:  # Kafka writes it only then
        obj["leader_recovery_state"] = state.leader_recovery_state
    if state.isr_broker_epochs:
        obj["isr_broker_epochs"] = {str(b): e for b, e in state.isr_broker_epochs}
    return _dump(obj)


def decode_partition_state(data: bytes | None, path: str) -> PartitionState:
    obj = _load_object(data, path)
    return PartitionState(
        leader=_int_field(obj, "leader", path),
        leader_epoch=_int_field(obj, "leader_epoch", path),
        isr=_as_int_list(_get(obj, "isr", path), "'isr'", path),
        controller_epoch=_int_field(obj, "controller_epoch", path),
        leader_recovery_state=_as_int(
            obj.get("leader_recovery_state", LEADER_RECOVERY_RECOVERED),
            "leader_recovery_state",
            path,
        ),
        isr_broker_epochs=_broker_epoch_map(obj.get("isr_broker_epochs", {}), path),
    )


def _broker_epoch_map(value: Any, path: str) -> tuple[tuple[int, int], ...]:
    if not isinstance(value, dict):
        raise ZNodeDecodeError(path, f"'isr_broker_epochs' must be an object, got {value!r}")
    epochs: list[tuple[int, int]] = []
    for key, epoch in value.items():
        try:
            broker = int(key)
        except ValueError:
            what = f"'isr_broker_epochs' key {key!r} is not a broker id"
            raise ZNodeDecodeError(path, what) from None
        epochs.append((broker, _as_int(epoch, f"'isr_broker_epochs'[{key}]", path)))
    return tuple(sorted(epochs))


# ---------------------------------------------------------------------------------------------
# /config/topics/<t>
# ---------------------------------------------------------------------------------------------


def encode_topic_config(config: Mapping[str, str]) -> bytes:
    return _dump({"version": 1, "config": {str(k): str(v) for k, v in config.items()}})


def decode_topic_config(data: bytes | None, path: str) -> dict[str, str]:
    if not data:  # Kafka reads a missing or empty config znode as no overrides
        return {}
    obj = _load_object(data, path)
    config = obj.get("config")
    if config is None:
        config = {}
    if not isinstance(config, dict):
        raise ZNodeDecodeError(path, "config must be an object")
    return {str(k): _as_str(v, f"config[{k}]", path) for k, v in config.items()}


# ---------------------------------------------------------------------------------------------
# KIP-39: /admin/next_controller and /admin/ready_to_serve_as_controller
# ---------------------------------------------------------------------------------------------


def encode_broker_id_node(broker_id: int) -> bytes:
    """{"version":1,"brokerid":x}: the data of both KIP-39 znodes."""
    return _dump({"version": 1, "brokerid": int(broker_id)})


def decode_broker_id_node(data: bytes | None, path: str) -> int:
    text = (data or b"").strip()
    if text.lstrip(b"-").isdigit():
        return int(text)
    return _int_field(_load_object(data, path), "brokerid", path)


# ---------------------------------------------------------------------------------------------
# /latest_producer_id_block
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProducerIdBlock:
    """Producer ids block_start..block_end (both inclusive) handed to one broker."""

    broker_id: int
    block_start: int
    block_end: int

    @property
    def size(self) -> int:
        return self.block_end - self.block_start + 1

    def __contains__(self, producer_id: object) -> bool:
        return isinstance(producer_id, int) and self.block_start <= producer_id <= self.block_end


def encode_producer_id_block(block: ProducerIdBlock) -> bytes:
    return _dump(
        {
            "version": 1,
            "broker": block.broker_id,
            "block_start": str(block.block_start),
            "block_end": str(block.block_end),
        }
    )


def decode_producer_id_block(
    data: bytes | None, path: str = LATEST_PRODUCER_ID_BLOCK_PATH
) -> ProducerIdBlock | None:
    """The last allocated block, or None when nothing was allocated yet (empty znode)."""
    if not data:
        return None
    obj = _load_object(data, path)
    return ProducerIdBlock(
        broker_id=_int_field(obj, "broker", path),
        block_start=_as_long_text(_get(obj, "block_start", path), "block_start", path),
        block_end=_as_long_text(_get(obj, "block_end", path), "block_end", path),
    )


def next_producer_id_block(
    previous: ProducerIdBlock | None, broker_id: int, size: int = PRODUCER_ID_BLOCK_SIZE
) -> ProducerIdBlock:
    """The block after `previous` (the first one starts at 0)."""
    start = 0 if previous is None else previous.block_end + 1
    if start + size - 1 > 2**63 - 1:
        raise OverflowError("producer ids exhausted")
    return ProducerIdBlock(broker_id, start, start + size - 1)


# ---------------------------------------------------------------------------------------------
# /cluster/id
# ---------------------------------------------------------------------------------------------


def encode_cluster_id(cluster_id: str) -> bytes:
    return _dump({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes | None, path: str = CLUSTER_ID_PATH) -> str:
    obj = _load_object(data, path)
    return _as_str(_get(obj, "id", path), "id", path)


# -- /admin/preferred_replica_election: Kafka's ZooKeeper-mode request for a preferred election

PREFERRED_REPLICA_ELECTION_PATH = "/admin/preferred_replica_election"


def encode_preferred_replica_election(partitions: Iterable[tuple[str, int]]) -> bytes:
    return _dump(
        {"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in sorted(partitions)]}
    )


def decode_preferred_replica_election(
    data: bytes, path: str = PREFERRED_REPLICA_ELECTION_PATH
) -> list[tuple[str, int]]:
    obj = _load_object(data, path)
    entries = obj.get("partitions")
    if not isinstance(entries, list):
        raise ZNodeDecodeError(path, "expected {'partitions': [...]}")
    result = []
    for entry in entries:
        if (
            not isinstance(entry, dict)
            or not isinstance(entry.get("topic"), str)
            or not isinstance(entry.get("partition"), int)
        ):
            raise ZNodeDecodeError(path, f"bad partition entry {entry!r}")
        result.append((entry["topic"], entry["partition"]))
    return result
