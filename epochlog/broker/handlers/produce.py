"""Produce (v3-11), the produce path's request end: from the decoded body to its answer.

`begin_produce` is the Produce handler. It appends every partition's batch now, in request
order (`appends.start_append_records`: validation by the batch's header, CRC-32C and one walk of
its records, offsets assigned in place, the append), and returns a Future of the response body:
resolved at once, or with acks=all once the records are replicated. The server takes the
connection's next request while it waits. The body is built by the same step that completes the
append (`respond`), not by a callback chained on it, so an answer costs no extra loop turn.

acks=0 gets no response at all; if any partition failed the connection is closed instead, so
the producer notices (Kafka's `handleProduceRequest`). From v8 a failed partition carries an
ErrorMessage naming the partition and what was wrong, and a batch refused for one record's
fault also RecordErrors (that record's index in the batch, and the message); from v10 a
NOT_LEADER_OR_FOLLOWER partition also names the leader this broker knows (CurrentLeader) with
that leader's endpoint in NodeEndpoints (KIP-951), so the client can redirect without a
Metadata round trip.

KIP-890 part 1 (`transaction.partition.verification.enable`, dynamic): a transactional batch
for a partition where its producer has no open transaction is appended only once the
coordinator confirms the partition is in the producer's transaction (`txn_verification`).
The question goes out at once, also while the connection's earlier produce still waits for its
own; the append then waits for the earlier produce's append (`AppendOrder`), so appends stay in
request order, but not for its replication: librdkafka's pipelined produces of a transaction, one
a partition, were each held a replication round behind the one before (3-4 ms apiece at RF 3).
"""

from __future__ import annotations

import asyncio
from typing import Any

from epochlog.broker.appends import ProducePartitionResult, start_append_records
from epochlog.broker.handlers.context import BrokerServices, CloseConnection, ConnectionInfo
from epochlog.broker.produce_validation import has_transactional_batch, request_error
from epochlog.broker.txn_verification import (
    TopicPartition,
    VerificationPlan,
    plan_verification,
    produce_error,
)
from epochlog.protocol import messages as m
from epochlog.protocol.api import Request
from epochlog.protocol.errors import CorruptRecordError, ErrorCode
from epochlog.protocol.produce_answer import ProduceAnswer
from epochlog.protocol.records import BatchHeader, parse_batch_header

R = m.ProduceResponse
_REDIRECT = (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH)


def begin_produce(
    services: BrokerServices, request: Request, connection: ConnectionInfo
) -> asyncio.Future[Any]:
    """Append now, in request order; the future gets the response body (None for acks=0) or
    CloseConnection, at once or, with acks=all, once the records are replicated."""
    body = request.body
    version = request.api_version
    entries = [((t.name, p.index), p.records) for t in body.topic_data for p in t.partition_data]
    transactional_id = body.transactional_id
    # Transactional batches matter here only without a transactional id (they are refused).
    problem = request_error(
        body.acks,
        transactional_id,
        transactional_id is None and has_transactional_batch(r for _, r in entries),
    )
    if problem is not None:
        response: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if body.acks == 0:
            response.set_exception(CloseConnection(f"acks=0 produce refused: {problem}"))
            return response
        results = {
            key: ProducePartitionResult(problem.error_code, str(problem)) for key, _ in entries
        }
        response.set_result(_answer(services, body, results, version, connection.listener))
        return response

    def respond(results: dict[TopicPartition, ProducePartitionResult]) -> Any:
        return _answer(services, body, results, version, connection.listener)

    order = connection.appends
    earlier = order.pending
    plan = (
        _verification_plan(services, transactional_id, entries)
        if transactional_id
        else _NO_VERIFICATION
    )
    if (earlier is None or earlier.done()) and not plan.partitions and not plan.refused:
        return start_append_records(
            services.replica_manager,
            timeout_ms=body.timeout_ms,
            required_acks=body.acks,
            entries=entries,
            version=version,
            respond=respond,
        )
    # Later produces of the connection wait for this one's append, not its replication.
    loop = asyncio.get_running_loop()
    appended_here: asyncio.Future[None] = loop.create_future()
    order.pending = appended_here
    appended = asyncio.ensure_future(
        _verify_then_append(services, body, entries, version, plan, earlier, appended_here)
    )
    response = loop.create_future()

    def answer(done: asyncio.Future[dict[TopicPartition, ProducePartitionResult]]) -> None:
        if response.done():
            return
        try:
            response.set_result(respond(done.result()))
        except Exception as exc:  # CloseConnection, or a bug reported to the server
            response.set_exception(exc)

    appended.add_done_callback(answer)
    return response


_NO_VERIFICATION = VerificationPlan()


def _verification_plan(
    services: BrokerServices,
    transactional_id: str | None,
    entries: list[tuple[TopicPartition, Any]],
) -> VerificationPlan:
    if (
        not transactional_id
        or services.txn_verifier is None
        or not services.config["transaction.partition.verification.enable"]
    ):
        return VerificationPlan()
    rm = services.replica_manager

    def has_open_transaction(tp: TopicPartition, producer_id: int) -> bool | None:
        partition = rm.get_partition(*tp)
        if partition is None or not partition.is_leader:
            return None
        return partition.producer_state.has_open_transaction(producer_id)

    return plan_verification(
        ((tp, _first_header(records)) for tp, records in entries), has_open_transaction
    )


def _first_header(records: Any) -> BatchHeader | None:
    try:
        return parse_batch_header(records, 0) if records else None
    except (CorruptRecordError, ValueError):
        return None  # validation on the append path names what is wrong


async def _verify_then_append(
    services: BrokerServices,
    body: Any,
    entries: list[tuple[TopicPartition, Any]],
    version: int,
    plan: VerificationPlan,
    earlier: asyncio.Future[Any] | None,
    appended_here: asyncio.Future[None],
) -> dict[TopicPartition, ProducePartitionResult]:
    """Ask the coordinator about the plan's partitions (while the connection's earlier produces
    still wait for theirs), then append what it confirmed once the earlier produce has
    appended; `appended_here` is set once this one has (the next produce waits for that, not
    for the replication of this one, which the result waits for)."""
    try:
        rm = services.replica_manager
        results = {
            tp: ProducePartitionResult(error, message)
            for tp, (error, message) in plan.refused.items()
        }
        verdicts: dict[TopicPartition, int] = {}
        guards = {}
        if plan.partitions:
            for tp in plan.partitions:
                partition = rm.get_partition(*tp)
                if partition is not None:
                    guards[tp] = partition.producer_state.start_verification(plan.producer_id)
            assert services.txn_verifier is not None
            verdicts = await services.txn_verifier.verify(
                body.transactional_id, plan.producer_id, plan.producer_epoch, plan.partitions
            )
        if earlier is not None and not earlier.done():
            await asyncio.wait([earlier])
        for tp in plan.partitions:
            where = f"{tp[0]}-{tp[1]}"
            error = ErrorCode(verdicts.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR))
            partition = rm.get_partition(*tp)
            if error is ErrorCode.NONE and (
                partition is None
                or tp not in guards
                or not partition.producer_state.verification_holds(plan.producer_id, guards[tp])
            ):
                # a marker ended the transaction while we asked: the write would open a new one
                error = ErrorCode.INVALID_TXN_STATE
            if error is not ErrorCode.NONE:
                results[tp] = ProducePartitionResult(*produce_error(error, where))
        # the rest appended in one step of the loop: no marker can slip in after the checks above
        replicated = start_append_records(
            rm,
            timeout_ms=body.timeout_ms,
            required_acks=body.acks,
            entries=[(tp, records) for tp, records in entries if tp not in results],
            version=version,
        )
    finally:
        if not appended_here.done():
            appended_here.set_result(None)
    results.update(await replicated)
    return results


def _answer(
    services: BrokerServices,
    body: Any,
    results: dict[tuple[str, int], ProducePartitionResult],
    version: int,
    listener: str,
) -> Any:
    if body.acks == 0:
        failed = [(key, r) for key, r in results.items() if r.error is not ErrorCode.NONE]
        if failed:
            (topic, index), result = failed[0]
            raise CloseConnection(
                f"acks=0 produce to {topic}-{index} failed with {result.error.name}: "
                f"{result.message}"
            )
        return None
    return _response(services, body, results, version, listener)


def _response(
    services: BrokerServices,
    body: Any,
    results: dict[tuple[str, int], ProducePartitionResult],
    version: int,
    listener: str,
) -> Any:
    none = ErrorCode.NONE
    if all(result.error is none for result in results.values()):
        # The common answer: offsets only, encoded by fixed layouts (`ProduceAnswer`).
        return ProduceAnswer(
            [
                (
                    topic.name,
                    [
                        (
                            p.index,
                            (r := results[(topic.name, p.index)]).base_offset,
                            r.log_append_time,
                            r.log_start_offset,
                        )
                        for p in topic.partition_data
                    ],
                )
                for topic in body.topic_data
            ]
        )
    cache = services.metadata_cache
    leaders: set[int] = set()
    topics = []
    for topic in body.topic_data:
        partitions = []
        for p in topic.partition_data:
            result = results[(topic.name, p.index)]
            entry = R.PartitionProduceResponse(
                index=p.index,
                error_code=result.error,
                base_offset=result.base_offset,
                log_append_time_ms=result.log_append_time,
                log_start_offset=result.log_start_offset,
                error_message=result.message if result.error is not ErrorCode.NONE else None,
                record_errors=[
                    R.BatchIndexAndErrorMessage(
                        batch_index=batch_index, batch_index_error_message=message
                    )
                    for batch_index, message in result.record_errors
                ],
            )
            if version >= 10 and result.error in _REDIRECT:
                info = cache.partition(topic.name, p.index)
                if info is not None and info.leader >= 0:
                    entry.current_leader = R.LeaderIdAndEpoch(
                        leader_id=info.leader, leader_epoch=info.leader_epoch
                    )
                    leaders.add(info.leader)
            partitions.append(entry)
        topics.append(R.TopicProduceResponse(name=topic.name, partition_responses=partitions))
    response = R(responses=topics)
    for broker_id in sorted(leaders):
        broker = cache.broker(broker_id)
        endpoint = broker.endpoint_for(listener) if broker is not None else None
        if broker is not None and endpoint is not None:
            response.node_endpoints.append(
                R.NodeEndpoint(
                    node_id=broker_id, host=endpoint.host, port=endpoint.port, rack=broker.rack
                )
            )
    return response
