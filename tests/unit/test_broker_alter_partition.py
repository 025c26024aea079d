"""The AlterPartition manager: the batching core without I/O, the request it builds, and the
sender against a small fake controller (top-level errors and lost requests are retried)."""

from __future__ import annotations

import asyncio
import struct
import time
import uuid

from epochlog.broker.alter_partition_manager import (
    AlterPartitionBatcher,
    AlterPartitionItem,
    AlterPartitionManager,
    PartitionAnswer,
    build_request,
    parse_answers,
)
from epochlog.broker.metadata_cache import BrokerEndpoint, LiveBroker, MetadataCache
from epochlog.protocol import messages as m
from epochlog.protocol.api import APIS, ApiKey, decode_request, encode_response
from epochlog.protocol.errors import ErrorCode
from epochlog.testing.faults import FaultInjector, FaultRules

TOPIC_ID = uuid.uuid4()


def item(partition=0, answers=None, wanted=lambda: True, isr=((1, 501), (2, 502))):
    return AlterPartitionItem(
        key=("t", partition),
        topic_id=TOPIC_ID,
        leader_epoch=3,
        partition_epoch=7,
        isr_with_epochs=list(isr),
        on_answer=(answers.append if answers is not None else lambda a: None),
        still_wanted=wanted,
    )


def test_one_queued_change_per_partition_unless_the_old_one_is_unwanted():
    batcher = AlterPartitionBatcher()
    assert batcher.submit(item(0))
    assert not batcher.submit(item(0))  # OPERATION_NOT_ATTEMPTED for the partition
    assert batcher.submit(item(1))
    wanted = [True]
    batcher = AlterPartitionBatcher()
    assert batcher.submit(item(0, wanted=lambda: wanted[0]))
    wanted[0] = False  # a LeaderAndIsr replaced the change
    assert batcher.submit(item(0))


def test_one_request_in_flight_with_everything_due():
    batcher = AlterPartitionBatcher()
    batcher.submit(item(0))
    batcher.submit(item(1))
    batch = batcher.take_batch(0)
    assert [i.key for i in batch] == [("t", 0), ("t", 1)]
    batcher.submit(item(2))
    assert batcher.take_batch(0) is None  # in flight
    answered = batcher.on_answer({("t", 0): PartitionAnswer(ErrorCode.NONE)})
    assert [i.key for i, _ in answered] == [("t", 0)]
    # Partition 1 was left out of the answer: it goes again, with partition 2.
    assert [i.key for i in batcher.take_batch(0)] == [("t", 1), ("t", 2)]


def test_a_failed_request_is_retried_after_the_back_off_and_unwanted_items_are_dropped():
    batcher = AlterPartitionBatcher()
    wanted = [True]
    batcher.submit(item(0))
    batcher.submit(item(1, wanted=lambda: wanted[0]))
    batcher.take_batch(1000)
    batcher.on_failure(1000)
    assert batcher.take_batch(1049) is None
    assert batcher.next_due_ms() == 1050
    wanted[0] = False
    assert [i.key for i in batcher.take_batch(1050)] == [("t", 0)]


def test_the_request_and_the_answers_round_trip_through_the_codec():
    batch = [item(0), item(1, isr=((1, -1),))]
    request = build_request(1, 501, batch)
    decoded = m.AlterPartitionRequest.decode(request.encode(3), 3)
    assert (decoded.broker_id, decoded.broker_epoch) == (1, 501)
    [topic] = decoded.topics
    assert topic.topic_id == TOPIC_ID
    p0, p1 = topic.partitions
    assert (p0.partition_index, p0.leader_epoch, p0.partition_epoch) == (0, 3, 7)
    assert [(s.broker_id, s.broker_epoch) for s in p0.new_isr_with_epochs] == [(1, 501), (2, 502)]
    assert [(s.broker_id, s.broker_epoch) for s in p1.new_isr_with_epochs] == [(1, -1)]
    R = m.AlterPartitionResponse
    response = R(
        topics=[
            R.TopicData(
                topic_id=TOPIC_ID,
                partitions=[
                    R.PartitionData(
                        partition_index=0,
                        leader_id=1,
                        leader_epoch=3,
                        isr=[1, 2],
                        partition_epoch=8,
                    ),
                    R.PartitionData(partition_index=1, error_code=ErrorCode.INELIGIBLE_REPLICA),
                ],
            )
        ]
    )
    answers = parse_answers(response, batch)
    assert answers[("t", 0)] == PartitionAnswer(ErrorCode.NONE, 1, 3, (1, 2), 8)
    assert answers[("t", 1)].error is ErrorCode.INELIGIBLE_REPLICA


class Controller:
    """Answers AlterPartition with `script` top-level errors first, then success."""

    def __init__(self, script):
        self.script = list(script)
        self.requests = []
        self.times = []

    async def serve(self, reader, writer):
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                request = decode_request(await reader.readexactly(size))
                writer.write(
                    encode_response(
                        request.api_key,
                        request.api_version,
                        request.correlation_id,
                        self.answer(request),
                    )
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    def answer(self, request):
        if request.api_key == ApiKey.API_VERSIONS:
            return m.ApiVersionsResponse(
                api_keys=[
                    m.ApiVersionsResponse.ApiVersion(
                        api_key=a.key, min_version=a.min_version, max_version=a.max_version
                    )
                    for a in APIS.values()
                ]
            )
        body = request.body
        self.requests.append(body)
        self.times.append(time.monotonic())
        R = m.AlterPartitionResponse
        if self.script:
            return R(error_code=self.script.pop(0))
        return R(
            topics=[
                R.TopicData(
                    topic_id=t.topic_id,
                    partitions=[
                        R.PartitionData(
                            partition_index=p.partition_index,
                            leader_id=body.broker_id,
                            leader_epoch=p.leader_epoch,
                            isr=[s.broker_id for s in p.new_isr_with_epochs],
                            partition_epoch=p.partition_epoch + 1,
                        )
                        for p in t.partitions
                    ],
                )
                for t in body.topics
            ]
        )


def cache_naming(controller_id, port):
    cache = MetadataCache()
    cache.controller_id = controller_id
    cache._brokers = {
        controller_id: LiveBroker(
            controller_id, (BrokerEndpoint("PLAINTEXT", "127.0.0.1", port),), None, 1
        )
    }
    return cache


async def run_manager(controller, cache_for_port, faults=None, wait_s=2.0):
    server = await asyncio.start_server(controller.serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    manager = AlterPartitionManager(
        broker_id=1,
        broker_epoch=lambda: 501,
        metadata_cache=cache_for_port(port),
        request_timeout_ms=2000,
        **({"faults": faults} if faults else {}),
    )
    manager.start()
    answers = []
    try:
        assert manager.submit(item(0, answers))
        deadline = time.monotonic() + wait_s
        while not answers and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        return manager, answers
    finally:
        await manager.stop()
        server.close()


def test_top_level_errors_are_retried_after_a_back_off():
    controller = Controller([ErrorCode.NOT_CONTROLLER, ErrorCode.STALE_BROKER_EPOCH])
    manager, answers = asyncio.run(run_manager(controller, lambda port: cache_naming(100, port)))
    assert [a.error for a in answers] == [ErrorCode.NONE]
    assert answers[0].isr == (1, 2) and answers[0].partition_epoch == 8
    assert len(controller.requests) == 3 and manager.requests_sent == 3
    gaps = [b - a for a, b in zip(controller.times, controller.times[1:], strict=False)]
    assert all(gap >= 0.045 for gap in gaps)
    assert all(r.broker_epoch == 501 for r in controller.requests)


def test_without_a_known_controller_the_change_waits():
    controller = Controller([])
    manager, answers = asyncio.run(
        run_manager(controller, lambda port: MetadataCache(), wait_s=0.2)
    )
    assert answers == [] and controller.requests == []


def test_a_dropped_request_is_sent_again(tmp_path):
    path = tmp_path / "faults.json"
    FaultRules.write(path, [{"api": "ALTER_PARTITION", "source": 1, "action": "drop", "count": 1}])
    controller = Controller([])
    faults = FaultInjector(path)
    manager, answers = asyncio.run(
        run_manager(controller, lambda port: cache_naming(100, port), faults)
    )
    assert [a.error for a in answers] == [ErrorCode.NONE]
    assert len(controller.requests) == 1 and manager.requests_sent == 1
