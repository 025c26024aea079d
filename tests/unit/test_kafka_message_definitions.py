"""Every version of every API we serve, checked against Kafka's own message definitions.

The definitions are the protocol facts of Kafka 3.9's `common/message/*.json` (see
`tests/data/kafka-messages/README.md`). For each served API and each version in our range, for
the request and the response:

- our advertised range lies within Kafka's valid range (Kafka 3.9's; Metadata v13 is Kafka 4.0's
  KIP-1102 version and is checked against Kafka 4's Metadata definitions instead);
- our schema agrees with Kafka's: the fields present at that version, in order, with the same
  names (compared case-insensitively), types, nullability and tags, and the same flexibility;
- an example message built from Kafka's definition and encoded by the small encoder below
  (written from the definitions and Kafka's primitive encodings in `tests/kafka_wire.py`, not
  from our codec) is read by our decoder with the same values, and our encoder gives back the
  very same bytes. Each version is tried twice: every field set, and every nullable field null.

PinController is not a Kafka API (the vendor key of KIP-39) and has no definition to check.
epochlog's own tagged fields (`EPOCHLOG_TAGGED_FIELDS`) are the only fields Kafka's lack.
"""

from __future__ import annotations

import itertools
import json
import struct
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from epochlog.protocol.api import APIS, ApiKey
from epochlog.protocol.codec import Message
from epochlog.protocol.schema import Field
from tests import kafka_wire as w

DATA = Path(__file__).resolve().parent.parent / "data" / "kafka-messages"
KAFKA_39 = DATA / "3.9"
KAFKA_4 = DATA / "4.x"
# API -> our versions past Kafka 3.9's range, each checked against Kafka 4's definition instead.
BEYOND_KAFKA_39 = {ApiKey.METADATA: range(13, 14)}  # KIP-1102: top-level REBOOTSTRAP_REQUIRED
NOT_KAFKA_APIS = {ApiKey.PIN_CONTROLLER}
# epochlog's own tagged fields (tags from 1000; Kafka's readers skip unknown tags): a broker's
# epoch beside its address, for KIP-903 in ZooKeeper mode. Message -> field paths.
EPOCHLOG_TAGGED_FIELDS = {
    "UpdateMetadataRequest": {".LiveBrokers.BrokerEpoch"},
    "DescribeClusterResponse": {".Brokers.BrokerEpoch"},
}

SERVED = sorted(key for key in APIS if key not in NOT_KAFKA_APIS)


# ----------------------------------------------------------------------- Kafka's definitions


@dataclass(frozen=True)
class Range:
    """A version range as Kafka writes it: "3+", "0-7", "5" or "none"."""

    low: int
    high: int | None

    @classmethod
    def parse(cls, text: str | None) -> Range:
        if text is None or text == "none":
            return cls(1, 0)
        if text.endswith("+"):
            return cls(int(text[:-1]), None)
        low, _, high = text.partition("-")
        return cls(int(low), int(high or low))

    def __contains__(self, version: int) -> bool:
        return self.low <= version and (self.high is None or version <= self.high)


def load(directory: Path, name: str) -> dict[str, Any]:
    return json.loads((directory / f"{name}.json").read_text())


def definition(name: str, api_key: int, version: int) -> dict[str, Any]:
    """Kafka's definition of message `name` that covers `version`."""
    if version in BEYOND_KAFKA_39.get(api_key, range(0)):
        return load(KAFKA_4, name)
    return load(KAFKA_39, name)


def kafka_structs(defn: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Struct name -> fields, for inline structs and common structs alike."""
    structs: dict[str, list[dict[str, Any]]] = {}

    def walk(fields: list[dict[str, Any]]) -> None:
        for f in fields:
            if "fields" in f:
                structs[f["type"].removeprefix("[]")] = f["fields"]
                walk(f["fields"])

    for common in defn.get("commonStructs", []):
        structs[common["name"]] = common["fields"]
        walk(common["fields"])
    walk(defn["fields"])
    return structs


def is_struct_type(type_name: str) -> bool:
    return type_name.removeprefix("[]")[:1].isupper()


def kafka_layout(
    fields: list[dict[str, Any]], version: int, flexible: bool
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(fields written in order, tagged fields) of a field list at `version`."""
    present = [f for f in fields if version in Range.parse(f["versions"])]
    tagged = [f for f in present if flexible and version in Range.parse(f.get("taggedVersions"))]
    return [f for f in present if f not in tagged], sorted(tagged, key=lambda f: f["tag"])


# --------------------------------------------------------------------- our schema, compared


def our_struct_fields(cls: type[Message], f: Field) -> tuple[Field, ...]:
    return f.fields or cls.SCHEMA.struct_names[f.element_type]


def our_layout(fields: tuple[Field, ...], version: int, flexible: bool) -> tuple[list[Field], ...]:
    present = [f for f in fields if version in f.versions]
    tagged = [f for f in present if flexible and f.tag is not None and version in f.tagged]
    return [f for f in present if f not in tagged], sorted(tagged, key=lambda f: f.tag or 0)


def differences(
    cls: type[Message],
    kafka: list[dict[str, Any]],
    ours: tuple[Field, ...],
    structs: dict[str, list[dict[str, Any]]],
    version: int,
    flexible: bool,
    path: str,
) -> list[str]:
    """Where our fields differ from Kafka's at `version`, each named by its path."""
    found: list[str] = []
    k_plain, k_tagged = kafka_layout(kafka, version, flexible)
    o_plain, o_tagged = our_layout(ours, version, flexible)
    extensions = EPOCHLOG_TAGGED_FIELDS.get(cls.SCHEMA.name, set())
    o_tagged = [f for f in o_tagged if f"{path}.{f.name}" not in extensions]
    k_names = [f["name"].lower() for f in k_plain]
    o_names = [f.name.lower() for f in o_plain]
    if k_names != o_names:
        found.append(f"{path}: fields {o_names}, Kafka's {k_names}")
        return found
    k_tags = [(f["tag"], f["name"].lower()) for f in k_tagged]
    o_tags = [(f.tag, f.name.lower()) for f in o_tagged]
    if k_tags != o_tags:
        found.append(f"{path}: tagged fields {o_tags}, Kafka's {k_tags}")
        return found
    for k, o in zip(k_plain + k_tagged, o_plain + o_tagged, strict=True):
        where = f"{path}.{k['name']}"
        if is_struct_type(k["type"]) or o.is_struct:
            if not (is_struct_type(k["type"]) and o.is_struct) or (
                k["type"].startswith("[]") != o.is_array
            ):
                found.append(f"{where}: type {o.type}, Kafka's {k['type']}")
                continue
            found += differences(
                cls,
                structs[k["type"].removeprefix("[]")],
                our_struct_fields(cls, o),
                structs,
                version,
                flexible,
                where,
            )
        elif k["type"] != o.type:
            found.append(f"{where}: type {o.type}, Kafka's {k['type']}")
        k_nullable = version in Range.parse(k.get("nullableVersions"))
        if k_nullable != (version in o.nullable):
            found.append(f"{where}: nullable {version in o.nullable}, Kafka's {k_nullable}")
        if "flexibleVersions" in k or o.flexible is not None:
            k_flex = version in Range.parse(k.get("flexibleVersions", "0+" if flexible else "none"))
            o_flex = flexible if o.flexible is None else version in o.flexible
            if k_flex != o_flex:
                found.append(f"{where}: flexible {o_flex}, Kafka's {k_flex}")
    return found


# ------------------------------------------------------- an encoder written from the definitions


class Example:
    """Builds a message as a dict (Kafka field name -> value) from Kafka's definition, every value
    distinct and none equal to its default, and encodes it by Kafka's rules."""

    INTS = {"int8": (">b", 100), "int16": (">h", 30000), "int32": (">i", 2**31 - 1)}

    def __init__(self, structs: dict[str, list[dict[str, Any]]], version: int, flexible: bool):
        self.structs = structs
        self.version = version
        self.flexible = flexible
        self.counter = itertools.count(1)

    # values

    def message(self, fields: list[dict[str, Any]], nulls: bool) -> dict[str, Any]:
        plain, tagged = kafka_layout(fields, self.version, self.flexible)
        return {f["name"]: self.value(f, nulls) for f in plain + tagged}

    def value(self, f: dict[str, Any], nulls: bool) -> Any:
        if nulls and self.version in Range.parse(f.get("nullableVersions")):
            return None
        if f["type"].startswith("[]"):
            return [self.element(f["type"][2:], nulls) for _ in range(2)]
        return self.element(f["type"], nulls)

    def element(self, type_name: str, nulls: bool) -> Any:
        n = next(self.counter)
        if type_name in self.INTS:
            return n % self.INTS[type_name][1] + 1
        if type_name == "int64":
            return n * 10_000_000_019
        if type_name == "bool":
            return True
        if type_name == "string":
            return f"s{n}"
        if type_name in ("bytes", "records"):
            return bytes([n % 256]) * 3
        if type_name == "uuid":
            return uuid.UUID(int=n * 0x1000_0000_0000_0001)
        return self.message(self.structs[type_name], nulls)

    # bytes

    def encode(self, fields: list[dict[str, Any]], value: dict[str, Any]) -> bytes:
        plain, tagged = kafka_layout(fields, self.version, self.flexible)
        out = b"".join(self.encode_field(f, value[f["name"]]) for f in plain)
        if self.flexible:
            written = [
                (f["tag"], self.encode_field(f, value[f["name"]]))
                for f in tagged
                if value[f["name"]] is not None  # a null tagged field is its default: omitted
            ]
            out += w.uv(len(written)) + b"".join(
                w.uv(tag) + w.uv(len(data)) + data for tag, data in written
            )
        return out

    def encode_field(self, f: dict[str, Any], value: Any) -> bytes:
        compact = self.flexible
        if "flexibleVersions" in f:
            compact = self.version in Range.parse(f["flexibleVersions"])
        type_name = f["type"]
        if type_name.startswith("[]"):
            if value is None:
                return w.carray(None) if compact else w.array(None)
            items = [self.encode_element(type_name[2:], v, compact) for v in value]
            return w.carray(items) if compact else w.array(items)
        if is_struct_type(type_name) and self.version in Range.parse(f.get("nullableVersions")):
            return w.i8(-1) if value is None else w.i8(1) + self.encode_element(type_name, value)
        return self.encode_element(type_name, value, compact)

    def encode_element(self, type_name: str, value: Any, compact: bool = False) -> bytes:
        if type_name in self.INTS:
            return struct.pack(self.INTS[type_name][0], value)
        if type_name == "int64":
            return w.i64(value)
        if type_name == "bool":
            return w.boolean(value)
        if type_name == "uuid":
            return value.bytes
        if type_name == "string":
            return w.cstring(value) if compact else w.string(value)
        if type_name in ("bytes", "records"):
            return w.cbytes(value) if compact else w.bytes_(value)
        return self.encode(self.structs[type_name], value)


def assert_same_values(
    cls: type[Message],
    structs: dict[str, list[dict[str, Any]]],
    ours: tuple[Field, ...],
    expected: dict[str, Any],
    decoded: Any,
    path: str,
) -> None:
    """Each value of the example, read back by our decoder (found by Kafka's field name)."""
    by_name = {f.name.lower(): f for f in ours}
    for name, value in expected.items():
        f = by_name[name.lower()]
        got = getattr(decoded, f.attr)
        where = f"{path}.{name}"
        if f.is_struct and value is not None:
            values, gots = (value, got) if f.is_array else ([value], [got])
            assert len(gots) == len(values), where
            for v, g in zip(values, gots, strict=True):
                assert_same_values(cls, structs, our_struct_fields(cls, f), v, g, where)
        elif isinstance(got, (bytes, bytearray, memoryview)):
            assert bytes(got) == value, where
        else:
            assert got == value, where


# ------------------------------------------------------------------------------------ tests


def cases() -> list[Any]:
    return [
        pytest.param(key, cls, version, id=f"{cls.SCHEMA.name}-v{version}")
        for key in SERVED
        for cls in (APIS[key].request, APIS[key].response)
        for version in range(APIS[key].min_version, APIS[key].max_version + 1)
    ]


def test_only_the_vendor_api_lacks_a_kafka_definition() -> None:
    defined = {load(KAFKA_39, APIS[key].request.SCHEMA.name)["apiKey"] for key in SERVED}
    assert defined == set(SERVED)
    assert set(APIS) - set(SERVED) == {ApiKey.PIN_CONTROLLER}


def test_epochlogs_own_fields_are_tagged_past_kafkas_tags() -> None:
    classes = {cls.SCHEMA.name: cls for api in APIS.values() for cls in (api.request, api.response)}
    for name, paths in EPOCHLOG_TAGGED_FIELDS.items():
        cls = classes[name]
        for path in paths:
            fields = cls.SCHEMA.fields
            *parents, leaf = path.strip(".").split(".")
            for parent in parents:
                fields = our_struct_fields(cls, next(f for f in fields if f.name == parent))
            f = next(f for f in fields if f.name == leaf)
            assert f.tag is not None and f.tag >= 1000 and f.tagged == f.versions, path


@pytest.mark.parametrize("api_key", SERVED, ids=[APIS[k].name for k in SERVED])
def test_our_range_lies_within_kafkas(api_key: int) -> None:
    api = APIS[api_key]
    for cls in (api.request, api.response):
        defn = load(KAFKA_39, cls.SCHEMA.name)
        assert defn["apiKey"] == api_key and defn["type"] == cls.SCHEMA.kind
        valid = Range.parse(defn["validVersions"])
        assert valid.high is not None
        stable_high = valid.high - 1 if defn.get("latestVersionUnstable") else valid.high
        beyond = BEYOND_KAFKA_39.get(api_key, range(0))
        assert api.min_version >= valid.low
        assert [v for v in range(stable_high + 1, api.max_version + 1)] == list(beyond)
        if beyond:
            newer = Range.parse(load(KAFKA_4, cls.SCHEMA.name)["validVersions"])
            assert api.max_version in newer


@pytest.mark.parametrize(("api_key", "cls", "version"), cases())
def test_our_schema_agrees_with_kafkas_definition(
    api_key: int, cls: type[Message], version: int
) -> None:
    defn = definition(cls.SCHEMA.name, api_key, version)
    flexible = version in Range.parse(defn["flexibleVersions"])
    assert cls.SCHEMA.is_flexible(version) == flexible
    found = differences(
        cls, defn["fields"], cls.SCHEMA.fields, kafka_structs(defn), version, flexible, ""
    )
    assert found == []


@pytest.mark.parametrize("nulls", [False, True], ids=["values", "nulls"])
@pytest.mark.parametrize(("api_key", "cls", "version"), cases())
def test_a_message_encoded_from_kafkas_definition_round_trips_through_our_codec(
    api_key: int, cls: type[Message], version: int, nulls: bool
) -> None:
    defn = definition(cls.SCHEMA.name, api_key, version)
    flexible = version in Range.parse(defn["flexibleVersions"])
    structs = kafka_structs(defn)
    example = Example(structs, version, flexible)
    expected = example.message(defn["fields"], nulls)
    data = example.encode(defn["fields"], expected)
    decoded = cls.decode(data, version)
    assert_same_values(cls, structs, cls.SCHEMA.fields, expected, decoded, cls.SCHEMA.name)
    assert decoded.encode(version) == data
