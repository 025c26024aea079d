"""The transaction coordinator for one `__transaction_state` partition, without I/O (Kafka's
TransactionCoordinator, TransactionStateManager and TransactionMetadata).

How it works. Every request is a method that takes plain values and `now_ms` and returns
`Effects`: records to append, replies to send once they are appended, markers to write, timers.
`replay(record)` is the only mutator of the transactional ids' metadata, for a record just
appended and for every record read back when the partition is loaded, so live operation and
recovery cannot drift apart. Between a decision and its replay the id has a pending state
(Kafka's `pendingState`): any other request for it is answered CONCURRENT_TRANSACTIONS, and
`append_failed` clears it, leaving the persisted metadata as it was (so a failed epoch fence is
not bumped twice, which Kafka tracks as `hasFailedEpochFence`).

Ending a transaction takes two records: Prepare{Commit,Abort} (the client's EndTxn is answered
once it is appended), then markers to every partition of the transaction, then Complete{Commit,
Abort} once the runtime reports them written (`markers_written`). A coordinator that loads a
partition with a transaction left in a Prepare state writes its markers again (`loaded`).

Fencing follows Kafka 3.9: InitProducerId bumps the epoch (a new producer id when the epoch is
exhausted), aborting an ongoing transaction first with the bumped epoch (PrepareEpochFence, then
PrepareAbort) and answering CONCURRENT_TRANSACTIONS meanwhile; a request with an older epoch gets
PRODUCER_FENCED; a transaction older than its timeout is aborted the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from epochlog.coordinator.transaction.operations import (
    ABORT_TIMED_OUT_TIMER,
    EXPIRE_IDS_TIMER,
    AddOffsets,
    AddPartitions,
    AddPartitionsReply,
    Effects,
    EndTxn,
    ErrorReply,
    InitProducerId,
    InitProducerIdReply,
    ListedTransaction,
    TimerKey,
    TransactionDescription,
    TransactionListing,
    TxnConfig,
    WriteMarkers,
)
from epochlog.coordinator.transaction.records import TransactionRecord, TxnRecord, TxnTombstone
from epochlog.coordinator.transaction.state import (
    COMPLETED,
    MAX_PRODUCER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    PREPARED,
    TxnMetadata,
    TxnState,
    check_transition,
    is_epoch_exhausted,
)
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.java_hash import java_string_hash, java_utils_abs

S = TxnState
E = ErrorCode
OFFSETS_TOPIC = "__consumer_offsets"


class TransactionCoordinatorShard:
    def __init__(
        self,
        allocate_producer_id: Callable[[], int],
        coordinator_epoch: int,
        config: TxnConfig | None = None,
    ) -> None:
        self.config = config or TxnConfig()
        self.coordinator_epoch = coordinator_epoch  # leader epoch of our partition
        self.transactions: dict[str, TxnMetadata] = {}
        self.pending: dict[str, TxnState] = {}  # ids with a record on its way to the log
        self.loading = True
        self._allocate_producer_id = allocate_producer_id

    # ------------------------------------------------------------------------ the mutator

    def replay(self, record: TransactionRecord) -> None:
        """Apply a record read back from the partition, or one just appended."""
        if isinstance(record, TxnRecord):
            metadata = record.metadata
            self.transactions[metadata.transactional_id] = metadata
            self.pending.pop(metadata.transactional_id, None)
        elif isinstance(record, TxnTombstone):
            self.transactions.pop(record.transactional_id, None)
            self.pending.pop(record.transactional_id, None)

    def loaded(self, now_ms: int) -> Effects:
        """The partition has been replayed: finish what a predecessor prepared, start timers."""
        self.loading = False
        effects = Effects()
        for metadata in self.transactions.values():
            if metadata.state in PREPARED:
                effects.markers.append(self._markers(metadata))
        effects.timers[ABORT_TIMED_OUT_TIMER] = now_ms + self.config.abort_timed_out_interval_ms
        effects.timers[EXPIRE_IDS_TIMER] = now_ms + self.config.remove_expired_interval_ms
        return effects

    def append_failed(self, records: Iterable[TransactionRecord]) -> None:
        for record in records:
            if isinstance(record, TxnRecord):
                self.pending.pop(record.metadata.transactional_id, None)
            else:
                self.pending.pop(record.transactional_id, None)

    def _write(self, effects: Effects, current: TxnMetadata | None, new: TxnMetadata) -> None:
        """Append `new` as the id's next record, checking the transition is one Kafka allows."""
        if current is not None:
            check_transition(new.transactional_id, current.state, new.state)
        self.pending[new.transactional_id] = new.state
        effects.records.append(TxnRecord(new))

    def _markers(self, metadata: TxnMetadata) -> WriteMarkers:
        return WriteMarkers(
            transactional_id=metadata.transactional_id,
            producer_id=metadata.producer_id,
            producer_epoch=metadata.producer_epoch,
            commit=metadata.state is S.PREPARE_COMMIT,
            coordinator_epoch=self.coordinator_epoch,
            partitions=tuple(sorted(metadata.partitions)),
        )

    # ------------------------------------------------------------------------ InitProducerId

    def init_producer_id(self, request: InitProducerId, handle: Any, now_ms: int) -> Effects:
        effects = Effects()

        def answer(error: ErrorCode, producer_id: int = -1, epoch: int = -1) -> Effects:
            effects.reply(handle, InitProducerIdReply(error, producer_id, epoch))
            return effects

        if not request.transactional_id:
            return answer(E.INVALID_REQUEST)
        if not 0 < request.timeout_ms <= self.config.max_timeout_ms:
            return answer(E.INVALID_TRANSACTION_TIMEOUT)
        if request.transactional_id in self.pending:
            return answer(E.CONCURRENT_TRANSACTIONS)
        expected = (
            None
            if request.expected_producer_id == NO_PRODUCER_ID
            else (request.expected_producer_id, request.expected_producer_epoch)
        )
        metadata = self.transactions.get(request.transactional_id)
        if metadata is None:
            # A new id: Kafka creates it with epoch -1, which the first bump makes 0.
            new = TxnMetadata(
                transactional_id=request.transactional_id,
                producer_id=self._allocate_producer_id(),
                producer_epoch=0,
                timeout_ms=request.timeout_ms,
                state=S.EMPTY,
                partitions=frozenset(),
                last_update_ms=now_ms,
                start_ms=-1,
            )
            self._write(effects, None, new)
            return answer(E.NONE, new.producer_id, new.producer_epoch)
        if expected is not None and not self._is_valid_producer_id(metadata, *expected):
            return answer(E.PRODUCER_FENCED)
        if metadata.state in PREPARED or metadata.state is S.DEAD:
            return answer(E.CONCURRENT_TRANSACTIONS)  # the client retries once it completes
        if metadata.state is S.ONGOING:
            # Fence the current producer: abort its transaction with a bumped epoch first.
            self._fence_and_abort(effects, metadata, now_ms)
            return answer(E.CONCURRENT_TRANSACTIONS)
        if is_epoch_exhausted(metadata.producer_epoch) and (
            expected is None or expected[1] == metadata.producer_epoch
        ):
            new = replace(
                metadata,
                previous_producer_id=metadata.producer_id,
                producer_id=self._allocate_producer_id(),
                producer_epoch=0,
                last_producer_epoch=(
                    metadata.producer_epoch if expected is not None else NO_PRODUCER_EPOCH
                ),
                timeout_ms=request.timeout_ms,
                state=S.EMPTY,
                partitions=frozenset(),
                last_update_ms=now_ms,
                start_ms=-1,
            )
        else:
            bumped = metadata.producer_epoch + 1
            if expected is None:
                epoch, last_epoch = bumped, NO_PRODUCER_EPOCH
            elif metadata.producer_epoch == NO_PRODUCER_EPOCH or (
                expected[1] == metadata.producer_epoch
            ):
                epoch, last_epoch = bumped, metadata.producer_epoch
            elif expected[1] == metadata.last_producer_epoch:
                # a retry of a bump whose answer was lost: the same epoch again
                epoch, last_epoch = metadata.producer_epoch, metadata.last_producer_epoch
            else:
                return answer(E.PRODUCER_FENCED)
            new = replace(
                metadata,
                producer_epoch=epoch,
                last_producer_epoch=last_epoch,
                timeout_ms=request.timeout_ms,
                state=S.EMPTY,
                partitions=frozenset(),
                last_update_ms=now_ms,
                start_ms=-1,
            )
        self._write(effects, metadata, new)
        return answer(E.NONE, new.producer_id, new.producer_epoch)

    @staticmethod
    def _is_valid_producer_id(metadata: TxnMetadata, producer_id: int, epoch: int) -> bool:
        """Kafka's check of KIP-360's expected producer id: the current one (its epoch is checked
        by the bump), or the previous one with an exhausted epoch (a retried rotation)."""
        return (
            metadata.producer_epoch == NO_PRODUCER_EPOCH
            or producer_id == metadata.producer_id
            or (producer_id == metadata.previous_producer_id and is_epoch_exhausted(epoch))
        )

    def _fence_and_abort(self, effects: Effects, metadata: TxnMetadata, now_ms: int) -> None:
        """PrepareEpochFence then PrepareAbort with the bumped epoch (Kafka's
        prepareFenceProducerEpoch + endTransaction(ABORT, isFromClient=false)); the markers carry
        the new epoch, so the partitions fence the old producer too."""
        check_transition(metadata.transactional_id, metadata.state, S.PREPARE_EPOCH_FENCE)
        # At Short.MaxValue there is no epoch left to bump to: abort at the current one.
        epoch = min(metadata.producer_epoch + 1, MAX_PRODUCER_EPOCH)
        fencing = replace(metadata, state=S.PREPARE_EPOCH_FENCE)
        aborting = replace(
            metadata,
            producer_epoch=epoch,
            last_producer_epoch=NO_PRODUCER_EPOCH,
            state=S.PREPARE_ABORT,
            last_update_ms=now_ms,
        )
        self._write(effects, fencing, aborting)
        effects.markers.append(self._markers(aborting))

    # ------------------------------------------------------------------------ adding partitions

    def _check_producer(
        self, transactional_id: str, producer_id: int, producer_epoch: int
    ) -> tuple[TxnMetadata | None, ErrorCode]:
        """Kafka's checks for a request naming a producer, in Kafka's order."""
        if not transactional_id:
            return None, E.INVALID_REQUEST
        if transactional_id in self.pending and transactional_id not in self.transactions:
            return None, E.CONCURRENT_TRANSACTIONS  # its first record is on its way
        metadata = self.transactions.get(transactional_id)
        if metadata is None or metadata.producer_id != producer_id:
            return None, E.INVALID_PRODUCER_ID_MAPPING
        if metadata.producer_epoch != producer_epoch and self.config.fence_producer_epochs:
            return None, E.PRODUCER_FENCED
        if transactional_id in self.pending:
            return None, E.CONCURRENT_TRANSACTIONS
        return metadata, E.NONE

    def add_partitions(self, request: AddPartitions, handle: Any, now_ms: int) -> Effects:
        effects = Effects()
        wanted = frozenset(request.partitions)

        def answer(errors: dict[tuple[str, int], ErrorCode]) -> Effects:
            effects.reply(handle, AddPartitionsReply(request.transactional_id, errors))
            return effects

        if request.verify_only:
            return answer(self._verify(request, wanted))
        metadata, error = self._check_producer(
            request.transactional_id, request.producer_id, request.producer_epoch
        )
        if metadata is not None and metadata.state in PREPARED:
            error = E.CONCURRENT_TRANSACTIONS
        elif metadata is not None and metadata.state is S.DEAD:
            error = E.INVALID_TXN_STATE
        if error is not E.NONE or metadata is None:
            return answer({tp: error for tp in wanted})
        self._add(effects, metadata, wanted, now_ms)
        return answer({tp: E.NONE for tp in wanted})

    def _verify(
        self, request: AddPartitions, wanted: frozenset[tuple[str, int]]
    ) -> dict[tuple[str, int], ErrorCode]:
        """A partition leader asks whether a transactional write's partition was added (KIP-890
        part 1). As in Kafka, a pending record is not waited for (the marker is the final check)
        and a partition not in the transaction is TRANSACTION_ABORTABLE."""
        metadata = self.transactions.get(request.transactional_id)
        if not request.transactional_id:
            error = E.INVALID_REQUEST
        elif metadata is None or metadata.producer_id != request.producer_id:
            error = E.INVALID_PRODUCER_ID_MAPPING
        elif (
            metadata.producer_epoch != request.producer_epoch and self.config.fence_producer_epochs
        ):
            error = E.PRODUCER_FENCED
        elif metadata.state in PREPARED:
            error = E.CONCURRENT_TRANSACTIONS
        else:
            return {
                tp: E.NONE if tp in metadata.partitions else E.TRANSACTION_ABORTABLE
                for tp in wanted
            }
        return dict.fromkeys(wanted, error)

    def _add(
        self,
        effects: Effects,
        metadata: TxnMetadata,
        wanted: frozenset[tuple[str, int]],
        now_ms: int,
    ) -> None:
        if metadata.state is S.ONGOING and wanted <= metadata.partitions:
            return  # nothing new: answered without a write, as Kafka does
        beginning = metadata.state in COMPLETED
        new = replace(
            metadata,
            state=S.ONGOING,
            partitions=wanted if beginning else metadata.partitions | wanted,
            start_ms=now_ms if beginning else metadata.start_ms,
            last_update_ms=now_ms,
        )
        self._write(effects, metadata, new)

    def add_offsets(self, request: AddOffsets, handle: Any, now_ms: int) -> Effects:
        """AddOffsetsToTxn: the transaction takes in the `__consumer_offsets` partition of the
        group, so its commit marker reaches the group coordinator."""
        effects = Effects()
        if not request.group_id:
            effects.reply(handle, ErrorReply(E.INVALID_GROUP_ID))
            return effects
        metadata, error = self._check_producer(
            request.transactional_id, request.producer_id, request.producer_epoch
        )
        if metadata is not None and metadata.state in PREPARED:
            error = E.CONCURRENT_TRANSACTIONS
        elif metadata is not None and metadata.state is S.DEAD:
            error = E.INVALID_TXN_STATE
        if error is not E.NONE or metadata is None:
            effects.reply(handle, ErrorReply(error))
            return effects
        self._add(effects, metadata, frozenset({self.offsets_partition(request.group_id)}), now_ms)
        effects.reply(handle, ErrorReply(E.NONE))
        return effects

    def offsets_partition(self, group_id: str) -> tuple[str, int]:
        partitions = self.config.offsets_topic_partitions
        return OFFSETS_TOPIC, java_utils_abs(java_string_hash(group_id)) % partitions

    # ------------------------------------------------------------------------ EndTxn

    def end_txn(self, request: EndTxn, handle: Any, now_ms: int) -> Effects:
        effects = Effects()
        metadata, error = self._check_producer(
            request.transactional_id, request.producer_id, request.producer_epoch
        )
        if metadata is not None:
            error = self._end_txn_error(metadata, request.commit)
        if error is not E.NONE or metadata is None:
            effects.reply(handle, ErrorReply(error))
            return effects
        if metadata.state is S.ONGOING:
            prepared = replace(
                metadata,
                state=S.PREPARE_COMMIT if request.commit else S.PREPARE_ABORT,
                last_update_ms=now_ms,
            )
            self._write(effects, metadata, prepared)
            effects.markers.append(self._markers(prepared))
        effects.reply(handle, ErrorReply(E.NONE))  # or a retry of a completed end: also NONE
        return effects

    @staticmethod
    def _end_txn_error(metadata: TxnMetadata, commit: bool) -> ErrorCode:
        state = metadata.state
        if state is S.ONGOING:
            return E.NONE
        if state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            done_as_asked = (state is S.COMPLETE_COMMIT) == commit
            return E.NONE if done_as_asked else E.INVALID_TXN_STATE
        if state in PREPARED:
            asked = (state is S.PREPARE_COMMIT) == commit
            return E.CONCURRENT_TRANSACTIONS if asked else E.INVALID_TXN_STATE
        return E.INVALID_TXN_STATE  # Empty (nothing begun), Dead

    def completing(self, transactional_id: str) -> bool:
        """Whether the id's transaction is prepared and waits for its markers (any request to
        add to it is CONCURRENT_TRANSACTIONS until its Complete record is appended)."""
        metadata = self.transactions.get(transactional_id)
        return metadata is not None and metadata.state in PREPARED

    def markers_written(
        self, transactional_id: str, producer_id: int, producer_epoch: int, now_ms: int
    ) -> Effects:
        """Every marker of the prepared transaction is written: complete it. A report for a
        transaction that is no longer the one prepared (a stale retry) changes nothing."""
        effects = Effects()
        metadata = self.transactions.get(transactional_id)
        if (
            metadata is None
            or metadata.state not in PREPARED
            or transactional_id in self.pending
            or (metadata.producer_id, metadata.producer_epoch) != (producer_id, producer_epoch)
        ):
            return effects
        complete = S.COMPLETE_COMMIT if metadata.state is S.PREPARE_COMMIT else S.COMPLETE_ABORT
        self._write(
            effects,
            metadata,
            replace(metadata, state=complete, partitions=frozenset(), last_update_ms=now_ms),
        )
        return effects

    # ------------------------------------------------------------------------ timers

    def on_timer(self, key: TimerKey, now_ms: int) -> Effects:
        if key == ABORT_TIMED_OUT_TIMER:
            return self.abort_timed_out(now_ms)
        if key == EXPIRE_IDS_TIMER:
            return self.expire_ids(now_ms)
        raise ValueError(f"transaction coordinator: unknown timer {key!r}")

    def abort_timed_out(self, now_ms: int) -> Effects:
        """transaction.timeout.ms: abort (with an epoch bump, fencing the producer) every
        transaction that began longer ago than its timeout."""
        effects = Effects()
        for metadata in list(self.transactions.values()):
            if (
                metadata.state is S.ONGOING
                and metadata.transactional_id not in self.pending
                and metadata.start_ms + metadata.timeout_ms < now_ms
            ):
                self._fence_and_abort(effects, metadata, now_ms)
        effects.timers[ABORT_TIMED_OUT_TIMER] = now_ms + self.config.abort_timed_out_interval_ms
        return effects

    def expire_ids(self, now_ms: int) -> Effects:
        """transactional.id.expiration.ms: forget ids idle (no transaction) for that long."""
        effects = Effects()
        for metadata in list(self.transactions.values()):
            if (
                metadata.state in COMPLETED
                and metadata.transactional_id not in self.pending
                and metadata.last_update_ms <= now_ms - self.config.id_expiration_ms
            ):
                check_transition(metadata.transactional_id, metadata.state, S.DEAD)
                self.pending[metadata.transactional_id] = S.DEAD
                effects.records.append(TxnTombstone(metadata.transactional_id))
        effects.timers[EXPIRE_IDS_TIMER] = now_ms + self.config.remove_expired_interval_ms
        return effects

    # ------------------------------------------------------------------------ reads

    def describe(self, transactional_ids: Iterable[str]) -> list[TransactionDescription]:
        described = []
        for transactional_id in transactional_ids:
            metadata = self.transactions.get(transactional_id)
            if not transactional_id:
                described.append(TransactionDescription(transactional_id, E.INVALID_REQUEST))
                continue
            if metadata is None or metadata.state is S.DEAD:  # Dead: being expired
                described.append(
                    TransactionDescription(transactional_id, E.TRANSACTIONAL_ID_NOT_FOUND)
                )
                continue
            topics: dict[str, list[int]] = {}
            for topic, partition in sorted(metadata.partitions):
                topics.setdefault(topic, []).append(partition)
            described.append(
                TransactionDescription(
                    transactional_id,
                    E.NONE,
                    state=metadata.state.kafka_name,
                    timeout_ms=metadata.timeout_ms,
                    start_ms=metadata.start_ms,
                    producer_id=metadata.producer_id,
                    producer_epoch=metadata.producer_epoch,
                    topics={t: tuple(ps) for t, ps in topics.items()},
                )
            )
        return described

    def list_transactions(
        self,
        state_filters: Iterable[str] = (),
        producer_id_filters: Iterable[int] = (),
        duration_filter_ms: int = -1,
        now_ms: int = 0,
    ) -> TransactionListing:
        """ListTransactions: empty filters match everything; a state name Kafka does not know is
        reported back, not an error; the duration filter (v1) keeps transactions running longer."""

        def running_longer(m: TxnMetadata) -> bool:
            return m.start_ms >= 0 and now_ms - m.start_ms > duration_filter_ms

        names = list(state_filters)
        states = {TxnState.from_name(n) for n in names} - {None}
        unknown = tuple(n for n in names if TxnState.from_name(n) is None)
        producer_ids = set(producer_id_filters)
        listed = [
            ListedTransaction(m.transactional_id, m.producer_id, m.state.kafka_name)
            for m in sorted(self.transactions.values(), key=lambda m: m.transactional_id)
            if (not names or m.state in states)
            and (not producer_ids or m.producer_id in producer_ids)
            and (duration_filter_ms < 0 or running_longer(m))
        ]
        return TransactionListing(unknown, tuple(listed))
