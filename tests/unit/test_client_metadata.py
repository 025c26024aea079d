"""The cluster view built from Metadata responses, per version."""

from __future__ import annotations

import uuid

from epochlog.client.metadata import (
    ClusterMetadata,
    TopicPartition,
    apply_metadata_response,
    metadata_request,
)
from epochlog.protocol import messages as m
from epochlog.protocol.errors import ErrorCode

R = m.MetadataResponse
TID = uuid.UUID("12345678-1234-5678-1234-567812345678")


def response(leader_epoch: int = 5, error: int = 0, topics: list | None = None) -> object:
    parts = [
        R.MetadataResponsePartition(
            partition_index=p,
            leader_id=p % 2 + 1,
            leader_epoch=leader_epoch,
            replica_nodes=[1, 2],
            isr_nodes=[1, 2],
        )
        for p in range(3)
    ]
    return R(
        brokers=[
            R.MetadataResponseBroker(node_id=1, host="h1", port=9092, rack="r1"),
            R.MetadataResponseBroker(node_id=2, host="h2", port=9093),
        ],
        cluster_id="c1",
        controller_id=2,
        topics=topics
        if topics is not None
        else [R.MetadataResponseTopic(name="t", topic_id=TID, partitions=parts)],
        error_code=error,
    )


def roundtrip(resp: object, version: int) -> object:
    return R.decode(resp.encode(version), version)  # type: ignore[attr-defined]


def test_request_for_all_topics_is_empty_in_v0_and_null_after() -> None:
    assert metadata_request(0, None).topics == []
    assert metadata_request(1, None).topics is None
    req = metadata_request(12, ["b", "a"])
    assert [t.name for t in req.topics] == ["a", "b"]
    assert all(t.topic_id == uuid.UUID(int=0) for t in req.topics)
    assert metadata_request(4, ["a"], allow_auto_topic_creation=False).encode(4)
    assert metadata_request(3, ["a"], allow_auto_topic_creation=False).encode(3)


def test_response_gives_brokers_controller_leaders_and_topic_ids() -> None:
    update = apply_metadata_response(ClusterMetadata(), roundtrip(response(), 12), 12, ["t"])
    c = update.cluster
    assert sorted(c.brokers) == [1, 2] and c.brokers[1].rack == "r1"
    assert c.controller_id == 2 and c.cluster_id == "c1"
    assert c.partition_count("t") == 3
    assert c.leader_for(TopicPartition("t", 0)) == 1
    assert c.partition(("t", 1)).leader_epoch == 5  # type: ignore[union-attr]
    assert c.topic_id("t") == TID and c.topic_name(TID) == "t"
    assert update.error is ErrorCode.NONE and update.brokers_seen == 2


def test_topic_ids_only_from_v10_and_leader_epochs_only_from_v7() -> None:
    c = apply_metadata_response(ClusterMetadata(), roundtrip(response(), 9), 9, None).cluster
    assert c.topic_id("t") == uuid.UUID(int=0)
    assert c.partition(("t", 0)).leader_epoch == 5  # type: ignore[union-attr]
    c = apply_metadata_response(ClusterMetadata(), roundtrip(response(), 6), 6, None).cluster
    assert c.partition(("t", 0)).leader_epoch == -1  # type: ignore[union-attr]


def test_top_level_error_is_read_from_v13_only() -> None:
    resp = response(error=ErrorCode.REBOOTSTRAP_REQUIRED)
    assert (
        apply_metadata_response(ClusterMetadata(), roundtrip(resp, 13), 13, None).error
        is ErrorCode.REBOOTSTRAP_REQUIRED
    )
    assert apply_metadata_response(ClusterMetadata(), resp, 12, None).error is ErrorCode.NONE


def test_an_older_leader_epoch_does_not_replace_a_newer_one() -> None:
    new = apply_metadata_response(ClusterMetadata(), response(leader_epoch=7), 12, None).cluster
    stale = apply_metadata_response(new, response(leader_epoch=6), 12, None).cluster
    assert stale.partition(("t", 0)).leader_epoch == 7  # type: ignore[union-attr]
    newer = apply_metadata_response(new, response(leader_epoch=8), 12, None).cluster
    assert newer.partition(("t", 0)).leader_epoch == 8  # type: ignore[union-attr]


def test_topics_missing_from_a_partial_response_are_kept_if_still_wanted() -> None:
    first = apply_metadata_response(ClusterMetadata(), response(), 12, ["t"]).cluster
    empty = response(topics=[])
    assert apply_metadata_response(first, empty, 12, ["t", "u"]).cluster.topic("t") is not None
    assert apply_metadata_response(first, empty, 12, ["u"]).cluster.topic("t") is None
    assert apply_metadata_response(first, empty, 12, None).cluster.topic("t") is None


def test_topic_errors_are_reported_and_leave_no_partitions() -> None:
    resp = response(
        topics=[
            R.MetadataResponseTopic(name="gone", error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        ]
    )
    update = apply_metadata_response(ClusterMetadata(), resp, 12, ["gone"])
    assert update.topic_errors == {"gone": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert update.cluster.partition_count("gone") is None


def test_a_leader_that_is_not_a_known_broker_counts_as_no_leader() -> None:
    resp = response()
    resp.topics[0].partitions[0].leader_id = 9  # type: ignore[attr-defined]
    c = apply_metadata_response(ClusterMetadata(), resp, 12, None).cluster
    assert c.leader_for(("t", 0)) is None
    assert c.available_partitions("t") == [1, 2]
