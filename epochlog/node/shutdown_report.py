"""What a broker's controlled shutdown left behind, as one line of its output.

A broker whose controlled shutdown could not move every leadership away (the controller kept
answering with partitions, or never answered, through controlled.shutdown.max.retries retries)
logs `CONTROLLED_SHUTDOWN_INCOMPLETE` followed by JSON: broker, attempts, controller_answered,
error (the last answer's error code name), remaining_partitions ("topic-partition" names).
`epochlog broker stop` reads the broker's output written since it sent SIGTERM
(`incomplete_shutdown_in`) and reports those partitions, with a non-zero exit, instead of
success: they go offline with the broker unless another replica is in their ISR.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

CONTROLLED_SHUTDOWN_INCOMPLETE = "controlled shutdown incomplete:"


@dataclass(frozen=True)
class IncompleteShutdown:
    broker_id: int
    attempts: int
    controller_answered: bool
    remaining_partitions: tuple[str, ...]
    error: str = "NONE"


def report_line(
    broker_id: int,
    attempts: int,
    controller_answered: bool,
    remaining: list[str],
    error: str = "NONE",
) -> str:
    return CONTROLLED_SHUTDOWN_INCOMPLETE + " " + json.dumps(
        {
            "broker": broker_id,
            "attempts": attempts,
            "controller_answered": controller_answered,
            "error": error,
            "remaining_partitions": remaining,
        }
    )


def incomplete_shutdown_in(output: str) -> IncompleteShutdown | None:
    """The last incomplete-shutdown report in a broker's output, or None."""
    found: IncompleteShutdown | None = None
    for line in output.splitlines():
        at = line.find(CONTROLLED_SHUTDOWN_INCOMPLETE)
        if at < 0:
            continue
        try:
            data = json.loads(line[at + len(CONTROLLED_SHUTDOWN_INCOMPLETE) :])
            found = IncompleteShutdown(
                broker_id=int(data["broker"]),
                attempts=int(data["attempts"]),
                controller_answered=bool(data["controller_answered"]),
                remaining_partitions=tuple(str(p) for p in data["remaining_partitions"]),
                error=str(data.get("error", "NONE")),
            )
        except (ValueError, KeyError, TypeError):
            continue  # a torn line (the broker was killed while writing it)
    return found
