"""What the controller learns from a broker's LeaderAndIsr answer, decided without I/O.

Kafka's ZooKeeper controller reads each LeaderAndIsr response: a partition answered with
KAFKA_STORAGE_ERROR is a replica its broker cannot serve (a damaged log, a log dir offline), and
the controller takes it offline (onReplicasBecomeOffline: no leadership, out of the ISR); a later
answer without error for it brings it back. `read_answer` turns a response into a
`LeaderAndIsrAnswer`; `record_answer` applies it to `ControllerContext.offline_replicas` and says
which replicas changed state, for `decisions.on_replicas_offline` / `on_replicas_online`.

A whole request that failed (UNKNOWN_SERVER_ERROR and the like: the broker applied nothing, or
did not say what) is resent with a growing backoff, rebuilt from the context as it is then
(`retry_delay_ms`). Never one refused as STALE_BROKER_EPOCH (KIP-380: it was meant for an earlier
generation of the broker, whose new one gets a full LeaderAndIsr at startup) or
STALE_CONTROLLER_EPOCH (this controller is deposed), and never to a broker that has gone or
bounced since: the caller checks the destination's epoch.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from epochlog.controller.context import ControllerContext, TopicPartition
from epochlog.protocol.errors import ErrorCode

RETRY_BACKOFF_MS = 100
RETRY_BACKOFF_MAX_MS = 5000
NEVER_RETRIED = frozenset({ErrorCode.STALE_BROKER_EPOCH, ErrorCode.STALE_CONTROLLER_EPOCH})


@dataclass(frozen=True)
class LeaderAndIsrAnswer:
    error: ErrorCode  # the top-level error
    offline: frozenset[TopicPartition] = field(default_factory=frozenset)  # STORAGE_ERROR
    served: frozenset[TopicPartition] = field(default_factory=frozenset)  # no error

    @property
    def retry(self) -> bool:
        """The whole request failed and may be resent."""
        return self.error is not ErrorCode.NONE and self.error not in NEVER_RETRIED


def read_answer(response: Any, topic_names: Mapping[uuid.UUID, str]) -> LeaderAndIsrAnswer | None:
    """The answer in a LeaderAndIsr response (any version), or None when there was none (the
    broker went away, or a test's fault rule dropped the request). Partitions of topics the
    controller no longer knows (v5+ names them by id) are left out."""
    if response is None:
        return None
    error = ErrorCode.of(response.error_code)
    if error is not ErrorCode.NONE:
        return LeaderAndIsrAnswer(error)
    offline: set[TopicPartition] = set()
    served: set[TopicPartition] = set()

    def note(tp: TopicPartition, code: int) -> None:
        if code == ErrorCode.KAFKA_STORAGE_ERROR:
            offline.add(tp)
        elif code == ErrorCode.NONE:
            served.add(tp)

    for entry in response.partition_errors:  # v2-4
        note((entry.topic_name, entry.partition_index), entry.error_code)
    for topic in response.topics:  # v5+
        name = topic_names.get(topic.topic_id)
        if name is None:
            continue
        for entry in topic.partition_errors:
            note((name, entry.partition_index), entry.error_code)
    return LeaderAndIsrAnswer(error, frozenset(offline), frozenset(served))


def record_answer(
    ctx: ControllerContext, broker: int, answer: LeaderAndIsrAnswer
) -> tuple[set[TopicPartition], set[TopicPartition]]:
    """Apply an answer of `broker` to `ctx.offline_replicas`; returns (replicas newly offline,
    replicas back online). A replica already offline that fails again changes nothing, so an
    offline log dir answering every resend with KAFKA_STORAGE_ERROR causes no new elections."""
    offline = ctx.offline_replicas.get(broker, set())
    newly = {tp for tp in answer.offline if tp not in offline and tp in ctx.assignments}
    back = {tp for tp in answer.served if tp in offline}
    updated = (offline | newly) - back
    if updated:
        ctx.offline_replicas[broker] = updated
    else:
        ctx.offline_replicas.pop(broker, None)
    return newly, back


def retry_delay_ms(attempt: int) -> int:
    """Backoff before resend number `attempt` (1, 2, ...): 100 ms doubling up to 5 s."""
    return min(RETRY_BACKOFF_MS * 2 ** max(attempt - 1, 0), RETRY_BACKOFF_MAX_MS)


def partitions_of_request(body: Any) -> list[TopicPartition]:
    """The partitions a LeaderAndIsr request named (to rebuild it for a resend)."""
    return [
        (topic.topic_name, state.partition_index)
        for topic in body.topic_states
        for state in topic.partition_states
    ]
