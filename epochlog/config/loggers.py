"""Broker loggers as a config resource (Kafka's BROKER_LOGGER, KIP-412): DescribeConfigs lists
this broker's loggers with their levels, IncrementalAlterConfigs sets or removes a level at
runtime, for this broker only and until it restarts (nothing is stored), as Kafka does.

Pure decisions over a snapshot of the loggers (`{name: level}` with Python's level numbers); the
handler takes the snapshot from `logging` and applies what `plan_logger_changes` returns. Kafka's
names for levels map to Python's: TRACE (5, below DEBUG), DEBUG, INFO, WARN, ERROR, FATAL
(CRITICAL). The root logger is "root", as in Kafka.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence

from epochlog.config.dynamic import (
    AlterOp,
    ConfigChange,
    ConfigEntry,
    ConfigRequestError,
    ConfigSource,
    ConfigType,
)
from epochlog.protocol.errors import ErrorCode

ROOT_LOGGER = "root"
TRACE = 5  # below DEBUG: Python has no TRACE

LEVELS: dict[str, int] = {
    "TRACE": TRACE,
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "WARN": logging.WARNING,
    "ERROR": logging.ERROR,
    "FATAL": logging.CRITICAL,
}
VALID_LEVELS = ",".join(sorted(LEVELS))

SET, DELETE, APPEND, SUBTRACT = AlterOp.SET, AlterOp.DELETE, AlterOp.APPEND, AlterOp.SUBTRACT


def level_name(level: int) -> str:
    """Kafka's name for a Python level: the highest named level at or below it."""
    named = [name for name, number in LEVELS.items() if number <= level]
    return max(named, key=LEVELS.__getitem__) if named else "TRACE"


def describe_loggers(
    levels: Mapping[str, int], keys: Iterable[str] | None = None
) -> list[ConfigEntry]:
    """Each logger (or those asked for that exist) with its effective level."""
    wanted = sorted(levels) if keys is None else [k for k in keys if k in levels]
    return [
        ConfigEntry(
            name=name,
            value=level_name(levels[name]),
            source=ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG,
            read_only=False,
            config_type=ConfigType.STRING,
        )
        for name in wanted
    ]


def plan_logger_changes(
    changes: Sequence[ConfigChange], loggers: Iterable[str]
) -> dict[str, int | None]:
    """What to do to which logger: a level, or None to remove the logger's own level (it then
    follows its parent's). Raises ConfigRequestError, Kafka's code and message, for the first
    change that may not be made; nothing is to be applied then."""
    existing = set(loggers)
    plan: dict[str, int | None] = {}
    for change in changes:
        name = change.name
        if change.op in (APPEND, SUBTRACT):
            raise ConfigRequestError(
                ErrorCode.INVALID_REQUEST,
                f"{AlterOp(change.op).name} operation is not allowed for the BROKER_LOGGER "
                "resource",
            )
        if change.op not in (SET, DELETE):
            raise ConfigRequestError(
                ErrorCode.INVALID_REQUEST,
                f"Unknown operation type {change.op} is not allowed for the "
                "BROKER_LOGGER resource",
            )
        if name != ROOT_LOGGER and name not in existing:
            raise ConfigRequestError(ErrorCode.INVALID_CONFIG, f"Logger {name} does not exist!")
        if change.op == DELETE:
            if name == ROOT_LOGGER:
                raise ConfigRequestError(
                    ErrorCode.INVALID_REQUEST,
                    "Removing the log level of the root logger is not allowed",
                )
            plan[name] = None
            continue
        level = LEVELS.get((change.value or "").upper()) if change.value else None
        if level is None:
            raise ConfigRequestError(
                ErrorCode.INVALID_CONFIG,
                f"Cannot set the log level of {name} to {change.value} as it is not a "
                f"supported log level. Valid log levels are {VALID_LEVELS}",
            )
        plan[name] = level
    return plan


def check_logger_resource(name: str, broker_id: int) -> None:
    """A BROKER_LOGGER resource names the broker it is sent to, as in Kafka."""
    if not name:
        raise ConfigRequestError(ErrorCode.INVALID_REQUEST, "Broker id must not be empty")
    if name.strip() != str(broker_id):
        raise ConfigRequestError(
            ErrorCode.INVALID_REQUEST,
            f"Unexpected broker id, expected {broker_id} but received {name}",
        )


def current_levels() -> dict[str, int]:
    """This process's loggers (those created so far) and the root, with effective levels."""
    manager = logging.Logger.manager
    levels = {ROOT_LOGGER: logging.getLogger().getEffectiveLevel()}
    for name, logger in list(manager.loggerDict.items()):
        if isinstance(logger, logging.Logger):
            levels[name] = logger.getEffectiveLevel()
    return levels


def apply_logger_plan(plan: Mapping[str, int | None]) -> None:
    for name, level in plan.items():
        logger = logging.getLogger() if name == ROOT_LOGGER else logging.getLogger(name)
        logger.setLevel(logging.NOTSET if level is None else level)
