"""`epochlog reassign`: JSON formats and messages (kafka-reassign-partitions'), no cluster."""

from __future__ import annotations

import json
import random

import pytest

from epochlog.cli.main import build_parser
from epochlog.cli.reassign_cmd import (
    ReassignmentInputError,
    format_reassignment_json,
    parse_broker_list,
    parse_reassignment_json,
    parse_topics_to_move_json,
    propose_assignment,
    verify_lines,
)


def test_reassignment_json_round_trips_in_kafkas_format() -> None:
    text = format_reassignment_json({("t", 1): [3, 4], ("t", 0): [2, 3, 4]})
    assert text == (
        '{"version":1,"partitions":['
        '{"topic":"t","partition":0,"replicas":[2,3,4],"log_dirs":["any","any","any"]},'
        '{"topic":"t","partition":1,"replicas":[3,4],"log_dirs":["any","any"]}]}'
    )
    assert parse_reassignment_json(text) == {("t", 0): [2, 3, 4], ("t", 1): [3, 4]}
    # log_dirs may be left out, as Kafka's tool allows
    plain = '{"version":1,"partitions":[{"topic":"t","partition":2,"replicas":[1]}]}'
    assert parse_reassignment_json(plain) == {("t", 2): [1]}


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("not json", "not valid JSON"),
        ('{"version":1}', '"partitions"'),
        ('{"version":1,"partitions":[]}', "no partitions"),
        ('{"partitions":[{"topic":"t","partition":-1,"replicas":[1]}]}', '"partition"'),
        ('{"partitions":[{"topic":"t","partition":0,"replicas":[]}]}', "t-0"),
        ('{"partitions":[{"topic":"t","partition":0,"replicas":[1,1]}]}', "duplicate"),
        ('{"partitions":[{"topic":"t","partition":0,"replicas":["a"]}]}', "broker ids"),
        (
            '{"partitions":[{"topic":"t","partition":0,"replicas":[1],"log_dirs":["/d"]}]}',
            "log directories",
        ),
        (
            '{"partitions":[{"topic":"t","partition":0,"replicas":[1,2],"log_dirs":["any"]}]}',
            "one directory per replica",
        ),
        (
            '{"partitions":[{"topic":"t","partition":0,"replicas":[1]},'
            '{"topic":"t","partition":0,"replicas":[2]}]}',
            "twice",
        ),
    ],
)
def test_bad_reassignment_json_is_refused_naming_what_is_wrong(text: str, named: str) -> None:
    with pytest.raises(ReassignmentInputError, match=named):
        parse_reassignment_json(text)


def test_topics_to_move_and_broker_list() -> None:
    assert parse_topics_to_move_json('{"topics":[{"topic":"a"},{"topic":"b"}],"version":1}') == [
        "a",
        "b",
    ]
    with pytest.raises(ReassignmentInputError, match="duplicate entries: a"):
        parse_topics_to_move_json('{"topics":[{"topic":"a"},{"topic":"a"}]}')
    with pytest.raises(ReassignmentInputError, match='"topics"'):
        parse_topics_to_move_json("{}")
    assert parse_broker_list("4,2,3") == [4, 2, 3]
    with pytest.raises(ReassignmentInputError, match="duplicate"):
        parse_broker_list("1,1")
    with pytest.raises(ReassignmentInputError, match="not a list"):
        parse_broker_list("1,x")
    with pytest.raises(ReassignmentInputError, match="--broker-list"):
        parse_broker_list(None)


def test_generate_spreads_each_topic_over_the_brokers_with_its_replication_factor() -> None:
    current = {("t", p): [1, 2, 3] for p in range(4)} | {("u", 0): [1, 2]}
    proposed = propose_assignment(current, [2, 3, 4, 5], random.Random(7))
    assert set(proposed) == set(current)
    for tp, replicas in proposed.items():
        assert len(replicas) == len(current[tp]) and len(set(replicas)) == len(replicas)
        assert set(replicas) <= {2, 3, 4, 5}
    assert {proposed[("t", p)][0] for p in range(4)} == {2, 3, 4, 5}  # leaders spread
    with pytest.raises(ReassignmentInputError, match="topic t"):
        propose_assignment(current, [1, 2])


def test_verify_says_what_kafkas_tool_says() -> None:
    targets = {("t", 0): [2, 3, 4], ("t", 1): [2, 3, 4], ("t", 2): [1, 2]}
    lines = verify_lines(
        targets, ongoing={("t", 1)}, current={("t", 0): [2, 3, 4], ("t", 2): [1, 3]}
    )
    assert lines == [
        "Status of partition reassignment:",
        "Reassignment of partition t-0 is completed.",
        "Reassignment of partition t-1 is still in progress.",
        "There is no active reassignment of partition t-2, but replica set is 1,3 rather than 1,2.",
    ]


def test_the_command_takes_exactly_one_action() -> None:
    parser = build_parser()
    args = parser.parse_args(["reassign", "--execute", "--reassignment-json-file", "f.json"])
    assert args.execute and args.reassignment_json_file == "f.json"
    with pytest.raises(SystemExit):
        parser.parse_args(["reassign", "--execute", "--verify"])
    with pytest.raises(SystemExit):
        parser.parse_args(["reassign"])
    assert json.loads(format_reassignment_json({}))["partitions"] == []


def test_throttle_plan_is_kafkas_leader_and_follower_throttles() -> None:
    from epochlog.cli.reassign_cmd import throttle_plan

    current = {("t", 0): [1, 2], ("t", 1): [2, 3], ("u", 0): [1]}
    targets = {("t", 0): [3, 2], ("t", 1): [2, 3], ("u", 0): [2]}
    configs, brokers = throttle_plan(targets, current)
    assert configs == {
        "t": {
            "leader.replication.throttled.replicas": "0:1,0:2,1:2,1:3",
            "follower.replication.throttled.replicas": "0:3",
        },
        "u": {
            "leader.replication.throttled.replicas": "0:1",
            "follower.replication.throttled.replicas": "0:2",
        },
    }
    assert brokers == [1, 2, 3]


def test_a_negative_throttle_other_than_none_is_refused() -> None:
    from epochlog.cli.reassign_cmd import ReassignmentInputError, check_throttle

    check_throttle(-1, "--throttle")
    check_throttle(0, "--throttle")
    with pytest.raises(ReassignmentInputError, match="--throttle -5: a throttle is a rate"):
        check_throttle(-5, "--throttle")
