"""Several in-process brokers without ZooKeeper, with the caller playing the controller: the
harness of the replication tests (see `harness` for one broker).

`ReplicationCluster` starts `BrokerThread`s with broker epochs of its choosing and a
`FakeController`: a small asyncio server (own thread) that answers ApiVersions and AlterPartition
(accepting every change with partition epoch + 1, or answering INELIGIBLE_REPLICA while
`ineligible` is set) and records each AlterPartition it gets. UpdateMetadata names the fake as
the controller and lists it among the live brokers, so a leader's AlterPartitionManager finds it
in its metadata cache. The test sends LeaderAndIsr itself, with the leader, epochs and ISR it
wants each broker to see.
"""

from __future__ import annotations

import asyncio
import struct
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from epochlog.broker.collaborators import BrokerEpochHolder
from epochlog.broker.harness import BrokerThread, RawClient
from epochlog.faults import FaultRules
from epochlog.protocol import messages as m
from epochlog.protocol.api import APIS, ApiKey, decode_request, encode_response
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.records import RecordBatchBuilder

CONTROLLER_ID = 100
CONTROLLER_EPOCH = 1
TOPIC = "r"


class FakeController:
    def __init__(self, broker_id: int = CONTROLLER_ID) -> None:
        self.broker_id = broker_id
        self.requests: list[Any] = []
        self.ineligible = False
        self.port = 0
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._server: asyncio.AbstractServer | None = None

    def start(self) -> FakeController:
        self._thread.start()

        async def listen() -> None:
            self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
            self.port = self._server.sockets[0].getsockname()[1]

        asyncio.run_coroutine_threadsafe(listen(), self.loop).result(10)
        return self

    def stop(self) -> None:
        async def close() -> None:
            if self._server is not None:
                self._server.close()

        asyncio.run_coroutine_threadsafe(close(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)

    def isrs_with_epochs(self) -> list[list[tuple[int, int]]]:
        """NewIsrWithEpochs of every partition of every request, in order."""
        return [
            [(s.broker_id, s.broker_epoch) for s in p.new_isr_with_epochs]
            for body in list(self.requests)
            for t in body.topics
            for p in t.partitions
        ]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                request = decode_request(await reader.readexactly(size))
                body = self._answer(request.api_key, request.body)
                writer.write(
                    encode_response(
                        request.api_key, request.api_version, request.correlation_id, body
                    )
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    def _answer(self, api_key: int, body: Any) -> Any:
        if api_key == ApiKey.API_VERSIONS:
            return m.ApiVersionsResponse(
                api_keys=[
                    m.ApiVersionsResponse.ApiVersion(
                        api_key=a.key, min_version=a.min_version, max_version=a.max_version
                    )
                    for a in APIS.values()
                ]
            )
        if api_key != ApiKey.ALTER_PARTITION:
            return APIS[api_key].response()
        self.requests.append(body)
        R = m.AlterPartitionResponse
        topics = []
        for topic in body.topics:
            partitions = []
            for p in topic.partitions:
                if self.ineligible:
                    partitions.append(
                        R.PartitionData(
                            partition_index=p.partition_index,
                            error_code=ErrorCode.INELIGIBLE_REPLICA,
                            leader_id=-1,
                            leader_epoch=-1,
                            partition_epoch=-1,
                        )
                    )
                else:
                    partitions.append(
                        R.PartitionData(
                            partition_index=p.partition_index,
                            error_code=ErrorCode.NONE,
                            leader_id=body.broker_id,
                            leader_epoch=p.leader_epoch,
                            isr=[s.broker_id for s in p.new_isr_with_epochs],
                            partition_epoch=p.partition_epoch + 1,
                        )
                    )
            topics.append(R.TopicData(topic_id=topic.topic_id, partitions=partitions))
        return R(error_code=ErrorCode.NONE, topics=topics)


def wait_until(condition: Callable[[], Any], timeout: float = 10.0, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or condition}")
        time.sleep(0.02)


def batch(n: int = 2, tag: bytes = b"v") -> bytes:
    builder = RecordBatchBuilder()
    for i in range(n):
        builder.append(1_700_000_000_000 + i, b"k%d" % i, tag + b"%d" % i)
    return builder.build()


class ReplicationCluster:
    def __init__(self, root: Path, broker_ids: tuple[int, ...] = (1, 2), **config: Any) -> None:
        self.root = root
        self.faults_file = root / "faults.json"
        FaultRules.write(self.faults_file, [])
        self.config = config
        self.controller = FakeController().start()
        self.topic_id = uuid.uuid4()
        self.epochs = {b: 1000 + b for b in broker_ids}
        self.brokers: dict[int, BrokerThread] = {}
        for broker_id in broker_ids:
            self.start_broker(broker_id)

    # ------------------------------------------------------------------------ brokers

    def start_broker(self, broker_id: int, **overrides: Any) -> BrokerThread:
        values = {
            "broker.id": broker_id,
            "zookeeper.connect": "unused:2181",
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(self.root / f"broker-{broker_id}"),
            "replica.fetch.wait.max.ms": 100,
            "replica.fetch.backoff.ms": 50,
            "epochlog.test.faults.file": str(self.faults_file),
            **self.config,
            **overrides,
        }
        thread = BrokerThread(
            values, epoch_holder=BrokerEpochHolder(self.epochs[broker_id])
        ).start()
        self.brokers[broker_id] = thread
        return thread

    def stop_broker(self, broker_id: int) -> None:
        self.brokers.pop(broker_id).stop()

    def close(self) -> None:
        for broker_id in list(self.brokers):
            self.stop_broker(broker_id)
        self.controller.stop()

    def client(self, broker_id: int) -> RawClient:
        return RawClient("127.0.0.1", self.brokers[broker_id].port)

    def faults(self, rules: list[dict[str, Any]]) -> None:
        FaultRules.write(self.faults_file, rules)

    # ---------------------------------------------------------------- controller's side

    def update_metadata(
        self,
        to: int,
        *,
        leader: int,
        leader_epoch: int,
        isr: list[int],
        replicas: list[int],
        epochs: dict[int, int] | None = None,
    ) -> None:
        R = m.UpdateMetadataRequest
        epochs = {**self.epochs, **(epochs or {})}
        live = {b: ("127.0.0.1", t.port) for b, t in self.brokers.items()}
        live[CONTROLLER_ID] = ("127.0.0.1", self.controller.port)
        body = R(
            controller_id=CONTROLLER_ID,
            controller_epoch=CONTROLLER_EPOCH,
            broker_epoch=self.epochs[to],
            topic_states=[
                R.UpdateMetadataTopicState(
                    topic_name=TOPIC,
                    topic_id=self.topic_id,
                    partition_states=[
                        R.UpdateMetadataPartitionState(
                            partition_index=0,
                            controller_epoch=CONTROLLER_EPOCH,
                            leader=leader,
                            leader_epoch=leader_epoch,
                            isr=isr,
                            zk_version=0,
                            replicas=replicas,
                        )
                    ],
                )
            ],
            live_brokers=[
                R.UpdateMetadataBroker(
                    id=b,
                    endpoints=[
                        R.UpdateMetadataEndpoint(
                            port=port, host=host, listener="PLAINTEXT", security_protocol=0
                        )
                    ],
                    broker_epoch=epochs.get(b, -1),
                )
                for b, (host, port) in sorted(live.items())
            ],
        )
        with self.client(to) as client:
            response = client.request(ApiKey.UPDATE_METADATA, 7, body)
        assert response.error_code == ErrorCode.NONE

    def leader_and_isr(
        self,
        to: int,
        *,
        leader: int,
        leader_epoch: int,
        isr: list[int],
        replicas: list[int],
        partition_epoch: int = 0,
        metadata: bool = True,
    ) -> None:
        """UpdateMetadata (unless `metadata` is False) and LeaderAndIsr to broker `to`."""
        if metadata:
            self.update_metadata(
                to, leader=leader, leader_epoch=leader_epoch, isr=isr, replicas=replicas
            )
        R = m.LeaderAndIsrRequest
        body = R(
            controller_id=CONTROLLER_ID,
            controller_epoch=CONTROLLER_EPOCH,
            broker_epoch=self.epochs[to],
            type=0,
            topic_states=[
                R.LeaderAndIsrTopicState(
                    topic_name=TOPIC,
                    topic_id=self.topic_id,
                    partition_states=[
                        R.LeaderAndIsrPartitionState(
                            partition_index=0,
                            controller_epoch=CONTROLLER_EPOCH,
                            leader=leader,
                            leader_epoch=leader_epoch,
                            isr=isr,
                            partition_epoch=partition_epoch,
                            replicas=replicas,
                            is_new=False,
                        )
                    ],
                )
            ],
            live_leaders=[
                R.LeaderAndIsrLiveLeader(
                    broker_id=leader, host_name="127.0.0.1", port=self.brokers[leader].port
                )
            ]
            if leader in self.brokers
            else [],
        )
        with self.client(to) as client:
            response = client.request(ApiKey.LEADER_AND_ISR, 6, body)
        assert response.error_code == ErrorCode.NONE
        codes = [p.error_code for t in response.topics for p in t.partition_errors]
        assert codes == [ErrorCode.NONE], codes

    def assign(
        self, *, leader: int, leader_epoch: int, isr: list[int], replicas: list[int]
    ) -> None:
        """LeaderAndIsr to every running replica (the leader first)."""
        for broker_id in sorted(replicas, key=lambda b: b != leader):
            if broker_id in self.brokers:
                self.leader_and_isr(
                    broker_id, leader=leader, leader_epoch=leader_epoch, isr=isr, replicas=replicas
                )

    # ------------------------------------------------------------------------- reading

    def partition(self, broker_id: int, attribute: Callable[[Any], Any]) -> Any:
        """`attribute(partition)` evaluated on the broker's loop."""
        thread = self.brokers[broker_id]
        assert thread.broker is not None
        rm = thread.broker.replica_manager
        return thread.run(lambda: attribute(rm.get_partition(TOPIC, 0)))

    def leo(self, broker_id: int) -> int:
        return self.partition(broker_id, lambda p: p.log_end_offset)

    def hw(self, broker_id: int) -> int:
        return self.partition(broker_id, lambda p: p.high_watermark)

    def isr(self, broker_id: int) -> tuple[int, ...]:
        return self.partition(broker_id, lambda p: p.isr)

    def maximal_isr(self, broker_id: int) -> tuple[int, ...]:
        return self.partition(broker_id, lambda p: p.maximal_isr)

    def log_bytes(self, broker_id: int) -> bytes:
        directory = self.root / f"broker-{broker_id}" / f"{TOPIC}-0"
        return b"".join(p.read_bytes() for p in sorted(directory.glob("*.log")))

    def produce(
        self, broker_id: int, records: bytes, acks: int = -1, timeout_ms: int = 10000
    ) -> Any:
        P = m.ProduceRequest
        body = P(
            acks=acks,
            timeout_ms=timeout_ms,
            topic_data=[
                P.TopicProduceData(
                    name=TOPIC,
                    partition_data=[P.PartitionProduceData(index=0, records=records)],
                )
            ],
        )
        with RawClient("127.0.0.1", self.brokers[broker_id].port, timeout=30) as client:
            response = client.request(ApiKey.PRODUCE, 9, body)
        return response.responses[0].partition_responses[0]
