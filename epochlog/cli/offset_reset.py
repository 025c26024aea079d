"""What `epochlog groups reset-offsets` would commit, decided without I/O.

Kafka's `kafka-consumer-groups --reset-offsets` semantics (ConsumerGroupCommand, Kafka 3.9):

| how           | new offset                                                           |
|---------------|----------------------------------------------------------------------|
| --to-earliest | the partition's log start offset                                     |
| --to-latest   | its log end offset                                                   |
| --to-offset N | N, clamped to [log start, log end]                                   |
| --shift-by N  | the committed offset + N, clamped; an error without a committed one  |
| --to-datetime | the first offset at or after the time (ListOffsets by timestamp);   |
|               | the log end when no record is that recent                            |

A clamp or a fallback is kept as a note on the partition (Kafka prints it as a warning). The
command gathers the inputs (committed offsets, log start and end, offsets by timestamp), calls
`plan_reset`, prints the plan, and commits it only with `--execute`; whether the group may be
reset at all (only when Empty or Dead) is `check_group_resettable`.

Also here: parsing `--topic T` / `--topic T:0,2` and `--to-datetime`'s ISO 8601 text.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

TopicPartitionKey = tuple[str, int]  # epochlog.client's TopicPartition is one of these


class ResetError(ValueError):
    """A reset that cannot be planned; the message names the group, topic or partition."""


class ResetHow(enum.Enum):
    TO_EARLIEST = "to-earliest"
    TO_LATEST = "to-latest"
    TO_OFFSET = "to-offset"
    SHIFT_BY = "shift-by"
    TO_DATETIME = "to-datetime"


@dataclass(frozen=True)
class ResetSpec:
    how: ResetHow
    value: int = 0  # the offset, the shift, or the time in ms since the epoch

    def __str__(self) -> str:
        if self.how in (ResetHow.TO_EARLIEST, ResetHow.TO_LATEST):
            return f"--{self.how.value}"
        return f"--{self.how.value} {self.value}"


@dataclass(frozen=True)
class PartitionReset:
    topic: str
    partition: int
    current: int | None  # the committed offset, None if there is none
    new: int
    note: str = ""  # why `new` is not what was asked for (clamped, fell back to the end)


@dataclass(frozen=True)
class LogRange:
    start: int
    end: int


def clamp_offset(offset: int, log: LogRange) -> tuple[int, str]:
    """`offset` moved into [log start, log end], with a note when it was moved."""
    if offset < log.start:
        return log.start, f"{offset} is below the log start offset; set to {log.start}"
    if offset > log.end:
        return log.end, f"{offset} is above the log end offset; set to {log.end}"
    return offset, ""


def plan_reset(
    group: str,
    spec: ResetSpec,
    partitions: Iterable[TopicPartitionKey],
    committed: Mapping[TopicPartitionKey, int | None],
    logs: Mapping[TopicPartitionKey, LogRange],
    offsets_at_time: Mapping[TopicPartitionKey, int] | None = None,
) -> list[PartitionReset]:
    """The new offset of each partition, sorted by topic and partition (table above).
    `offsets_at_time` is ListOffsets' answer for `spec`'s time (-1: no record that recent)."""
    plan = []
    for tp in sorted(set(partitions)):
        topic, partition = tp
        log = logs.get(tp)
        if log is None:
            raise ResetError(f"group {group!r}: no log offsets for {topic}-{partition}")
        current = committed.get(tp)
        note = ""
        if spec.how is ResetHow.TO_EARLIEST:
            new = log.start
        elif spec.how is ResetHow.TO_LATEST:
            new = log.end
        elif spec.how is ResetHow.TO_OFFSET:
            new, note = clamp_offset(spec.value, log)
        elif spec.how is ResetHow.SHIFT_BY:
            if current is None:
                raise ResetError(
                    f"group {group!r}: cannot shift {topic}-{partition}: it has no committed offset"
                )
            new, note = clamp_offset(current + spec.value, log)
        else:
            found = (offsets_at_time or {}).get(tp)
            if found is None:
                raise ResetError(f"group {group!r}: no offset by time for {topic}-{partition}")
            if found < 0:
                new, note = log.end, "no record at or after that time; set to the log end offset"
            else:
                new = found
        plan.append(PartitionReset(topic, partition, current, new, note))
    return plan


def check_group_resettable(group: str, state: str, members: int) -> None:
    """Kafka resets only an inactive group: Empty, or Dead (it does not exist yet)."""
    if state not in ("Empty", "Dead"):
        raise ResetError(
            f"group {group!r} is {state} with {members} member(s): offsets can only be reset "
            "while the group is inactive (Empty or Dead); stop its consumers first"
        )


def parse_topic_partitions(text: str) -> tuple[str, list[int] | None]:
    """`T` (every partition) or `T:0,2` -> (topic, partitions or None)."""
    topic, sep, rest = text.rpartition(":")
    if not sep:
        topic, rest = text, ""
    if not topic:
        raise ResetError(f"--topic {text!r}: no topic name")
    if not sep:
        return topic, None
    try:
        partitions = sorted({int(p) for p in rest.split(",") if p.strip()})
    except ValueError:
        raise ResetError(f"--topic {text!r}: partitions must be numbers, as in T:0,1,2") from None
    if not partitions or partitions[0] < 0:
        raise ResetError(f"--topic {text!r}: partitions must be numbers >= 0, as in T:0,1,2")
    return topic, partitions


def parse_datetime_ms(text: str) -> int:
    """ISO 8601 (`2024-05-01T12:00:00`, `...T12:00:00.000+02:00`, `...Z`) to ms since the epoch;
    without a zone the local time, as kafka-consumer-groups reads it."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ResetError(
            f"--to-datetime {text!r} is not ISO 8601 (like 2024-05-01T12:00:00 or "
            "2024-05-01T12:00:00.000+02:00)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.astimezone()  # local time
    return int(moment.timestamp() * 1000)
