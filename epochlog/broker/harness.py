"""Running a broker without ZooKeeper, and talking to it as the controller would.

For tests and benchmarks. `BrokerThread` runs a `Broker` on its own event loop (uvloop when
available) in a background thread, so blocking clients (confluent-kafka, kafka-python, kcat)
can use it from the calling thread. `RawClient` is a blocking socket client speaking our codec:
it sends any request and reads the response, or raw bytes for bad-input tests.
`become_leader` sends what a controller sends when it creates a topic: UpdateMetadata (live
brokers, partition states, topic id) and LeaderAndIsr naming this broker leader of every
partition, each carrying the broker's epoch.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
import uuid
from collections.abc import Callable, Coroutine, Mapping
from concurrent.futures import Future
from typing import Any, TypeVar

from epochlog.broker.broker import Broker
from epochlog.broker.eventloop import loop_factory
from epochlog.broker.transmit import SendMode
from epochlog.config.broker import BrokerConfig
from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey, decode_response, encode_request
from epochlog.protocol.codec import Message

T = TypeVar("T")

LEADER_AND_ISR_VERSION = 6
UPDATE_METADATA_VERSION = 7


class BrokerThread:
    """A broker on a background event loop. `start()` returns once it serves."""

    def __init__(
        self,
        config: BrokerConfig | Mapping[str, Any],
        *,
        new_loop: Callable[[], asyncio.AbstractEventLoop] | None = None,
        **broker_kwargs: Any,
    ) -> None:
        self.config = config if isinstance(config, BrokerConfig) else BrokerConfig.from_dict(config)
        self._new_loop = new_loop or loop_factory()
        self._kwargs = broker_kwargs
        self.broker: Broker | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def start(self, timeout: float = 30.0) -> BrokerThread:
        ready: Future[None] = Future()
        self.loop = self._new_loop()

        def run() -> None:
            assert self.loop is not None
            asyncio.set_event_loop(self.loop)
            try:
                self.broker = Broker(self.config, **self._kwargs)
                self.loop.run_until_complete(self.broker.start())
            except BaseException as exc:
                ready.set_exception(exc)
                self.loop.close()
                return
            ready.set_result(None)
            self.loop.run_forever()
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            self.loop.close()

        self._thread = threading.Thread(target=run, name=f"broker-{self.config.broker_id}")
        self._thread.daemon = True
        self._thread.start()
        ready.result(timeout)
        return self

    def call(self, coro: Coroutine[Any, Any, T], timeout: float = 30.0) -> T:
        assert self.loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def run(self, fn: Any, *args: Any, timeout: float = 30.0) -> Any:
        """Call `fn(*args)` on the broker's loop (the broker's state is not thread-safe)."""

        async def invoke() -> Any:
            return fn(*args)

        return self.call(invoke(), timeout)

    def stop(self, timeout: float = 30.0) -> None:
        if self.loop is None or self._thread is None or self.broker is None:
            return
        self.call(self.broker.stop(), timeout)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout)
        self._thread = None

    @property
    def port(self) -> int:
        assert self.broker is not None
        return self.broker.port

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"


class RawClient:
    """A blocking Kafka-protocol socket client (one request at a time)."""

    def __init__(self, host: str, port: int, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._correlation = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send_bytes(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_frame(self) -> bytes:
        """One response frame without its size prefix; raises ConnectionError on close."""
        (size,) = struct.unpack(">i", self._read_exactly(4))
        return self._read_exactly(size)

    def _read_exactly(self, n: int) -> bytes:
        parts = []
        while n:
            chunk = self.sock.recv(min(n, 1 << 20))
            if not chunk:
                raise ConnectionError("connection closed by the broker")
            parts.append(chunk)
            n -= len(chunk)
        return b"".join(parts)

    def is_closed(self, timeout: float = 5.0) -> bool:
        """True if the broker closes the connection within `timeout` (nothing else arrives)."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False

    def request(
        self, api_key: int, version: int, body: Message, client_id: str | None = "raw"
    ) -> Any:
        self._correlation += 1
        self.send_bytes(encode_request(api_key, version, self._correlation, client_id, body))
        correlation, response = decode_response(api_key, version, self.read_frame())
        if correlation != self._correlation:
            raise AssertionError(f"correlation {correlation}, expected {self._correlation}")
        return response

    def send_only(self, api_key: int, version: int, body: Message) -> None:
        """A request without a response (Produce acks=0)."""
        self._correlation += 1
        self.send_bytes(encode_request(api_key, version, self._correlation, "raw", body))


def update_metadata_request(
    *,
    brokers: Mapping[int, tuple[str, int]],
    topic: str,
    topic_id: uuid.UUID,
    assignment: Mapping[int, list[int]],
    leader_epoch: int,
    controller_id: int,
    controller_epoch: int,
    broker_epoch: int = -1,
    broker_epochs: Mapping[int, int] | None = None,
) -> Any:
    R = m.UpdateMetadataRequest
    return R(
        controller_id=controller_id,
        controller_epoch=controller_epoch,
        broker_epoch=broker_epoch,
        topic_states=[
            R.UpdateMetadataTopicState(
                topic_name=topic,
                topic_id=topic_id,
                partition_states=[
                    R.UpdateMetadataPartitionState(
                        partition_index=p,
                        controller_epoch=controller_epoch,
                        leader=replicas[0],
                        leader_epoch=leader_epoch,
                        isr=list(replicas),
                        zk_version=0,
                        replicas=list(replicas),
                    )
                    for p, replicas in sorted(assignment.items())
                ],
            )
        ],
        live_brokers=[
            R.UpdateMetadataBroker(
                id=broker_id,
                endpoints=[
                    R.UpdateMetadataEndpoint(
                        port=port, host=host, listener="PLAINTEXT", security_protocol=0
                    )
                ],
                rack=None,
                broker_epoch=(broker_epochs or {}).get(broker_id, -1),
            )
            for broker_id, (host, port) in sorted(brokers.items())
        ],
    )


def leader_and_isr_request(
    *,
    topic: str,
    topic_id: uuid.UUID,
    assignment: Mapping[int, list[int]],
    leader_epoch: int,
    controller_id: int,
    controller_epoch: int,
    broker_epoch: int = -1,
    brokers: Mapping[int, tuple[str, int]] | None = None,
) -> Any:
    R = m.LeaderAndIsrRequest
    return R(
        controller_id=controller_id,
        controller_epoch=controller_epoch,
        broker_epoch=broker_epoch,
        type=0,
        topic_states=[
            R.LeaderAndIsrTopicState(
                topic_name=topic,
                topic_id=topic_id,
                partition_states=[
                    R.LeaderAndIsrPartitionState(
                        partition_index=p,
                        controller_epoch=controller_epoch,
                        leader=replicas[0],
                        leader_epoch=leader_epoch,
                        isr=list(replicas),
                        partition_epoch=0,
                        replicas=list(replicas),
                        is_new=True,
                    )
                    for p, replicas in sorted(assignment.items())
                ],
            )
        ],
        live_leaders=[
            R.LeaderAndIsrLiveLeader(broker_id=b, host_name=h, port=port)
            for b, (h, port) in sorted((brokers or {}).items())
        ],
    )


def become_leader(
    client: RawClient,
    *,
    broker_id: int,
    port: int,
    topic: str,
    partitions: int = 1,
    topic_id: uuid.UUID | None = None,
    leader_epoch: int = 0,
    controller_epoch: int = 1,
    broker_epoch: int = -1,
) -> tuple[uuid.UUID, Any, Any]:
    """Make the broker leader (ISR = itself) of `partitions` partitions of `topic`.
    Returns (topic id, UpdateMetadata response, LeaderAndIsr response)."""
    topic_id = topic_id or uuid.uuid4()
    brokers = {broker_id: ("127.0.0.1", port)}
    assignment = {p: [broker_id] for p in range(partitions)}
    common = dict(
        topic=topic,
        topic_id=topic_id,
        assignment=assignment,
        leader_epoch=leader_epoch,
        controller_id=broker_id,
        controller_epoch=controller_epoch,
        broker_epoch=broker_epoch,
    )
    update = client.request(
        ApiKey.UPDATE_METADATA,
        UPDATE_METADATA_VERSION,
        update_metadata_request(brokers=brokers, **common),  # type: ignore[arg-type]
    )
    leader = client.request(
        ApiKey.LEADER_AND_ISR,
        LEADER_AND_ISR_VERSION,
        leader_and_isr_request(brokers=brokers, **common),  # type: ignore[arg-type]
    )
    return topic_id, update, leader


def main(argv: list[str] | None = None) -> int:
    """`python -m epochlog.broker.harness [--loop=asyncio] [--send-mode=copy] key=value ...`:
    one broker without ZooKeeper, in the foreground, until SIGTERM or SIGINT. Prints
    `PORT <port>` once it serves (tests that kill a broker process with SIGKILL start it this
    way; the options select the loop and the sendfile path for measurements)."""
    import logging
    import signal
    import sys

    from epochlog.broker.eventloop import run

    args = sys.argv[1:] if argv is None else argv
    options = dict(arg[2:].split("=", 1) for arg in args if arg.startswith("--"))
    values = dict(arg.split("=", 1) for arg in args if not arg.startswith("--"))
    values.setdefault("zookeeper.connect", "unused:2181")
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    send_mode = SendMode(options.get("send-mode", SendMode.DIRECT.value))

    async def serve() -> None:
        broker = Broker(BrokerConfig.from_dict(values), send_mode=send_mode)
        await broker.start()
        print(f"PORT {broker.port}", flush=True)
        stopped = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stopped.set)
        await stopped.wait()
        await broker.stop()

    if options.get("loop") == "asyncio":
        asyncio.run(serve())
    else:
        run(serve())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
