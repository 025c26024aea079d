"""The group APIs on the wire (coordinator/group/service.py): every answer must encode at the
version it was asked in, over a real runtime and Kafka's record formats, in memory."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

import pytest

from epochlog.coordinator.group.operations import GroupConfig
from epochlog.coordinator.group.record_codec import ConsumerOffsetsCodec
from epochlog.coordinator.group.runtime import (
    EncodedRecord,
    GroupCoordinatorRuntime,
    TxnProducer,
)
from epochlog.coordinator.group.service import GroupService
from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey
from epochlog.protocol.errors import ErrorCode as E


class MemoryPartitions:
    def __init__(self) -> None:
        self.logs: dict[int, list[EncodedRecord]] = {}

    async def append(
        self,
        partition: int,
        records: Sequence[EncodedRecord],
        producer: TxnProducer | None = None,
    ) -> None:
        self.logs.setdefault(partition, []).extend(records)

    async def read(self, partition: int) -> AsyncIterator[EncodedRecord]:
        for record in list(self.logs.get(partition, [])):
            yield record


async def service(parts: MemoryPartitions) -> GroupService:
    runtime = GroupCoordinatorRuntime(
        parts,
        ConsumerOffsetsCodec(),
        1,
        GroupConfig(initial_rebalance_delay_ms=0, min_session_timeout_ms=10),
    )
    runtime.elected(0)
    for _ in range(5):
        await asyncio.sleep(0)
    return GroupService(runtime)


def join(member_id: str, version: int) -> m.JoinGroupRequest:
    return m.JoinGroupRequest(
        group_id="g",
        session_timeout_ms=10_000,
        rebalance_timeout_ms=10_000,
        member_id=member_id,
        group_instance_id="static-1",
        protocol_type="consumer",
        protocols=[m.JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"sub")],
    )


@pytest.mark.parametrize("version", [5, 7, 9])
def test_a_static_leader_rejoining_a_stable_group_is_answered_in_its_version(version) -> None:
    async def scenario() -> None:
        svc = await service(MemoryPartitions())
        first = await svc.handle(ApiKey.JOIN_GROUP, version, join("", version), "c", "/h")
        sync = m.SyncGroupRequest(
            group_id="g",
            generation_id=first.generation_id,
            member_id=first.member_id,
            assignments=[
                m.SyncGroupRequest.SyncGroupRequestAssignment(
                    member_id=first.member_id, assignment=b"A"
                )
            ],
        )
        synced = await svc.handle(ApiKey.SYNC_GROUP, 3, sync, "c", "/h")
        assert synced.error_code == E.NONE and synced.assignment == b"A"
        # The process restarts: same instance id, no member id, same subscription.
        again = await svc.handle(ApiKey.JOIN_GROUP, version, join("", version), "c", "/h")
        assert again.error_code == E.NONE and again.generation_id == first.generation_id
        assert again.skip_assignment is (version >= 9)  # KIP-814 exists only from v9
        again.encode(version)  # what the broker sends must encode at that version

    asyncio.run(scenario())


def test_a_commit_and_fetch_round_trip_through_kafkas_record_formats() -> None:
    async def scenario() -> None:
        parts = MemoryPartitions()
        svc = await service(parts)
        R = m.OffsetCommitRequest
        commit = R(
            group_id="g",
            generation_id_or_member_epoch=-1,
            member_id="",
            topics=[
                R.OffsetCommitRequestTopic(
                    name="t",
                    partitions=[
                        R.OffsetCommitRequestPartition(
                            partition_index=3,
                            committed_offset=42,
                            committed_leader_epoch=7,
                            committed_metadata="m",
                        )
                    ],
                )
            ],
        )
        answer = await svc.handle(ApiKey.OFFSET_COMMIT, 8, commit, "c", "/h")
        assert answer.topics[0].partitions[0].error_code == E.NONE
        # Another coordinator loads the partition from the bytes written.
        fresh = await service(parts)
        fetch = m.OffsetFetchRequest(
            groups=[m.OffsetFetchRequest.OffsetFetchRequestGroup(group_id="g", topics=None)]
        )
        fetched = await fresh.handle(ApiKey.OFFSET_FETCH, 8, fetch, "c", "/h")
        partition = fetched.groups[0].topics[0].partitions[0]
        assert (partition.partition_index, partition.committed_offset) == (3, 42)
        assert (partition.committed_leader_epoch, partition.metadata) == (7, "m")
        fetched.encode(8)

    asyncio.run(scenario())
