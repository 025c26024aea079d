"""The transaction APIs' messages (served ones are in `APIS`) checked against Kafka 3.9's
definitions with the machinery of `test_kafka_message_definitions.py`: the same valid and flexible
ranges, the same fields at every version, and a message encoded from Kafka's definition read back
by our decoder and re-encoded to the same bytes."""

from __future__ import annotations

from typing import Any

import pytest

from epochlog.protocol import messages
from epochlog.protocol.api import APIS
from epochlog.protocol.codec import Message
from tests.unit.test_kafka_message_definitions import (
    KAFKA_39,
    Example,
    Range,
    assert_same_values,
    differences,
    kafka_structs,
    load,
)

TRANSACTION_MESSAGES: dict[int, tuple[type[Message], type[Message]]] = {
    24: (messages.AddPartitionsToTxnRequest, messages.AddPartitionsToTxnResponse),
    25: (messages.AddOffsetsToTxnRequest, messages.AddOffsetsToTxnResponse),
    26: (messages.EndTxnRequest, messages.EndTxnResponse),
    28: (messages.TxnOffsetCommitRequest, messages.TxnOffsetCommitResponse),
    65: (messages.DescribeTransactionsRequest, messages.DescribeTransactionsResponse),
    66: (messages.ListTransactionsRequest, messages.ListTransactionsResponse),
}


def cases() -> list[Any]:
    return [
        pytest.param(key, cls, version, id=f"{cls.SCHEMA.name}-v{version}")
        for key, pair in TRANSACTION_MESSAGES.items()
        for cls in pair
        for version in cls.SCHEMA.valid
    ]


def test_those_served_are_advertised_with_these_messages() -> None:
    for key in set(TRANSACTION_MESSAGES) & set(APIS):
        assert (APIS[key].request, APIS[key].response) == TRANSACTION_MESSAGES[key]


def test_the_coordinators_apis_are_served_at_the_versions_clients_send() -> None:
    served = {key: (APIS[key].min_version, APIS[key].max_version) for key in (24, 25, 26, 65, 66)}
    # AddPartitionsToTxn v5 (KIP-890 part 2, transaction.version 2) is not served.
    assert served == {24: (0, 4), 25: (0, 4), 26: (0, 4), 65: (0, 0), 66: (0, 1)}


@pytest.mark.parametrize("api_key", sorted(TRANSACTION_MESSAGES))
def test_our_range_is_kafkas(api_key: int) -> None:
    for cls in TRANSACTION_MESSAGES[api_key]:
        defn = load(KAFKA_39, cls.SCHEMA.name)
        assert defn["apiKey"] == api_key and defn["type"] == cls.SCHEMA.kind
        valid = Range.parse(defn["validVersions"])
        assert valid.high is not None
        assert list(cls.SCHEMA.valid) == list(range(valid.low, valid.high + 1))


@pytest.mark.parametrize(("api_key", "cls", "version"), cases())
def test_our_schema_agrees_with_kafkas_definition(
    api_key: int, cls: type[Message], version: int
) -> None:
    defn = load(KAFKA_39, cls.SCHEMA.name)
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
    defn = load(KAFKA_39, cls.SCHEMA.name)
    flexible = version in Range.parse(defn["flexibleVersions"])
    structs = kafka_structs(defn)
    example = Example(structs, version, flexible)
    expected = example.message(defn["fields"], nulls)
    data = example.encode(defn["fields"], expected)
    decoded = cls.decode(data, version)
    assert_same_values(cls, structs, cls.SCHEMA.fields, expected, decoded, cls.SCHEMA.name)
    assert decoded.encode(version) == data
