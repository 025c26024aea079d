"""Broker loggers as a config resource (KIP-412): describe and change levels, Kafka's errors."""

from __future__ import annotations

import logging

import pytest

from epochlog.config.dynamic import AlterOp, ConfigChange, ConfigRequestError, ConfigSource
from epochlog.config.loggers import (
    TRACE,
    apply_logger_plan,
    check_logger_resource,
    describe_loggers,
    level_name,
    plan_logger_changes,
)
from epochlog.protocol.errors import ErrorCode

LEVELS = {"root": logging.INFO, "epochlog.broker": logging.WARNING, "kazoo": logging.INFO}


def test_loggers_are_described_with_kafkas_level_names() -> None:
    entries = {e.name: e for e in describe_loggers(LEVELS)}
    assert {n: e.value for n, e in entries.items()} == {
        "root": "INFO",
        "epochlog.broker": "WARN",
        "kazoo": "INFO",
    }
    assert all(e.source is ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG for e in entries.values())
    assert not any(e.read_only for e in entries.values())
    assert [e.name for e in describe_loggers(LEVELS, ["kazoo", "nope"])] == ["kazoo"]
    assert (level_name(TRACE), level_name(logging.CRITICAL), level_name(25)) == (
        "TRACE",
        "FATAL",
        "INFO",
    )


def test_set_and_delete_plan_levels() -> None:
    changes = [
        ConfigChange("epochlog.broker", "debug", AlterOp.SET),
        ConfigChange("kazoo", None, AlterOp.DELETE),
        ConfigChange("root", "TRACE", AlterOp.SET),
    ]
    assert plan_logger_changes(changes, LEVELS) == {
        "epochlog.broker": logging.DEBUG,
        "kazoo": None,
        "root": TRACE,
    }


@pytest.mark.parametrize(
    "change, code, message",
    [
        (ConfigChange("nope", "INFO"), ErrorCode.INVALID_CONFIG, "Logger nope does not exist!"),
        (
            ConfigChange("kazoo", "VERBOSE"),
            ErrorCode.INVALID_CONFIG,
            "Cannot set the log level of kazoo to VERBOSE as it is not a supported log level. "
            "Valid log levels are DEBUG,ERROR,FATAL,INFO,TRACE,WARN",
        ),
        (
            ConfigChange("root", None, AlterOp.DELETE),
            ErrorCode.INVALID_REQUEST,
            "Removing the log level of the root logger is not allowed",
        ),
        (
            ConfigChange("kazoo", "INFO", AlterOp.APPEND),
            ErrorCode.INVALID_REQUEST,
            "APPEND operation is not allowed for the BROKER_LOGGER resource",
        ),
    ],
)
def test_what_may_not_be_done_is_refused_with_kafkas_error(
    change: ConfigChange, code: ErrorCode, message: str
) -> None:
    good = ConfigChange("epochlog.broker", "DEBUG")
    with pytest.raises(ConfigRequestError) as refused:
        plan_logger_changes([good, change], LEVELS)  # nothing is applied from a refused request
    assert refused.value.error == code and str(refused.value) == message


def test_the_resource_names_the_broker_it_is_sent_to() -> None:
    check_logger_resource("3", 3)
    for name, message in [
        ("", "Broker id must not be empty"),
        ("2", "Unexpected broker id, expected 3 but received 2"),
    ]:
        with pytest.raises(ConfigRequestError, match=message):
            check_logger_resource(name, 3)


def test_a_plan_sets_and_removes_python_levels() -> None:
    logger = logging.getLogger("epochlog.test.loggers")
    apply_logger_plan({"epochlog.test.loggers": TRACE})
    assert logger.level == TRACE
    apply_logger_plan({"epochlog.test.loggers": None})
    assert logger.level == logging.NOTSET
