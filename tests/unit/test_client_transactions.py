"""The transactional producer's state machine (`client/transaction_manager.py`), driven directly:
the user's calls, the requests it asks the sender for, and Kafka's error rules on the answers."""

from __future__ import annotations

import pytest

from epochlog.client.errors import KafkaError
from epochlog.client.group_offsets import ConsumerGroupMetadata, OffsetAndMetadata
from epochlog.client.metadata import TopicPartition
from epochlog.client.producer_batch import ProducerBatch
from epochlog.client.transaction_manager import (
    VALID_PREVIOUS_STATES,
    AddOffsetsCall,
    AddPartitionsCall,
    EndTxnCall,
    InitProducerIdCall,
    Next,
    Target,
    TransactionAbortedError,
    TransactionManager,
    TransactionStateError,
    TxnOffsetCommitCall,
    TxnResult,
    TxnState,
)
from epochlog.protocol.compression import Compression
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.records import decode_batch

A, B, C = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)
GROUP = ConsumerGroupMetadata("g", generation_id=3, member_id="m-1")
OK = TxnResult()


def ready_manager() -> TransactionManager:
    txn = TransactionManager("tx-1", 60000)
    op = txn.initialize()
    call = txn.next_call(False)
    assert isinstance(call, InitProducerIdCall) and call.producer_id == -1
    assert txn.on_response(call, TxnResult(producer_id=7, producer_epoch=2)) is Next.CONTINUE
    assert op.done and op.error is None
    return txn


def in_transaction(*partitions: TopicPartition) -> TransactionManager:
    txn = ready_manager()
    txn.begin()
    for tp in partitions:
        txn.add_partition(tp)
    if partitions:
        call = txn.next_call(False)
        assert isinstance(call, AddPartitionsCall)
        txn.on_response(call, TxnResult(partition_errors={tp: ErrorCode.NONE for tp in partitions}))
    return txn


def a_batch(tp: TopicPartition = A, records: int = 2) -> ProducerBatch:
    batch = ProducerBatch(tp, Compression.NONE, 0.0)
    for i in range(records):
        batch.append(1000 + i, None, b"v%d" % i, [], object())
    return batch


def test_every_state_is_in_the_table_and_fatal_is_reachable_from_all() -> None:
    assert set(VALID_PREVIOUS_STATES) == set(TxnState)
    assert VALID_PREVIOUS_STATES[TxnState.FATAL_ERROR] == frozenset(TxnState)
    assert VALID_PREVIOUS_STATES[TxnState.IN_TRANSACTION] == {TxnState.READY}


def test_init_transactions_gets_producer_id_and_epoch_then_ready() -> None:
    txn = ready_manager()
    assert (txn.state, txn.producer_id, txn.producer_epoch) == (TxnState.READY, 7, 2)
    assert txn.next_call(False) is None


@pytest.mark.parametrize(
    ("call_name", "state", "needs"),
    [
        ("begin", TxnState.UNINITIALIZED, "READY"),
        ("commit", TxnState.READY, "IN_TRANSACTION"),
        ("abort", TxnState.READY, "IN_TRANSACTION or ABORTABLE_ERROR"),
    ],
)
def test_a_call_the_state_does_not_allow_names_the_state(
    call_name: str, state: TxnState, needs: str
) -> None:
    txn = TransactionManager("tx-1", 60000)
    if state is TxnState.READY:
        txn = ready_manager()
    with pytest.raises(TransactionStateError, match=f"in state {state.value}; it needs {needs}"):
        getattr(txn, call_name)()
    assert txn.state is state  # nothing changed


def test_send_outside_a_transaction_is_refused() -> None:
    txn = ready_manager()
    with pytest.raises(TransactionStateError, match="cannot send in state READY"):
        txn.check_send()
    with pytest.raises(TransactionStateError, match="cannot send in state READY"):
        txn.add_partition(A)
    assert txn.next_call(False) is None


def test_a_transactional_id_is_required() -> None:
    with pytest.raises(ValueError, match="transactional.id"):
        TransactionManager("", 60000)


def test_init_retries_on_loading_coordinator_and_refinds_a_moved_one() -> None:
    txn = TransactionManager("tx-1", 60000)
    op = txn.initialize()
    call = txn.next_call(False)
    assert call is not None
    assert txn.on_response(call, TxnResult(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)) is Next.RETRY
    again = txn.next_call(False)
    assert again is call
    assert txn.on_response(again, TxnResult(ErrorCode.NOT_COORDINATOR)) is (
        Next.REFIND_COORDINATOR
    )
    third = txn.next_call(False)
    assert third is not None
    lost = TxnResult(transport_error=ConnectionError("reset"))
    assert txn.on_response(third, lost) is Next.REFIND_COORDINATOR
    assert not op.done and txn.state is TxnState.INITIALIZING
    assert txn.initialize() is op  # a timed-out init_transactions() called again waits on it


def test_partitions_are_added_in_one_batched_request_before_their_batches_drain() -> None:
    txn = in_transaction()
    assert txn.add_partition(A) and txn.add_partition(B) and txn.add_partition(C)
    assert not txn.add_partition(A)  # already collected
    batch = a_batch(A)
    assert not txn.can_send(batch)
    call = txn.next_call(False)
    assert isinstance(call, AddPartitionsCall) and call.partitions == {A, B, C}
    assert call.target is Target.TRANSACTION_COORDINATOR
    assert txn.add_partition(TopicPartition("c", 0))  # new while the first is in flight
    assert txn.next_call(False) is None  # one transactional request at a time
    txn.on_response(call, TxnResult(partition_errors=dict.fromkeys((A, B, C), ErrorCode.NONE)))
    assert txn.can_send(batch)
    second = txn.next_call(False)
    assert isinstance(second, AddPartitionsCall)
    assert second.partitions == {TopicPartition("c", 0)}


def test_drained_batches_carry_the_producer_sequence_and_the_transactional_bit() -> None:
    txn = in_transaction(A)
    batch = a_batch(A, records=3)
    txn.on_drain(batch)
    header = decode_batch(batch.data or b"").header  # the CRC is checked here too
    assert header.is_transactional and not header.is_control
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 2, 0)
    follower = a_batch(A)
    txn.on_drain(follower)
    assert follower.base_sequence == 3


def test_a_partition_refused_with_concurrent_transactions_is_retried_with_the_others() -> None:
    txn = in_transaction()
    txn.add_partition(A)
    txn.add_partition(B)
    call = txn.next_call(False)
    assert call is not None
    result = TxnResult(
        partition_errors={
            A: ErrorCode.CONCURRENT_TRANSACTIONS,
            B: ErrorCode.OPERATION_NOT_ATTEMPTED,
        }
    )
    assert txn.on_response(call, result) is Next.RETRY
    again = txn.next_call(False)
    assert isinstance(again, AddPartitionsCall) and again.partitions == {A, B}
    assert txn.state is TxnState.IN_TRANSACTION


@pytest.mark.parametrize(
    "error",
    [
        ErrorCode.PRODUCER_FENCED,
        ErrorCode.INVALID_PRODUCER_EPOCH,
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        ErrorCode.INVALID_TXN_STATE,
    ],
)
def test_fencing_and_authorization_errors_from_the_coordinator_are_fatal(
    error: ErrorCode,
) -> None:
    txn = in_transaction(A)
    op = txn.commit()
    call = txn.next_call(False)
    assert isinstance(call, EndTxnCall) and call.committed
    assert txn.on_response(call, TxnResult(error)) is Next.CONTINUE
    assert txn.state is TxnState.FATAL_ERROR
    assert isinstance(op.error, KafkaError) and op.error.code is error
    with pytest.raises(TransactionStateError, match="FATAL_ERROR"):
        txn.begin()
    with pytest.raises(TransactionStateError, match="FATAL_ERROR"):
        txn.abort()
    assert txn.next_call(False) is None


def test_a_topic_authorization_failure_is_abortable_and_abort_recovers() -> None:
    txn = in_transaction()
    txn.add_partition(A)
    call = txn.next_call(False)
    assert call is not None
    txn.on_response(call, TxnResult(partition_errors={A: ErrorCode.TOPIC_AUTHORIZATION_FAILED}))
    assert txn.state is TxnState.ABORTABLE_ERROR and txn.fails_queued_batches
    with pytest.raises(TransactionStateError, match="ABORTABLE_ERROR .*TOPIC_AUTHORIZATION"):
        txn.commit()
    with pytest.raises(TransactionStateError):
        txn.add_partition(B)
    op = txn.abort()
    end = txn.next_call(False)
    # nothing was added: no EndTxn goes out, and the abort is done at once
    assert end is None and op.done and op.error is None
    assert txn.state is TxnState.READY


def test_end_txn_waits_until_every_batch_of_the_transaction_is_resolved() -> None:
    txn = in_transaction(A)
    op = txn.commit()
    assert txn.state is TxnState.COMMITTING_TRANSACTION
    assert txn.next_call(batches_pending=True) is None
    call = txn.next_call(batches_pending=False)
    assert isinstance(call, EndTxnCall) and call.committed
    assert txn.commit() is op  # a timed-out commit called again waits on the same one
    txn.on_response(call, OK)
    assert op.done and op.error is None and txn.state is TxnState.READY
    txn.begin()  # the next transaction starts empty: its partitions are added again
    assert txn.add_partition(A)


def test_a_transaction_that_sent_nothing_commits_without_end_txn() -> None:
    txn = in_transaction()
    op = txn.commit()
    assert txn.next_call(False) is None
    assert op.done and op.error is None and txn.state is TxnState.READY


def test_send_offsets_adds_the_group_then_commits_to_the_group_coordinator() -> None:
    txn = in_transaction()
    offsets = {A: OffsetAndMetadata(10), B: OffsetAndMetadata(20, "m")}
    op = txn.send_offsets(offsets, GROUP)
    add = txn.next_call(False)
    assert isinstance(add, AddOffsetsCall) and add.group == GROUP
    txn.on_response(add, OK)
    commit = txn.next_call(False)
    assert isinstance(commit, TxnOffsetCommitCall)
    assert commit.target is Target.GROUP_COORDINATOR and commit.group.generation_id == 3
    partial = TxnResult(
        partition_errors={A: ErrorCode.NONE, B: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}
    )
    assert txn.on_response(commit, partial) is Next.RETRY
    retry = txn.next_call(False)
    assert isinstance(retry, TxnOffsetCommitCall) and set(retry.offsets) == {B}
    txn.on_response(retry, TxnResult(partition_errors={B: ErrorCode.NONE}))
    assert op.done and op.error is None
    end = txn.commit()
    call = txn.next_call(False)
    assert isinstance(call, EndTxnCall)  # offsets alone make the transaction worth ending
    txn.on_response(call, OK)
    assert end.done and end.error is None


def test_a_fenced_group_member_makes_the_offsets_and_the_transaction_abortable() -> None:
    txn = in_transaction(A)
    op = txn.send_offsets({A: OffsetAndMetadata(5)}, GROUP)
    add = txn.next_call(False)
    assert add is not None
    txn.on_response(add, OK)
    commit = txn.next_call(False)
    assert commit is not None
    txn.on_response(commit, TxnResult(partition_errors={A: ErrorCode.ILLEGAL_GENERATION}))
    assert txn.state is TxnState.ABORTABLE_ERROR
    assert isinstance(op.error, KafkaError) and op.error.code is ErrorCode.ILLEGAL_GENERATION


def test_send_offsets_needs_a_group() -> None:
    txn = in_transaction()
    with pytest.raises(ValueError, match="consumer group"):
        txn.send_offsets({A: OffsetAndMetadata(1)}, ConsumerGroupMetadata(""))
    assert txn.next_call(False) is None


def test_a_lost_sequence_aborts_with_an_epoch_bump_kip_360() -> None:
    txn = in_transaction(A)
    batch = a_batch(A)
    txn.on_drain(batch)
    error = KafkaError(ErrorCode.UNKNOWN_PRODUCER_ID, "produce to a-0")
    txn.on_batch_failed(batch, ErrorCode.UNKNOWN_PRODUCER_ID, error)
    assert txn.state is TxnState.ABORTABLE_ERROR and txn.last_error is error
    op = txn.abort()
    # what is still queued fails with the abort, naming its cause
    assert isinstance(txn.last_error, TransactionAbortedError)
    assert "UNKNOWN_PRODUCER_ID" in str(txn.last_error)
    end = txn.next_call(False)
    assert isinstance(end, EndTxnCall) and not end.committed
    txn.on_response(end, OK)
    assert txn.state is TxnState.INITIALIZING and not op.done
    bump = txn.next_call(False)
    assert isinstance(bump, InitProducerIdCall)
    assert (bump.producer_id, bump.producer_epoch) == (7, 2)
    txn.on_response(bump, TxnResult(producer_id=7, producer_epoch=3))
    assert op.done and op.error is None and txn.state is TxnState.READY
    txn.begin()
    txn.add_partition(A)
    add = txn.next_call(False)
    assert add is not None
    txn.on_response(add, TxnResult(partition_errors={A: ErrorCode.NONE}))
    fresh = a_batch(A)
    txn.on_drain(fresh)
    assert (fresh.producer_epoch, fresh.base_sequence) == (3, 0)  # sequences start again


def test_an_unsent_batch_failing_during_the_commit_needs_no_bump() -> None:
    txn = in_transaction(A)
    txn.commit()
    txn.on_batch_failed(a_batch(A), ErrorCode.REQUEST_TIMED_OUT, TimeoutError("expired"))
    op = txn.abort()
    end = txn.next_call(False)
    assert end is not None
    txn.on_response(end, OK)
    assert op.done and txn.state is TxnState.READY and txn.producer_epoch == 2


def test_any_produce_failure_inside_the_transaction_bumps_the_epoch_as_kafka() -> None:
    txn = in_transaction(A)
    txn.on_batch_failed(a_batch(A), ErrorCode.REQUEST_TIMED_OUT, TimeoutError("expired"))
    op = txn.abort()
    end = txn.next_call(False)
    assert end is not None
    txn.on_response(end, OK)
    bump = txn.next_call(False)
    assert isinstance(bump, InitProducerIdCall) and not op.done


def test_a_fenced_produce_is_fatal() -> None:
    txn = in_transaction(A)
    fenced = KafkaError(ErrorCode.PRODUCER_FENCED, "produce to a-0")
    txn.on_batch_failed(a_batch(A), ErrorCode.PRODUCER_FENCED, fenced)
    assert txn.state is TxnState.FATAL_ERROR and txn.last_error is fenced


def test_a_batch_failing_while_committing_fails_the_commit() -> None:
    txn = in_transaction(A)
    op = txn.commit()
    txn.on_batch_failed(
        a_batch(A), ErrorCode.NOT_ENOUGH_REPLICAS, KafkaError(ErrorCode.NOT_ENOUGH_REPLICAS, "x")
    )
    assert txn.state is TxnState.ABORTABLE_ERROR
    assert isinstance(op.error, KafkaError) and op.error.code is ErrorCode.NOT_ENOUGH_REPLICAS
    assert txn.next_call(False) is None  # the EndTxn(commit) is dropped


def test_abort_drops_offsets_not_yet_sent() -> None:
    txn = in_transaction(A)
    offsets_op = txn.send_offsets({A: OffsetAndMetadata(1)}, GROUP)
    abort_op = txn.abort()
    assert isinstance(offsets_op.error, TransactionAbortedError)
    end = txn.next_call(False)
    assert isinstance(end, EndTxnCall) and not end.committed
    txn.on_response(end, OK)
    assert abort_op.done and abort_op.error is None
