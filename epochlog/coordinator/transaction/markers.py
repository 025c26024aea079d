"""What the marker channel decides, without I/O (Kafka's TransactionMarkerChannelManager and
TransactionMarkerRequestCompletionHandler).

How it works. A `MarkerDelivery` follows one `WriteMarkers` effect: the partitions whose marker is
not yet written. Each round the channel asks it for `plan(leader_of, exists)`: the partitions
grouped by their current leader (one WriteTxnMarkers request per broker), a partition whose topic
no longer exists dropped as done (Kafka: a deleted partition needs no marker), one without a
leader kept for the next round. Each answer is fed back through `record(partition, error)`:

- NONE: written;
- TRANSACTION_COORDINATOR_FENCED, INVALID_PRODUCER_EPOCH, PRODUCER_FENCED: a newer coordinator or
  producer epoch owns the partition's producer now, so this transaction's markers are abandoned
  (`fenced`), as Kafka's `abortSending`;
- anything else (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS,
  REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR, a lost connection): retried next round with fresh
  metadata, until written.

The delivery is `done` when nothing is left; the runtime then calls the shard's `markers_written`.

The channel sends the rounds of many transactions bound for one broker as one request, as
Kafka's channel does: `combined_request` puts their markers in one WriteTxnMarkers and
`split_response` hands each its own answer (the broker answers markers in the order asked).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from epochlog.coordinator.transaction.operations import WriteMarkers
from epochlog.protocol import messages as m
from epochlog.protocol.errors import ErrorCode

TopicPartition = tuple[str, int]

FENCING_ERRORS = frozenset(
    {
        ErrorCode.TRANSACTION_COORDINATOR_FENCED,
        ErrorCode.INVALID_PRODUCER_EPOCH,
        ErrorCode.PRODUCER_FENCED,
    }
)


@dataclass
class MarkerDelivery:
    markers: WriteMarkers
    pending: set[TopicPartition] = field(default_factory=set)
    fenced_by: ErrorCode | None = None

    def __post_init__(self) -> None:
        if not self.pending:
            self.pending = set(self.markers.partitions)

    @property
    def done(self) -> bool:
        return not self.pending and self.fenced_by is None

    @property
    def finished(self) -> bool:
        """Nothing more to send: every marker written, or the transaction was fenced."""
        return not self.pending or self.fenced_by is not None

    def plan(
        self,
        leader_of: Callable[[TopicPartition], int | None],
        exists: Callable[[str], bool],
    ) -> dict[int, list[TopicPartition]]:
        """The partitions to send this round, by leader; deleted topics' partitions are done."""
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in sorted(self.pending):
            if not exists(tp[0]):
                self.pending.discard(tp)
                continue
            leader = leader_of(tp)
            if leader is not None and leader >= 0:
                by_leader.setdefault(leader, []).append(tp)
        return by_leader

    def record(self, tp: TopicPartition, error: ErrorCode) -> None:
        if error is ErrorCode.NONE:
            self.pending.discard(tp)
        elif error in FENCING_ERRORS:
            self.fenced_by = error
        # every other error: the partition stays pending and is tried again

    def request(self, partitions: list[TopicPartition]) -> m.WriteTxnMarkersRequest:
        """WriteTxnMarkers for these partitions (one marker: this transaction)."""
        R = m.WriteTxnMarkersRequest
        topics: dict[str, list[int]] = {}
        for topic, index in partitions:
            topics.setdefault(topic, []).append(index)
        return R(
            markers=[
                R.WritableTxnMarker(
                    producer_id=self.markers.producer_id,
                    producer_epoch=self.markers.producer_epoch,
                    transaction_result=self.markers.commit,
                    topics=[
                        R.WritableTxnMarkerTopic(name=name, partition_indexes=indexes)
                        for name, indexes in topics.items()
                    ],
                    coordinator_epoch=self.markers.coordinator_epoch,
                )
            ]
        )

    def record_response(
        self, sent: list[TopicPartition], response: m.WriteTxnMarkersResponse
    ) -> None:
        """Feed every partition's answer back; a partition the response leaves out is retried."""
        answered: dict[TopicPartition, ErrorCode] = {}
        for marker in response.markers:
            if marker.producer_id != self.markers.producer_id:
                continue
            for topic in marker.topics:
                for partition in topic.partitions:
                    answered[(topic.name, partition.partition_index)] = ErrorCode.of(
                        partition.error_code
                    )
        for tp in sent:
            self.record(tp, answered.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR))


def combined_request(
    rounds: Sequence[tuple[MarkerDelivery, list[TopicPartition]]],
) -> m.WriteTxnMarkersRequest:
    """One WriteTxnMarkers for the rounds of several transactions bound for one broker."""
    return m.WriteTxnMarkersRequest(
        markers=[marker for d, tps in rounds for marker in d.request(tps).markers]
    )


def split_response(
    response: m.WriteTxnMarkersResponse, count: int
) -> list[m.WriteTxnMarkersResponse]:
    """The answer to each of the `count` markers of a combined request, in request order; a
    response with another number of markers answers none (every partition is retried)."""
    R = m.WriteTxnMarkersResponse
    if len(response.markers) != count:
        return [R(markers=[]) for _ in range(count)]
    return [R(markers=[marker]) for marker in response.markers]
