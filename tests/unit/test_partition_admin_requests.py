"""The CLI's input for topics alter, records delete and leaders elect, and how a broker that
is not the controller answers CreatePartitions and ElectLeaders."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from epochlog.broker.handlers.partition_admin import (
    handle_create_partitions,
    handle_elect_leaders,
)
from epochlog.cli.commands import CommandError
from epochlog.cli.partitions_cmd import parse_replica_assignment, read_offsets_json
from epochlog.protocol import messages as m
from epochlog.protocol.api import Request
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.headers import RequestHeader


def test_replica_assignment_in_kafka_topics_form() -> None:
    assert parse_replica_assignment("1:2,2:3,3") == [[1, 2], [2, 3], [3]]
    with pytest.raises(CommandError, match="partition 1's replicas '2:x'"):
        parse_replica_assignment("1:2,2:x")
    with pytest.raises(CommandError, match="partition 0 names a broker twice"):
        parse_replica_assignment("1:1")


def write(tmp_path: Path, data: Any) -> str:
    path = tmp_path / "offsets.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return str(path)


def test_offsets_json_of_kafka_delete_records(tmp_path: Path) -> None:
    data = {
        "partitions": [
            {"topic": "t", "partition": 0, "offset": 3},
            {"topic": "t", "partition": 1, "offset": -1},
        ],
        "version": 1,
    }
    assert read_offsets_json(write(tmp_path, data)) == {("t", 0): 3, ("t", 1): -1}


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ("{oops", "is not JSON"),
        ({"version": 1}, 'needs a "partitions" list'),
        ({"partitions": [3]}, "partitions[0] is not an object"),
        ({"partitions": [{"topic": "t", "partition": 0}]}, "partitions[0] needs 'offset'"),
        ({"partitions": [{"topic": 1, "partition": 0, "offset": 1}]}, "needs 'topic' as a string"),
        ({"partitions": [{"topic": "t", "partition": "0", "offset": 1}]}, "'partition' as an int"),
        ({"partitions": [{"topic": "t", "partition": 0, "offset": -2}]}, "is below -1"),
        (
            {"partitions": [{"topic": "t", "partition": 0, "offset": 1}] * 2},
            "duplicate topic partitions: t-0",
        ),
    ],
)
def test_bad_offsets_json_is_refused_naming_the_problem(
    tmp_path: Path, data: Any, words: str
) -> None:
    with pytest.raises(CommandError) as raised:
        read_offsets_json(write(tmp_path, data))
    assert words in str(raised.value)


def test_a_missing_offsets_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="cannot read .*missing.json"):
        read_offsets_json(str(tmp_path / "missing.json"))


def not_controller_services() -> Any:
    cache = SimpleNamespace(topics=lambda: ["t"], partitions=lambda topic: {0: None, 1: None})
    return SimpleNamespace(controller=SimpleNamespace(is_active=False), metadata_cache=cache)


def request(api_key: int, version: int, body: Any) -> Request:
    header = RequestHeader(
        request_api_key=api_key, request_api_version=version, correlation_id=1, client_id="c"
    )
    return Request(header, body)


def test_create_partitions_on_a_broker_that_is_not_the_controller() -> None:
    R = m.CreatePartitionsRequest
    body = R(
        topics=[R.CreatePartitionsTopic(name=n, count=3) for n in ("a", "b", "a")],
        timeout_ms=100,
    )
    answer = asyncio.run(
        handle_create_partitions(not_controller_services(), request(37, 3, body), None)  # type: ignore[arg-type]
    )
    assert [(r.name, r.error_code) for r in answer.results] == [
        ("a", ErrorCode.NOT_CONTROLLER),
        ("b", ErrorCode.NOT_CONTROLLER),
    ]


def test_elect_leaders_on_a_broker_that_is_not_the_controller() -> None:
    R = m.ElectLeadersRequest
    named = R(topic_partitions=[R.TopicPartitions(topic="u", partitions=[4])], timeout_ms=100)
    answer = asyncio.run(
        handle_elect_leaders(not_controller_services(), request(43, 2, named), None)  # type: ignore[arg-type]
    )
    assert [
        (r.topic, p.partition_id, p.error_code)
        for r in answer.replica_election_results
        for p in r.partition_result
    ] == [("u", 4, ErrorCode.NOT_CONTROLLER)]
    every = R(topic_partitions=None, timeout_ms=100)
    answer = asyncio.run(
        handle_elect_leaders(not_controller_services(), request(43, 2, every), None)  # type: ignore[arg-type]
    )
    assert [
        (p.partition_id, p.error_code) for p in answer.replica_election_results[0].partition_result
    ] == [(0, ErrorCode.NOT_CONTROLLER), (1, ErrorCode.NOT_CONTROLLER)]


def test_an_unknown_election_type_is_an_invalid_request() -> None:
    body = m.ElectLeadersRequest(election_type=5, topic_partitions=None, timeout_ms=100)
    answer = asyncio.run(
        handle_elect_leaders(not_controller_services(), request(43, 1, body), None)  # type: ignore[arg-type]
    )
    assert answer.error_code == ErrorCode.INVALID_REQUEST
    assert answer.replica_election_results == []
