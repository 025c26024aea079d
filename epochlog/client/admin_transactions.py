"""The admin client's transaction operations (KIP-664: finding hanging transactions). Mixed
into `AsyncAdmin`.

- `describe_transactions(ids)`: FindCoordinator (key type 1, transaction) for each id, then
  DescribeTransactions to each coordinator, ids batched per coordinator. NOT_COORDINATOR,
  COORDINATOR_NOT_AVAILABLE and COORDINATOR_LOAD_IN_PROGRESS look the coordinator up again
  until the call's timeout; any other error (TRANSACTIONAL_ID_NOT_FOUND, ...) raises
  `KafkaError` naming the id.
- `list_transactions(states=, producer_ids=, duration_ms=)`: ListTransactions (v1 when a
  duration is given: KIP-994) to every broker, the answers merged (each coordinator lists the
  ids it owns); a broker's error raises.
- `abort_transaction(topic, partition, producer_id, producer_epoch, coordinator_epoch)`: a
  WriteTxnMarkers ABORT to the partition's leader, as Kafka's `Admin.abortTransaction`: for a
  hanging transaction the coordinator no longer knows, so only the leader can close it.
- `describe_producers` lives with the log-dir operations (`admin_log_dirs`).

Requests are built and answers read by the plain functions below (no I/O); the methods send.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from epochlog.client.admin_base import AdminBase
from epochlog.client.errors import ClientError, KafkaError
from epochlog.client.metadata import TopicPartition
from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey
from epochlog.protocol.errors import ErrorCode

TRANSACTION_KEY_TYPE = 1
FIRST_BATCHED_FIND_COORDINATOR = 4  # KIP-699
FIRST_DURATION_FILTER_LIST_TRANSACTIONS = 1  # KIP-994
MARKER_VERSION = 1
_LOOK_AGAIN = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    }
)


@dataclass(frozen=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str
    coordinator_id: int


@dataclass(frozen=True)
class TransactionDescription:
    transactional_id: str
    coordinator_id: int
    state: str
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_start_time_ms: int  # -1 when no transaction is ongoing
    partitions: tuple[TopicPartition, ...]


# ------------------------------------------------------------------- requests and answers


def find_transaction_coordinator_requests(ids: list[str], version: int) -> list[Any]:
    R = m.FindCoordinatorRequest
    if version >= FIRST_BATCHED_FIND_COORDINATOR:
        return [R(key_type=TRANSACTION_KEY_TYPE, coordinator_keys=list(ids))]
    return [R(key=i, key_type=TRANSACTION_KEY_TYPE) for i in ids]


def read_transaction_coordinators(
    ids: list[str], responses: list[Any], version: int
) -> dict[str, tuple[ErrorCode, int, str | None]]:
    """Per id: (error, coordinator node id, message)."""
    if version >= FIRST_BATCHED_FIND_COORDINATOR:
        (response,) = responses
        return {
            c.key: (ErrorCode.of(c.error_code), c.node_id, c.error_message)
            for c in response.coordinators
            if c.key in ids
        }
    return {
        i: (ErrorCode.of(r.error_code), r.node_id, r.error_message if version >= 1 else None)
        for i, r in zip(ids, responses, strict=True)
    }


def read_describe_transactions(
    response: Any, coordinator_id: int
) -> dict[str, TransactionDescription | ErrorCode]:
    out: dict[str, TransactionDescription | ErrorCode] = {}
    for s in response.transaction_states:
        code = ErrorCode.of(s.error_code)
        if code is not ErrorCode.NONE:
            out[s.transactional_id] = code
            continue
        out[s.transactional_id] = TransactionDescription(
            s.transactional_id,
            coordinator_id,
            s.transaction_state,
            s.producer_id,
            s.producer_epoch,
            s.transaction_timeout_ms,
            s.transaction_start_time_ms,
            tuple(
                TopicPartition(t.topic, p)
                for t in sorted(s.topics, key=lambda t: t.topic)
                for p in sorted(t.partitions)
            ),
        )
    return out


def list_transactions_request(
    states: Iterable[str], producer_ids: Iterable[int], duration_ms: int
) -> tuple[Any, int]:
    """The request and the lowest version that carries it."""
    version = FIRST_DURATION_FILTER_LIST_TRANSACTIONS if duration_ms >= 0 else 0
    request = m.ListTransactionsRequest(
        state_filters=list(states),
        producer_id_filters=list(producer_ids),
        duration_filter=duration_ms,
    )
    return request, version


def read_list_transactions(response: Any, broker_id: int) -> list[TransactionListing]:
    code = ErrorCode.of(response.error_code)
    if code is not ErrorCode.NONE:
        raise KafkaError(code, f"ListTransactions at broker {broker_id}")
    return [
        TransactionListing(s.transactional_id, s.producer_id, s.transaction_state, broker_id)
        for s in response.transaction_states
    ]


def abort_marker_request(
    topic: str, partition: int, producer_id: int, producer_epoch: int, coordinator_epoch: int
) -> Any:
    R = m.WriteTxnMarkersRequest
    return R(
        markers=[
            R.WritableTxnMarker(
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                transaction_result=False,  # ABORT
                topics=[R.WritableTxnMarkerTopic(name=topic, partition_indexes=[partition])],
                coordinator_epoch=coordinator_epoch,
            )
        ]
    )


def read_abort_marker(response: Any, topic: str, partition: int, producer_id: int) -> ErrorCode:
    for marker in response.markers:
        if marker.producer_id != producer_id:
            continue
        for t in marker.topics:
            for p in t.partitions:
                if t.name == topic and p.partition_index == partition:
                    return ErrorCode.of(p.error_code)
    return ErrorCode.UNKNOWN_SERVER_ERROR


# ------------------------------------------------------------------------------ the mixin


class TransactionAdminOperations(AdminBase):
    """`AsyncAdmin`'s transaction operations (see the module docstring)."""

    async def describe_transactions(
        self, transactional_ids: Iterable[str], *, timeout: float | None = None
    ) -> dict[str, TransactionDescription]:
        """Each id's transaction as its coordinator holds it."""
        await self.start()
        deadline = self._net.now_ms() + self._timeout_ms(timeout)
        todo = sorted(set(transactional_ids))
        found: dict[str, TransactionDescription] = {}
        last: dict[str, str] = {}
        while todo:
            remaining = deadline - self._net.now_ms()
            if remaining <= 0:
                raise KafkaError(
                    ErrorCode.REQUEST_TIMED_OUT,
                    f"DescribeTransactions for {', '.join(map(repr, todo))}",
                    "; ".join(f"{i}: {e}" for i, e in sorted(last.items())) or None,
                )
            retry: list[str] = []
            by_node: dict[int, list[str]] = {}
            for tid, (code, node, message) in (await self._coordinators(todo, remaining)).items():
                if code is ErrorCode.NONE:
                    by_node.setdefault(node, []).append(tid)
                elif code in _LOOK_AGAIN:
                    retry.append(tid)
                    last[tid] = f"FindCoordinator: {code.name}"
                else:
                    raise KafkaError(code, f"FindCoordinator for transactional id {tid!r}", message)
            for node, ids in by_node.items():
                try:
                    response = await self._net.send(
                        node,
                        m.DescribeTransactionsRequest(transactional_ids=ids),
                        api_key=ApiKey.DESCRIBE_TRANSACTIONS,
                    )
                except ClientError as exc:
                    if not exc.retriable:
                        raise
                    retry += ids
                    for tid in ids:
                        last[tid] = str(exc)
                    continue
                answers = read_describe_transactions(response, node)
                for tid in ids:
                    answer = answers.get(tid, ErrorCode.UNKNOWN_SERVER_ERROR)
                    if isinstance(answer, TransactionDescription):
                        found[tid] = answer
                    elif answer in _LOOK_AGAIN:
                        retry.append(tid)
                        last[tid] = f"DescribeTransactions: {answer.name}"
                    else:
                        raise KafkaError(answer, f"DescribeTransactions for {tid!r}")
            todo = sorted(set(retry) - set(found))
            if todo:
                self._net.request_update()
                await asyncio.sleep(self._retry_backoff_ms / 1000)
        return found

    async def list_transactions(
        self,
        *,
        states: Iterable[str] = (),
        producer_ids: Iterable[int] = (),
        duration_ms: int = -1,
        timeout: float | None = None,
    ) -> list[TransactionListing]:
        """Every transaction the coordinators know, filtered by state names (Kafka's, e.g.
        Ongoing), producer ids and (KIP-994) running longer than `duration_ms`; by id."""
        await self.start()
        timeout_ms = self._timeout_ms(timeout)
        request, version = list_transactions_request(states, producer_ids, duration_ms)
        cluster = await self._net.update_metadata(timeout_ms)
        listings: list[TransactionListing] = []
        for broker in sorted(cluster.brokers):
            conn = await self._net.ready(broker)
            if conn.version_for(ApiKey.LIST_TRANSACTIONS) < version:
                raise KafkaError(
                    ErrorCode.UNSUPPORTED_VERSION,
                    f"ListTransactions with a duration filter at broker {broker}",
                    "the broker serves no ListTransactions v1 (KIP-994)",
                )
            response = await conn.send(request, api_key=ApiKey.LIST_TRANSACTIONS)
            listings += read_list_transactions(response, broker)
        return sorted(listings, key=lambda t: (t.transactional_id, t.coordinator_id))

    async def abort_transaction(
        self,
        topic: str,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        *,
        timeout: float | None = None,
    ) -> None:
        """Write an ABORT marker for the producer's open transaction on the partition (its
        leader's error, e.g. INVALID_PRODUCER_EPOCH or TRANSACTION_COORDINATOR_FENCED, raises)."""
        await self.start()
        timeout_ms = self._timeout_ms(timeout)
        tp = TopicPartition(topic, partition)
        cluster = await self._net.update_metadata(timeout_ms)
        info = cluster.topic(topic)
        leader_info = info.partitions.get(partition) if info is not None else None
        if leader_info is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"abort transaction on {tp}")
        if leader_info.leader < 0:
            raise KafkaError(ErrorCode.LEADER_NOT_AVAILABLE, f"abort transaction on {tp}")
        response = await self._net.send(
            leader_info.leader,
            abort_marker_request(topic, partition, producer_id, producer_epoch, coordinator_epoch),
            api_key=ApiKey.WRITE_TXN_MARKERS,
            version=MARKER_VERSION,
        )
        code = read_abort_marker(response, topic, partition, producer_id)
        if code is not ErrorCode.NONE:
            raise KafkaError(
                code,
                f"abort transaction of producer {producer_id} epoch {producer_epoch} on {tp}",
            )

    async def _coordinators(
        self, ids: list[str], timeout_ms: float
    ) -> dict[str, tuple[ErrorCode, int, str | None]]:
        try:
            conn = await self._net.least_loaded_connection(timeout_ms)
            version = conn.version_for(ApiKey.FIND_COORDINATOR)
            responses = await asyncio.gather(
                *(
                    conn.send(request, api_key=ApiKey.FIND_COORDINATOR, version=version)
                    for request in find_transaction_coordinator_requests(ids, version)
                )
            )
        except ClientError as exc:
            if not exc.retriable:
                raise
            return {i: (ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, str(exc)) for i in ids}
        answers = read_transaction_coordinators(ids, responses, version)
        return {
            i: answers.get(i, (ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "no answer")) for i in ids
        }
