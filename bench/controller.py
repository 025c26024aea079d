"""Controller benchmark: how long until every partition a lost broker led has a serving leader.

Each measurement gets a fresh local cluster: real ZooKeeper, `--brokers` real broker processes,
`zookeeper.session.timeout.ms` = `--session-timeout-ms`, automatic leader rebalance off, and
`replica.lag.time.max.ms` = `--replica-lag-ms` (Kafka's default, 30 s; until the broker's stalls
are fixed, a leader applying tens of thousands of new partitions can answer no fetch for longer
than that and shrink every ISR during setup: the table says whether the ISRs were full right after
the creation, and `--replica-lag-ms 300000` hides it; the controller drops dead brokers from ISRs
itself, so the handling measured does not depend on it). Topics of `--partitions-per-topic`
partitions, replication factor 2, get explicit replica assignments that make one broker lead
exactly N partitions. The controller hosts no replica, so its process does only controller work
(and applies its own UpdateMetadata). Before the event the bench waits until ZooKeeper holds every
partition with its preferred leader and a full ISR, the leader accepts a produce for a sample of
them, and the brokers' CPU use has settled (with replication, followers' fetches keep it above
zero).

- failure: kill -9 of the broker leading N partitions (followers on a second broker). The
  controller learns of it only when the broker's ZooKeeper session expires: *detection* is
  kill -> `/brokers/ids/<victim>` deleted (the session timeout, ZooKeeper's tick granularity),
  *handling* is that deletion -> every partition it led has its new leader written in ZooKeeper
  and the new leader accepts produce requests (acks=1) for a sample of them.
- shutdown: SIGTERM to that broker, which runs Kafka's controlled shutdown (ControlledShutdown
  to the controller, which moves the leaderships). *handling* is signal -> all moved and serving.
- failover: kill -9 of the controller, while two other brokers lead and follow N partitions.
  *detection* is kill -> `/controller` deleted (session expiry); *handling* is that deletion ->
  a new controller elected, loaded, and every live broker has applied its full LeaderAndIsr and
  UpdateMetadata (its Metadata answer names the new controller, which it learns from the
  UpdateMetadata sent after the LeaderAndIsr), with every partition's leader still live.

"Moved in ZooKeeper" uses data watches on every affected partition-state znode for progress and
the znodes' mtime (the ZooKeeper server's clock, the same host's) for the exact time of the write.
Serving uses one Produce request per round for the sample partitions not yet accepted, sent to
the expected new leader over a connection opened before the event.

Anchors: Apache Kafka's ZooKeeper controller took about 2 minutes per broker with about 5,000
partitions per broker in a rolling bounce (KAFKA-3436, literature). Measured in the same run:
the ZooKeeper floor, i.e. a plain kazoo client writing N partition-state-sized znodes in multis of
1,000 conditional setData ops (as the controller's fenced writer batches them), and reading N
with kazoo's pipelined gets and with the bulk read a new controller loads them with.
Targets (issue): controlled shutdown of a broker leading 5,000 partitions < 5 s; failure
handling with 10,000 partitions < 3 s; controller failover with 10,000 partitions < 5 s.

The peak resident memory (VmHWM) of every broker process is read just before the event and at
its end, and the largest is reported (issue 20's target: under 2 GiB with 100,000 partitions).

`--controller-alone` measures the controller by itself where the brokers cannot follow (today
a broker creating 100,000 logs takes far longer than the measurement: its log manager picks a log
dir by counting every log it has, per new log): real ZooKeeper, the real `Controller` in this
process, and three stand-in brokers on real sockets that read each control request's header and
answer it with success (so their cost is not the controller's). Partitions are created with
CreateTopics to the controller (explicit assignments: broker 2 leads, broker 3 follows).
*failure*: broker 2's session is closed (its registration goes at once: no detection time) ->
every state written and broker 3 has received its LeaderAndIsr and every live broker its
UpdateMetadata; *shutdown*: ControlledShutdown for broker 2 -> the answer (the controller answers
once the brokers answered its requests); *failover*: controller 1's session is closed -> broker
3 elected, loaded, and brokers 2 and 3 have received its LeaderAndIsr and UpdateMetadata. RSS is
this process's (the controller's context and the stand-ins).

Run: `.venv/bin/python bench/controller.py [--partitions 1000,5000,10000] [--scenarios
failure,shutdown,failover] [--failover-sizes 10000] [--session-timeout-ms 3000] [--profile DIR]`.
`--profile DIR` samples with py-spy, during each measured event (not the setup), the controller
and the new leader (failover: both surviving brokers, one of which becomes the controller) and
prints their hotspots; profiled runs are slower than unprofiled ones. `--keep DIR` keeps each
cluster's directory (broker output with millisecond timestamps) for a closer look.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from kazoo.client import KazooClient  # noqa: E402
from kazoo.exceptions import NodeExistsError  # noqa: E402
from kazoo.protocol.states import EventType  # noqa: E402
from profiling import PySpy, print_hotspots  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.progress import (  # noqa: E402
    BarColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table  # noqa: E402
from rich.text import Text  # noqa: E402

from epochlog.client import Admin, BrokerConnection, NewTopic  # noqa: E402
from epochlog.protocol import messages as m  # noqa: E402
from epochlog.protocol.api import ApiKey  # noqa: E402
from epochlog.protocol.errors import ErrorCode  # noqa: E402
from epochlog.protocol.records import RecordBatchBuilder  # noqa: E402
from epochlog.testing.cluster import LocalCluster  # noqa: E402
from epochlog.zk import controller_zk as zkc  # noqa: E402
from epochlog.zk.bulk_read import get_many  # noqa: E402
from epochlog.zk.session import close_client, connect  # noqa: E402
from epochlog.zk.znodes import (  # noqa: E402
    BROKER_IDS_PATH,
    CONTROLLER_PATH,
    PartitionState,
    decode_partition_state,
    encode_partition_state,
    partition_state_path,
)

console = Console(width=140)
TopicPartition = tuple[str, int]

SCENARIOS = ("failure", "shutdown", "failover")
TARGETS_S = {
    ("shutdown", 5000): 5.0,
    ("failure", 10000): 3.0,
    ("failover", 10000): 5.0,
    # issue 20: 3 brokers, RF 2, 100,000 partitions
    ("shutdown", 100000): 5.0,
    ("failure", 100000): 5.0,
    ("failover", 100000): 5.0,
}
RSS_TARGET_MIB = 2048
ANCHOR = (
    "Apache Kafka's ZooKeeper controller: about 2 minutes per broker with about 5,000 "
    "partitions per broker in a rolling bounce (KAFKA-3436)"
)
ANCHOR_SHUTDOWN_S = 120.0
PROBE_INTERVAL_S = 0.01
ALONE_SESSION_TIMEOUT_MS = 18000  # zookeeper.session.timeout.ms's default
PROBE_TIMEOUT_MS = 900_000


# --------------------------------------------------------------------------- small helpers


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, in seconds (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_settled(
    pids: Iterable[int], window_s: float = 1.0, timeout_s: float = 180.0
) -> tuple[float, float]:
    """Until the processes' CPU use has settled after topic creation: below 5% of a core, or
    steady (three 1-second windows within 5% of a core of each other; with replication the
    followers' fetches keep the brokers busy at a constant rate). Returns (seconds waited,
    the settled rate in cores), so the measured event starts from the cluster's steady state."""
    pids = list(pids)
    start = time.monotonic()
    rates: list[float] = []
    while time.monotonic() - start < timeout_s:
        before = sum(cpu_seconds(p) for p in pids)
        time.sleep(window_s)
        rates.append((sum(cpu_seconds(p) for p in pids) - before) / window_s)
        last = rates[-3:]
        if rates[-1] < 0.05 or (len(last) == 3 and max(last) - min(last) < 0.05):
            break
    return time.monotonic() - start, rates[-1] if rates else 0.0


def peak_rss_mib(pid: int) -> float:
    """The process's peak resident set (VmHWM) in MiB, 0 when it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def peak_rss_of(cluster: LocalCluster) -> dict[int, float]:
    return {b: peak_rss_mib(broker.pid) for b, broker in cluster.brokers.items() if broker.pid}


def sample_of(partitions: list[TopicPartition], k: int) -> list[TopicPartition]:
    """k partitions spread evenly over the list, the first and the last included."""
    if len(partitions) <= k:
        return list(partitions)
    step = (len(partitions) - 1) / (k - 1)
    return sorted({partitions[round(i * step)] for i in range(k)})


def code_version() -> str:
    """The commit measured, and how many files under epochlog/ differ from it."""
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--", "epochlog"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        return "unknown commit"
    return f"commit {head}" + (f" + {len(dirty)} changed files in epochlog/" if dirty else "")


class CountColumn(ProgressColumn):
    def render(self, task: Task) -> Text:
        if task.total is None:
            return Text("")
        return Text(f"{int(task.completed):,}/{int(task.total):,}")


def fmt_s(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


# --------------------------------------------------------------------------- ZooKeeper side


class ZkObserver:
    """Watches on the znodes an event changes, fired in kazoo's callback thread."""

    def __init__(self, zk: KazooClient) -> None:
        self.zk = zk
        self.lock = threading.Lock()
        self.fired: dict[str, float] = {}  # state path -> wall time of its first change event
        self.deleted: dict[str, float] = {}  # node path -> wall time of its deletion
        self.created: dict[str, float] = {}

    def _on_state(self, event: Any) -> None:
        now = time.time()
        with self.lock:
            self.fired.setdefault(event.path, now)

    def watch_states(self, paths: Iterable[str]) -> None:
        pending = [self.zk.get_async(p, watch=self._on_state) for p in paths]
        for result in pending:
            result.get(timeout=120)

    def watch_node(self, path: str) -> None:
        """Record the node's deletion and its next creation."""

        def on_event(event: Any) -> None:
            now = time.time()
            with self.lock:
                if event.type == EventType.DELETED:
                    self.deleted.setdefault(path, now)
                    self.zk.exists_async(path, watch=on_event)
                elif event.type == EventType.CREATED:
                    self.created.setdefault(path, now)

        self.zk.exists_async(path, watch=on_event).get(timeout=30)

    def reread(self, paths: list[str]) -> dict[str, tuple[PartitionState, float]]:
        """States with their mtime (s), re-arming each watch in the same read (no lost change)."""
        pending = [(p, self.zk.get_async(p, watch=self._on_state)) for p in paths]
        result = {}
        for path, fetch in pending:
            data, stat = fetch.get(timeout=120)
            result[path] = (decode_partition_state(data, path), stat.mtime / 1000)
        return result


def read_states(zk: KazooClient, tps: list[TopicPartition]) -> dict[TopicPartition, Any]:
    return zkc.read_partition_states(zk, tps)


def zk_floor(zk: KazooClient, n: int) -> tuple[float, float, float]:
    """Seconds for a plain kazoo client to write N state-sized znodes in multis of 1,000
    conditional setData ops plus a version check (sequentially, as the controller's fenced
    writer does), to read them back with kazoo's pipelined gets, and with the bulk read a new
    controller loads them with (`epochlog.zk.bulk_read`). Scratch znodes under /bench-floor,
    deleted afterwards."""
    root = "/bench-floor"
    state = encode_partition_state(
        PartitionState(leader=2, leader_epoch=1, isr=(2,), controller_epoch=1)
    )
    with contextlib.suppress(NodeExistsError):
        zk.create(root, b"")
    paths = [f"{root}/p{i}" for i in range(n)]
    pending = [zk.create_async(p, state) for p in paths]
    for result in pending:
        with contextlib.suppress(NodeExistsError):
            result.get(timeout=60)
    start = time.perf_counter()
    for i in range(0, n, 1000):
        tx = zk.transaction()
        tx.check(root, 0)
        for path in paths[i : i + 1000]:
            tx.set_data(path, state, version=0)
        results = tx.commit()
        assert not any(isinstance(r, Exception) for r in results), results[:3]
    write_s = time.perf_counter() - start
    start = time.perf_counter()
    reads = [zk.get_async(p) for p in paths]
    for result in reads:
        result.get(timeout=60)
    read_s = time.perf_counter() - start
    start = time.perf_counter()
    assert all(found is not None for found in get_many(zk, paths))
    bulk_s = time.perf_counter() - start
    deletes = [zk.delete_async(p) for p in paths]
    for result in deletes:
        result.get(timeout=60)
    zk.delete(root)
    return write_s, read_s, bulk_s


# --------------------------------------------------------------------------- broker probes


class ProduceProbe:
    """Produce (acks=1) to one broker for the sample partitions it has not accepted yet."""

    def __init__(self, host: str, port: int, node_id: int, sample: list[TopicPartition]) -> None:
        self.conn = BrokerConnection(
            host,
            port,
            node_id=node_id,
            client_id="bench-controller-probe",
            # a broker applying a large LeaderAndIsr answers nothing else until it is done; the
            # probe waits for it rather than time out (its answer then marks the moment)
            request_timeout_ms=PROBE_TIMEOUT_MS,
        )
        self.pending = set(sample)
        self.total = len(sample)
        self.served: dict[TopicPartition, float] = {}
        self.last_error = ""
        builder = RecordBatchBuilder()
        builder.append(int(time.time() * 1000), None, b"controller-bench probe")
        self.records = builder.build()

    async def connect(self) -> None:
        await asyncio.wait_for(self.conn.connect(), PROBE_TIMEOUT_MS / 1000)

    async def close(self) -> None:
        await self.conn.close()

    @property
    def done(self) -> bool:
        return not self.pending

    async def round(self) -> None:
        if not self.pending:
            return
        by_topic: dict[str, list[Any]] = {}
        for topic, partition in sorted(self.pending):
            by_topic.setdefault(topic, []).append(
                m.ProduceRequest.PartitionProduceData(index=partition, records=self.records)
            )
        request = m.ProduceRequest(
            transactional_id=None,
            acks=1,
            timeout_ms=10000,
            topic_data=[
                m.ProduceRequest.TopicProduceData(name=t, partition_data=p)
                for t, p in by_topic.items()
            ],
        )
        response = await self.conn.send(request, api_key=ApiKey.PRODUCE)
        now = time.time()
        for t in response.responses:
            for p in t.partition_responses:
                if p.error_code == ErrorCode.NONE:
                    self.served[(t.name, p.index)] = now
                    self.pending.discard((t.name, p.index))
                else:
                    self.last_error = ErrorCode.of(p.error_code).name


async def serve_until_done(probe: ProduceProbe, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not probe.done:
        await probe.round()
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"{len(probe.pending)} of {probe.total} sample partitions not served by broker "
                f"{probe.conn.node_id} after {timeout_s:.0f} s (last error {probe.last_error})"
            )
        await asyncio.sleep(0.05)


async def controller_seen_by(conn: BrokerConnection) -> int:
    """The controller id in the broker's Metadata answer (set by UpdateMetadata)."""
    response = await conn.send(m.MetadataRequest(topics=[]), api_key=ApiKey.METADATA)
    return int(response.controller_id)


# --------------------------------------------------------------------------- one measurement


@dataclass
class Result:
    scenario: str
    partitions: int
    detection_s: float | None
    handling_s: float
    zk_s: float
    notes: str = ""
    profiles: dict[str, Path] = field(default_factory=dict)  # role -> py-spy raw profile
    setup_s: float = 0.0
    floor: tuple[float, float, float] | None = None
    create_s: float = 0.0  # CreateTopics of all N partitions, until the last one answered
    # no ISR shrank between creation and the event (None: no replicas, --controller-alone)
    isr_full_after_create: bool | None = True
    peak_rss_mib: dict[int, float] = field(default_factory=dict)  # broker -> VmHWM


# --------------------------------------------------------------------------- controller alone


class HeaderOnlyBroker:
    """A stand-in broker that answers every control request with success after reading only its
    header (api key, version, correlation id), and notes when each kind arrived."""

    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self.arrivals: dict[int, list[float]] = {}
        self.port = 0
        self.server: asyncio.AbstractServer | None = None

    async def start(self) -> HeaderOnlyBroker:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()

    def count(self, api_key: int) -> int:
        return len(self.arrivals.get(api_key, ()))

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        from epochlog.protocol.api import APIS, encode_response

        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                frame = await reader.readexactly(size)
                api_key, version, correlation_id = struct.unpack_from(">hhi", frame)
                self.arrivals.setdefault(api_key, []).append(time.time())
                if api_key == ApiKey.API_VERSIONS:
                    answer: Any = m.ApiVersionsResponse(
                        api_keys=[
                            m.ApiVersionsResponse.ApiVersion(
                                api_key=a.key, min_version=a.min_version, max_version=a.max_version
                            )
                            for a in APIS.values()
                        ]
                    )
                else:
                    answer = APIS[ApiKey(api_key)].response()
                writer.write(encode_response(api_key, version, correlation_id, answer))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()


def alone_topics(n: int, per_topic: int, assignment: list[int]) -> list[Any]:
    topics = []
    for index, start in enumerate(range(0, n, per_topic)):
        count = min(per_topic, n - start)
        topics.append(
            m.CreateTopicsRequest.CreatableTopic(
                name=f"bench-{index:03d}",
                num_partitions=-1,
                replication_factor=-1,
                assignments=[
                    m.CreateTopicsRequest.CreatableReplicaAssignment(
                        partition_index=p, broker_ids=list(assignment)
                    )
                    for p in range(count)
                ],
            )
        )
    return topics


async def until_true(predicate: Any, timeout_s: float, what: str) -> float:
    """Poll every PROBE_INTERVAL_S until `predicate()`; the wall time it became true."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"not done after {timeout_s:.0f} s: {what}")
        await asyncio.sleep(PROBE_INTERVAL_S)
    return time.time()


floors_done: set[int] = set()  # sizes whose ZooKeeper floor --controller-alone has measured


def run_alone(args: argparse.Namespace, scenario: str, n: int, progress: Progress) -> Result:
    """One measurement of the controller alone (see the module docstring)."""
    from epochlog.config.broker import BrokerConfig
    from epochlog.controller.controller import Controller
    from epochlog.zk.cluster import ensure_top_level_paths
    from epochlog.zk.launcher import ZooKeeperServer
    from epochlog.zk.registration import register_broker
    from epochlog.zk.znodes import BrokerRegistration, Endpoint

    tmp = tempfile.mkdtemp(prefix="epochlog-bench-controller-alone-")
    # A heap for 100,000 partitions' znodes (with 256 MiB the server's collections stalled it
    # past the sessions' heartbeats)
    server = ZooKeeperServer(Path(tmp) / "zookeeper", heap="1g")
    server.start()

    async def measure() -> Result:
        hosts = server.connect_string
        admin = await asyncio.to_thread(connect, hosts, session_timeout_ms=30000)
        await asyncio.to_thread(ensure_top_level_paths, admin)
        brokers = {b: await HeaderOnlyBroker(b).start() for b in (1, 2, 3)}
        # Kafka's default session timeout: nothing here waits for an expiry, and with 3 s a
        # controller writing 100 multis of 1,000 states lost its session (see the report)
        sessions = {
            b: await asyncio.to_thread(connect, hosts, session_timeout_ms=ALONE_SESSION_TIMEOUT_MS)
            for b in brokers
        }
        epochs = {
            b: await asyncio.to_thread(
                register_broker,
                sessions[b],
                BrokerRegistration(b, (Endpoint("PLAINTEXT", "127.0.0.1", brokers[b].port),)),
            )
            for b in brokers
        }

        def config(broker_id: int) -> BrokerConfig:
            return BrokerConfig.from_dict(
                {
                    "broker.id": broker_id,
                    "zookeeper.connect": hosts,
                    "zookeeper.session.timeout.ms": ALONE_SESSION_TIMEOUT_MS,
                    **broker_config(args),
                }
            )

        async def elect(broker_id: int) -> Controller:
            election = await asyncio.to_thread(zkc.try_elect, sessions[broker_id], broker_id)
            assert election is not None, f"broker {broker_id} not elected"
            controller = Controller(broker_id, sessions[broker_id], election, config(broker_id))
            await controller.start()
            return controller

        controllers = [await elect(1)]
        try:
            task = progress.add_task(f"  creating {n:,} partitions (controller alone)", total=n)
            started = time.monotonic()
            topics = alone_topics(n, args.partitions_per_topic, [2, 3])
            for i in range(0, len(topics), 10):
                answer = await controllers[0].create_topics(
                    m.CreateTopicsRequest(topics=topics[i : i + 10], timeout_ms=600000), 7
                )
                errors = [t for t in answer.topics if t.error_code != ErrorCode.NONE]
                if errors:
                    raise RuntimeError(f"creating {errors[0].name}: {errors[0].error_message}")
                progress.update(task, completed=min(n, (i + 10) * args.partitions_per_topic))
            create_s = time.monotonic() - started
            progress.remove_task(task)
            floor = None
            if not args.no_floor and n not in floors_done:
                floor = await asyncio.to_thread(zk_floor, admin, n)
                floors_done.add(n)
            gc_before = {b: {k: len(v) for k, v in x.arrivals.items()} for b, x in brokers.items()}

            def arrived(broker: int, api_key: int) -> bool:
                return brokers[broker].count(api_key) > gc_before[broker].get(api_key, 0)

            def first_after(broker: int, api_key: int) -> float:
                return brokers[broker].arrivals[api_key][gc_before[broker].get(api_key, 0)]

            rss = {0: peak_rss_mib(os.getpid())}
            cpu_before = cpu_seconds(os.getpid())
            profiler = None
            if args.profile is not None:
                args.profile.mkdir(parents=True, exist_ok=True)
                profiler = PySpy(os.getpid(), args.profile / f"alone-{scenario}-{n}.txt")
            t0 = time.time()
            zk_s = 0.0
            notes = ""
            if scenario == "failure":
                await asyncio.to_thread(close_client, sessions.pop(2))
                ctx = controllers[0].ctx
                done_zk = await until_true(
                    lambda: (
                        2 not in ctx.live_brokers
                        and all(s.leader == 3 for s in ctx.states.values())
                    ),
                    args.timeout,
                    "every partition led by broker 3 in the controller's context",
                )
                done = await until_true(
                    lambda: (
                        arrived(3, ApiKey.LEADER_AND_ISR)
                        and arrived(3, ApiKey.UPDATE_METADATA)
                        and arrived(1, ApiKey.UPDATE_METADATA)
                    ),
                    args.timeout,
                    "LeaderAndIsr and UpdateMetadata received",
                )
                done = max(done, first_after(3, ApiKey.LEADER_AND_ISR))
                zk_s = done_zk - t0
                notes = "broker 2 -> 3; controller 1 (alone)"
            elif scenario == "shutdown":
                error, remaining = await controllers[0].controlled_shutdown(2, epochs[2])
                done = time.time()
                zk_s = done - t0
                if error != ErrorCode.NONE or remaining:
                    raise RuntimeError(f"controlled shutdown: {error.name}, {len(remaining)} left")
                notes = "broker 2 -> 3; controller 1 (alone); handling = the answer"
            else:
                old = controllers.pop()
                await old.stop()
                await asyncio.to_thread(close_client, sessions.pop(1))
                controllers.append(await elect(3))
                elected = time.time()
                done = await until_true(
                    lambda: all(
                        arrived(b, ApiKey.LEADER_AND_ISR) and arrived(b, ApiKey.UPDATE_METADATA)
                        for b in (2, 3)
                    ),
                    args.timeout,
                    "brokers 2 and 3 told by the new controller",
                )
                zk_s = elected - t0
                notes = "controller 1 -> 3 (alone); 'of which ZK' = elected and loaded"
            profiles = {}
            if profiler is not None:
                path = profiler.stop()
                if path is not None:
                    profiles["controller (this process)"] = path
            rss[0] = max(rss[0], peak_rss_mib(os.getpid()))
            # CPU time is steadier than wall time on a shared machine: what the work costs, where
            # the wall time says how long it took beside the others' load
            notes += f"; CPU {cpu_seconds(os.getpid()) - cpu_before:.2f} s"
            return Result(
                scenario,
                n,
                None,
                done - t0,
                zk_s,
                notes,
                profiles,
                create_s,
                floor,
                create_s=create_s,
                isr_full_after_create=None,
                peak_rss_mib=rss,
            )
        finally:
            for controller in controllers:
                await controller.stop()
            for session in sessions.values():
                await asyncio.to_thread(close_client, session)
            await asyncio.to_thread(close_client, admin)
            for broker in brokers.values():
                await broker.stop()

    try:
        return asyncio.run(measure())
    finally:
        server.kill()
        shutil.rmtree(tmp, ignore_errors=True)


def broker_config(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "auto.leader.rebalance.enable": "false",
        "replica.lag.time.max.ms": args.replica_lag_ms,
    }


def create_topics(
    cluster: LocalCluster,
    assignment: list[int],
    n: int,
    per_topic: int,
    progress: Progress,
) -> list[TopicPartition]:
    """Topics bench-000, bench-001, ... of `per_topic` partitions (N in all), each assigned
    `assignment` (its first broker the preferred leader); returns every partition."""
    task = progress.add_task(f"  creating {n:,} partitions (RF {len(assignment)})", total=n)
    partitions: list[TopicPartition] = []
    with Admin(
        {"bootstrap.servers": cluster.bootstrap_servers, "default.api.timeout.ms": 600000}
    ) as admin:
        index = 0
        while len(partitions) < n:
            count = min(per_topic, n - len(partitions))
            name = f"bench-{index:03d}"
            result = admin.create_topics(
                [NewTopic(name, replica_assignment={p: assignment for p in range(count)})],
                timeout=600,
            )
            if result[name] is not None:
                raise RuntimeError(f"creating {name}: {result[name]}")
            partitions += [(name, p) for p in range(count)]
            progress.update(task, completed=len(partitions))
            index += 1
    progress.remove_task(task)
    return partitions


def wait_assigned(
    zk: KazooClient,
    partitions: list[TopicPartition],
    leader: int,
    isr: set[int],
    progress: Progress,
    timeout_s: float = 600.0,
) -> None:
    """Until ZooKeeper holds every partition with `leader` and the full ISR."""
    task = progress.add_task(
        "  waiting for leaders and full ISRs in ZooKeeper", total=len(partitions)
    )
    deadline = time.monotonic() + timeout_s
    while True:
        started = time.monotonic()
        states = read_states(zk, partitions)
        elapsed = time.monotonic() - started
        ready = sum(
            1 for v in states.values() if v.state.leader == leader and set(v.state.isr) == isr
        )
        progress.update(task, completed=ready)
        if ready == len(partitions):
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {ready} of {len(partitions)} partitions ready")
        time.sleep(max(0.5, 5 * elapsed))  # reading 10,000 znodes costs CPU the brokers need
    progress.remove_task(task)


class Bench:
    def __init__(self, args: argparse.Namespace, progress: Progress) -> None:
        self.args = args
        self.progress = progress
        self.floors: dict[int, tuple[float, float, float]] = {}
        self.setup_phases = ""
        self.create_s = 0.0
        self.isr_full_after_create = True

    def run(self, scenario: str, n: int) -> Result:
        with contextlib.ExitStack() as stack:
            if self.args.keep is not None:
                tmp = str(self.args.keep / f"{scenario}-{n}")
                shutil.rmtree(tmp, ignore_errors=True)
            else:
                tmp = stack.enter_context(
                    tempfile.TemporaryDirectory(prefix="epochlog-bench-controller-")
                )
            cluster = LocalCluster(
                tmp,
                self.args.brokers,
                broker_config=broker_config(self.args),
                zk_session_timeout_ms=self.args.session_timeout_ms,
            )
            setup = time.monotonic()
            task = self.progress.add_task(f"  starting ZooKeeper and {self.args.brokers} brokers")
            cluster.start()
            self.progress.remove_task(task)
            zk = connect(cluster.zk_connect or "", session_timeout_ms=30000)
            try:
                floor = None
                if n not in self.floors and not self.args.no_floor:
                    task = self.progress.add_task(f"  ZooKeeper floor for {n:,} znodes")
                    floor = self.floors[n] = zk_floor(zk, n)
                    self.progress.remove_task(task)
                if scenario == "failover":
                    result = self._failover(cluster, zk, n, setup)
                else:
                    result = self._move(cluster, zk, scenario, n, setup)
                result.floor = floor
                return result
            except Exception:
                for broker_id in cluster.brokers:
                    self.progress.console.print(
                        f"[red]broker {broker_id} output ends with:[/]\n"
                        + cluster.output_tail(broker_id, 15)
                    )
                raise
            finally:
                close_client(zk)
                for broker_id, broker in cluster.brokers.items():  # a fast teardown
                    if broker.is_running():
                        cluster.kill_broker(broker_id)
                cluster.close()

    # -- setup shared by the scenarios

    def _prepare(
        self,
        cluster: LocalCluster,
        zk: KazooClient,
        n: int,
        leader: int,
        follower: int,
    ) -> list[TopicPartition]:
        start = time.monotonic()
        partitions = create_topics(
            cluster, [leader, follower], n, self.args.partitions_per_topic, self.progress
        )
        created = time.monotonic()
        wait_assigned(zk, partitions, leader, {leader, follower}, self.progress)
        broker = cluster.brokers[leader]
        probe = ProduceProbe(
            "127.0.0.1", broker.port, leader, sample_of(partitions, self.args.sample)
        )

        async def check() -> None:
            await probe.connect()
            try:
                await serve_until_done(probe, self.args.timeout)
            finally:
                await probe.close()

        task = self.progress.add_task(f"  leader {leader} serving the sample; brokers settling")
        asyncio.run(check())
        served = time.monotonic()
        pids = [b.pid for b in cluster.brokers.values() if b.pid]
        _, rate = wait_settled(pids)
        # A leader too busy to answer its followers' fetches for replica.lag.time.max.ms shrinks
        # their ISRs; a failure would then leave partitions offline. Measure only from full ISRs.
        rewaits = 0
        while not all(
            set(v.state.isr) == {leader, follower} for v in read_states(zk, partitions).values()
        ):
            rewaits += 1
            if rewaits > 5:
                raise RuntimeError("the ISRs keep shrinking; the cluster never settles")
            wait_assigned(zk, partitions, leader, {leader, follower}, self.progress)
            _, rate = wait_settled(pids)
        self.progress.remove_task(task)
        self.create_s = created - start
        self.isr_full_after_create = rewaits == 0
        self.setup_phases = (
            f"create {created - start:.0f} s, leaders {served - created:.0f} s, "
            f"settle {time.monotonic() - served:.0f} s"
            + (f" (ISRs shrank and re-expanded {rewaits}x)" if rewaits else "")
            + f"; brokers then use {rate:.2f} cores"
        )
        return partitions

    def _profiler(self, pid: int, name: str) -> PySpy | None:
        if self.args.profile is None:
            return None
        self.args.profile.mkdir(parents=True, exist_ok=True)
        return PySpy(pid, self.args.profile / f"{name}.txt")

    # -- failure and controlled shutdown

    def _move(
        self, cluster: LocalCluster, zk: KazooClient, scenario: str, n: int, setup: float
    ) -> Result:
        controller = cluster.controller_id()
        assert controller is not None
        others = sorted(b for b in cluster.brokers if b != controller)
        victim, successor = others[0], others[1]
        partitions = self._prepare(cluster, zk, n, victim, successor)
        setup_s = time.monotonic() - setup
        paths = {partition_state_path(*tp): tp for tp in partitions}
        observer = ZkObserver(zk)
        observer.watch_states(paths)
        victim_path = f"{BROKER_IDS_PATH}/{victim}"
        observer.watch_node(victim_path)
        probe = ProduceProbe(
            "127.0.0.1",
            cluster.brokers[successor].port,
            successor,
            sample_of(partitions, self.args.sample),
        )
        profilers = {
            f"controller (broker {controller})": self._profiler(
                cluster.brokers[controller].pid or 0, f"{scenario}-{n}-controller"
            ),
            f"new leader (broker {successor})": self._profiler(
                cluster.brokers[successor].pid or 0, f"{scenario}-{n}-new-leader"
            ),
        }
        victim_pid = cluster.brokers[victim].pid
        assert victim_pid is not None
        sig = signal.SIGKILL if scenario == "failure" else signal.SIGTERM
        rss: dict[int, float] = {}
        controller_pid = cluster.brokers[controller].pid or 0
        cpu_before = [0.0]

        async def measure() -> tuple[float, float, float]:
            await probe.connect()
            zk_moved = self.progress.add_task(
                f"  {scenario}: leaders moved in ZooKeeper", total=len(paths)
            )
            served = self.progress.add_task(
                f"  {scenario}: sample served by broker {successor}", total=probe.total
            )
            confirmed: dict[str, float] = {}
            deadline = time.monotonic() + self.args.timeout
            last_verify = 0.0

            async def probe_until_served() -> None:
                while not probe.done:
                    await probe.round()
                    await asyncio.sleep(PROBE_INTERVAL_S)

            rss.update(peak_rss_of(cluster))
            cpu_before[0] = cpu_seconds(controller_pid)
            t0 = time.time()
            os.kill(victim_pid, sig)
            probing = asyncio.get_running_loop().create_task(probe_until_served())
            try:
                while True:
                    if probing.done():
                        probing.result()  # raises what the probe met
                    with observer.lock:
                        fired = [p for p in observer.fired if p not in confirmed]
                    # confirm what fired: the leader is no longer the victim (and note the write's
                    # mtime); anything else is watched again by the same read
                    if fired and (
                        len(fired) + len(confirmed) == len(paths)
                        or time.monotonic() - last_verify > 1.0
                    ):
                        last_verify = time.monotonic()
                        states = await asyncio.to_thread(observer.reread, fired)
                        for path, (state, mtime) in states.items():
                            if state.leader not in (victim, -1):
                                confirmed[path] = mtime
                            else:
                                with observer.lock:
                                    observer.fired.pop(path, None)
                    with observer.lock:
                        self.progress.update(zk_moved, completed=len(observer.fired))
                    self.progress.update(served, completed=len(probe.served))
                    if len(confirmed) == len(paths) and probe.done:
                        break
                    if time.monotonic() > deadline:
                        raise RuntimeError(
                            f"{scenario} {n}: after {self.args.timeout:.0f} s, "
                            f"{len(confirmed)}/{len(paths)} moved in ZooKeeper, "
                            f"{len(probe.served)}/{probe.total} served "
                            f"(last error {probe.last_error})"
                        )
                    await asyncio.sleep(0.05)
            finally:
                probing.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await probing
                await probe.close()
                self.progress.remove_task(zk_moved)
                self.progress.remove_task(served)
            return t0, max(confirmed.values()), max(probe.served.values())

        try:
            t0, zk_done, served_done = asyncio.run(measure())
        finally:
            profiles = stop_all(profilers)
        for broker_id, mib in peak_rss_of(cluster).items():
            rss[broker_id] = max(mib, rss.get(broker_id, 0.0))
        if scenario == "failure":
            start = observer.deleted.get(victim_path)
            if start is None:
                raise RuntimeError("the victim's registration was never deleted")
            detection = start - t0
        else:
            start, detection = t0, None
        notes = (
            f"broker {victim} -> {successor}; controller {controller} "
            f"(CPU {cpu_seconds(controller_pid) - cpu_before[0]:.2f} s)"
        )
        if scenario == "shutdown":
            process = cluster.brokers[victim].process
            if process is not None:
                process.wait(120)
            notes += f"; process exited at +{time.time() - t0:.1f} s"
        return Result(
            scenario,
            n,
            detection,
            max(zk_done, served_done) - start,
            zk_done - start,
            notes,
            profiles,
            setup_s,
            create_s=self.create_s,
            isr_full_after_create=self.isr_full_after_create,
            peak_rss_mib=rss,
        )

    # -- controller failover

    def _failover(self, cluster: LocalCluster, zk: KazooClient, n: int, setup: float) -> Result:
        controller = cluster.controller_id()
        assert controller is not None
        others = sorted(b for b in cluster.brokers if b != controller)
        leader, follower = others[0], others[1]
        partitions = self._prepare(cluster, zk, n, leader, follower)
        setup_s = time.monotonic() - setup
        observer = ZkObserver(zk)
        observer.watch_node(CONTROLLER_PATH)
        profilers = {
            b: self._profiler(cluster.brokers[b].pid or 0, f"failover-{n}-broker{b}")
            for b in others
        }
        victim_pid = cluster.brokers[controller].pid
        assert victim_pid is not None
        connections = {
            b: BrokerConnection(
                "127.0.0.1",
                cluster.brokers[b].port,
                node_id=b,
                client_id="bench-controller-probe",
                request_timeout_ms=PROBE_TIMEOUT_MS,
            )
            for b in others
        }

        rss: dict[int, float] = {}

        async def measure() -> tuple[float, dict[int, float]]:
            for conn in connections.values():
                await asyncio.wait_for(conn.connect(), PROBE_TIMEOUT_MS / 1000)
            task = self.progress.add_task(
                "  failover: brokers told by the new controller", total=len(connections)
            )
            seen: dict[int, float] = {}
            deadline = time.monotonic() + self.args.timeout
            rss.update(peak_rss_of(cluster))
            t0 = time.time()
            os.kill(victim_pid, signal.SIGKILL)
            try:
                while len(seen) < len(connections):
                    for broker_id, conn in connections.items():
                        if broker_id not in seen:
                            now_controller = await controller_seen_by(conn)
                            if now_controller not in (controller, -1):
                                seen[broker_id] = time.time()
                    self.progress.update(task, completed=len(seen))
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"failover {n}: brokers told: {sorted(seen)}")
                    await asyncio.sleep(PROBE_INTERVAL_S)
            finally:
                for conn in connections.values():
                    await conn.close()
                self.progress.remove_task(task)
            return t0, seen

        try:
            t0, seen = asyncio.run(measure())
        finally:
            stopped = stop_all(profilers)
        for broker_id, mib in peak_rss_of(cluster).items():
            rss[broker_id] = max(mib, rss.get(broker_id, 0.0))
        gone = observer.deleted.get(CONTROLLER_PATH)
        if gone is None:
            raise RuntimeError("/controller was never deleted")
        data, stat = zk.get(CONTROLLER_PATH)
        new_controller = json.loads(data)["brokerid"]
        elected = stat.ctime / 1000
        states = read_states(zk, partitions)
        live = set(zkc.read_brokers(zk))
        offline = [tp for tp, v in states.items() if v.state.leader not in live]
        if offline or len(states) != len(partitions):
            raise RuntimeError(f"failover {n}: {len(offline)} partitions without a live leader")
        done = max(seen.values())
        return Result(
            "failover",
            n,
            gone - t0,
            done - gone,
            elected - gone,
            f"controller {controller} -> {new_controller} (the "
            + ("leader" if new_controller == leader else "follower")
            + f" of all {n:,}), elected at +{elected - gone:.2f} s",
            {
                f"new controller (broker {b})" if b == new_controller else f"broker {b}": path
                for b, path in stopped.items()
            },
            setup_s,
            create_s=self.create_s,
            isr_full_after_create=self.isr_full_after_create,
            peak_rss_mib=rss,
        )


# --------------------------------------------------------------------------- report


def as_json(result: Result) -> dict[str, Any]:
    return {
        "scenario": result.scenario,
        "partitions": result.partitions,
        "detection_s": result.detection_s,
        "handling_s": result.handling_s,
        "zk_s": result.zk_s,
        "target_s": TARGETS_S.get((result.scenario, result.partitions)),
        "setup_s": result.setup_s,
        "create_s": result.create_s,
        "isr_full_after_create": result.isr_full_after_create,
        "peak_rss_mib": result.peak_rss_mib,
        "notes": result.notes,
        "zk_floor_write_read_s": result.floor,
        "profiles": {role: str(path) for role, path in result.profiles.items()},
    }


def stop_all(profilers: dict[Any, PySpy | None]) -> dict[Any, Path]:
    stopped = {key: p.stop() if p else None for key, p in profilers.items()}
    return {key: path for key, path in stopped.items() if path is not None}


def print_profiles(result: Result) -> None:
    for role, path in result.profiles.items():
        print_hotspots(console, f"{result.scenario} {result.partitions:,}, {role}", path)


def print_table(results: list[Result], args: argparse.Namespace, floors: dict[int, Any]) -> None:
    table = Table(
        title=f"controller: {args.brokers} brokers, RF 2, zookeeper.session.timeout.ms="
        f"{args.session_timeout_ms}, replica.lag.time.max.ms={args.replica_lag_ms}, serving "
        f"checked on {args.sample} sampled partitions, {os.cpu_count()} cores"
    )
    for column in (
        "scenario",
        "partitions",
        "detection (s)",
        "handling (s)",
        "of which ZK (s)",
        "target",
        "met?",
        "create (s)",
        "ISRs full after create?",
        "peak RSS (MiB)",
        "notes",
    ):
        table.add_column(
            column, justify="left" if column in ("scenario", "notes", "met?") else "right"
        )
    for r in results:
        target = TARGETS_S.get((r.scenario, r.partitions))
        zk_label = fmt_s(r.zk_s)
        table.add_row(
            {
                "failure": "broker failure",
                "shutdown": "controlled shutdown",
                "failover": "controller failover",
            }[r.scenario],
            f"{r.partitions:,}",
            fmt_s(r.detection_s),
            fmt_s(r.handling_s),
            zk_label,
            f"< {target:.0f} s" if target else "",
            ("[green]yes[/]" if r.handling_s < target else "[red]no[/]") if target else "",
            f"{r.create_s:.0f}",
            {True: "yes", False: "[red]no[/]", None: "n/a"}[r.isr_full_after_create],
            f"{max(r.peak_rss_mib.values(), default=0):,.0f}",
            r.notes,
        )
    for n, (write_s, read_s, bulk_s) in sorted(floors.items()):
        table.add_row(
            "ZooKeeper floor",
            f"{n:,}",
            "",
            f"{write_s:.2f} / {read_s:.2f} / {bulk_s:.2f}",
            "",
            "",
            "",
            "",
            "",
            "",
            "write in multis of 1,000 / kazoo pipelined read / bulk read",
        )
    console.print(table)
    console.print(
        "[dim]failure and failover: kill -9; controlled shutdown: SIGTERM. "
        "detection: kill -> the ZooKeeper session expired (registration or /controller "
        "deleted). handling: failure = registration deleted -> all moved in ZooKeeper and the "
        "new leader accepts produce; shutdown = SIGTERM -> same; failover = /controller deleted -> "
        "every live broker applied the new controller's LeaderAndIsr + UpdateMetadata. "
        "'of which ZK': failure/shutdown = the last leader write's mtime, failover = the new "
        "/controller's ctime (election).[/dim]"
    )
    shutdown = {r.partitions: r.handling_s for r in results if r.scenario == "shutdown"}
    line = f"anchor: {ANCHOR}"
    near = min((p for p in shutdown if p >= 5000), default=None)
    if near is not None:
        line += (
            f"; controlled shutdown here with {near:,} partitions: {shutdown[near]:.2f} s "
            f"({ANCHOR_SHUTDOWN_S / shutdown[near]:,.0f}x less)"
        )
    console.print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--partitions",
        "--sizes",
        dest="sizes",
        default="1000,5000,10000",
        help="partitions led by the victim, comma-separated sizes",
    )
    parser.add_argument(
        "--failover-sizes", default=None, help="partitions for the failover (default: largest size)"
    )
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--session-timeout-ms", type=int, default=3000)
    parser.add_argument(
        "--replica-lag-ms",
        type=int,
        default=30000,
        help="replica.lag.time.max.ms (Kafka's default 30000; 300000 keeps ISRs full while a "
        "stalled leader applies tens of thousands of new partitions during setup)",
    )
    parser.add_argument("--partitions-per-topic", type=int, default=1000)
    parser.add_argument("--sample", type=int, default=64, help="partitions probed with produce")
    parser.add_argument(
        "--timeout", type=float, default=600.0, help="per event and per setup step, seconds"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    parser.add_argument("--profile", type=Path, default=None, help="py-spy the controller into DIR")
    parser.add_argument(
        "--keep", type=Path, default=None, help="cluster directories under DIR, kept afterwards"
    )
    parser.add_argument("--no-floor", action="store_true", help="skip the ZooKeeper floor anchor")
    parser.add_argument(
        "--controller-alone",
        action="store_true",
        help="the controller in this process with stand-in brokers (see the docstring)",
    )
    args = parser.parse_args()
    if args.brokers < 3:
        parser.error("--brokers must be at least 3 (controller, victim, successor)")
    sizes = [int(s) for s in args.sizes.split(",") if s]
    failover_sizes = (
        [int(s) for s in args.failover_sizes.split(",") if s]
        if args.failover_sizes is not None
        else [max(sizes)]
    )
    scenarios = [s for s in args.scenarios.split(",") if s]
    unknown = set(scenarios) - set(SCENARIOS)
    if unknown:
        parser.error(f"unknown scenarios {sorted(unknown)}; choose from {SCENARIOS}")
    plan = [(s, n) for s in scenarios for n in (failover_sizes if s == "failover" else sizes)]
    console.print(
        f"[dim]{len(plan)} measurements, each on a fresh cluster; session timeout "
        f"{args.session_timeout_ms} ms; load average {os.getloadavg()[0]:.2f} on "
        f"{os.cpu_count()} cores; {code_version()}[/dim]"
    )
    results: list[Result] = []
    failed: list[tuple[str, int, str]] = []
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        CountColumn(),
        TimeElapsedColumn(),
        console=console,
    ) as progress:
        bench = Bench(args, progress)
        for scenario, n in plan:
            progress.console.print(f"[bold]{scenario}[/] with {n:,} partitions")
            try:
                result = (
                    run_alone(args, scenario, n, progress)
                    if args.controller_alone
                    else bench.run(scenario, n)
                )
                if result.floor is not None:
                    bench.floors[n] = result.floor
            except Exception as exc:  # one failed measurement must not lose the others
                progress.console.print(f"[red]  {scenario} {n:,} failed: {exc}[/]")
                failed.append((scenario, n, str(exc)))
                continue
            results.append(result)
            if args.json is not None:
                args.json.write_text(json.dumps([as_json(r) for r in results], indent=2))
            progress.console.print(
                f"  detection {fmt_s(result.detection_s)} s, handling {result.handling_s:.2f} s "
                f"(ZK {result.zk_s:.2f} s); setup {result.setup_s:.0f} s "
                f"({bench.setup_phases}); {result.notes}"
            )
    print_table(results, args, bench.floors)
    for scenario, n, error in failed:
        console.print(f"[red]{scenario} with {n:,} partitions: not measured ({error})[/]")
    for result in results:
        print_profiles(result)


if __name__ == "__main__":
    main()
