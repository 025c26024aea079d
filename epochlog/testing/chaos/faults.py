"""The chaos faults: a registry of small classes, each with `inject` and `heal`.

A fault is a class with a `kind` (its name on the command line and in the report), a range of
seconds to hold it, and two methods taking the `ChaosContext`: `inject` does the damage and
`heal` undoes it, each returning a sentence for the timeline. `register` adds a class to
`FAULTS`; a module of further faults (network links, clocks) registers its own simply by being
imported (`load_fault_modules`, `--fault-module` on the command line), so this file does not
need to know them.

Faults run one at a time on the runner's main thread: the local cluster's processes die with
the thread that spawned them (PR_SET_PDEATHSIG), so a broker or ZooKeeper restarted from a
short-lived thread would be killed when that thread ends.

The forced session expiry needs no help from the broker: ZooKeeper derives a session's password
from its id (`ZooKeeperServer.generatePasswd`: java.util.Random seeded with id ^ 0xB3415C00,
16 bytes), so a second client can open the broker's own session (id = the ephemeralOwner of
`/brokers/ids/<id>`) and close it, which expires it on the server while the broker runs on.
"""

from __future__ import annotations

import importlib
import os
import random
import shutil
import signal
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from epochlog.node.local_cluster import LocalCluster
from epochlog.protocol.java_hash import java_string_hash, java_utils_abs
from epochlog.protocol.records import decode_batches
from epochlog.testing.chaos.history import History, Op, OpKind, Status
from epochlog.testing.chaos.workloads import GROUP, TRANSACTIONAL_ID, TxnLoop
from epochlog.testing.storage_faults import fill_disk

OFFSETS_PARTITIONS = 50  # offsets.topic.num.partitions (the runner keeps the default)
TXN_STATE_PARTITIONS = 50  # transaction.state.log.num.partitions


class FaultError(RuntimeError):
    """A fault could not be injected (no target): the runner notes it and goes on."""


@dataclass
class ChaosContext:
    cluster: LocalCluster
    rng: random.Random
    history: History
    txn_loop: TxnLoop | None = None
    full_disk_broker: int | None = None  # the broker whose log dir is a small tmpfs
    faults_file: Path | None = None  # epochlog.test.faults.file of the brokers, when set
    # topics faults created that the final read must cover: name -> (partitions, committed)
    extra_topics: dict[str, tuple[int, bool]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # what the report should mention
    net: Any = None  # the run's NetLab when the cluster runs in network namespaces
    broker_nodes: dict[int, str] = field(default_factory=dict)  # broker id -> its lab node
    zk_nodes: list[str] = field(default_factory=list)  # the ZooKeeper servers' lab nodes
    zk_servers: list[Any] = field(default_factory=list)  # ZooKeeperServer, one per server

    @property
    def session_timeout_s(self) -> float:
        return self.cluster.zk_session_timeout_ms / 1000

    def running(self) -> list[int]:
        return sorted(b for b, p in self.cluster.brokers.items() if p.is_running())

    def status(self) -> dict[str, Any]:
        from epochlog.cli.commands import read_status

        return read_status(self.cluster.zk_connect or "")

    def leader_of(self, topic: str, partition: int) -> int:
        for p in self.status()["partitions"]:
            if p["topic"] == topic and p["partition"] == partition and p["leader"] >= 0:
                return int(p["leader"])
        raise FaultError(f"{topic}-{partition} has no leader")


class Fault:
    kind: ClassVar[str]
    hold_s: ClassVar[tuple[float, float]] = (3.0, 8.0)
    needs: ClassVar[str | None] = None  # a ChaosContext attribute that must be set

    def inject(self, ctx: ChaosContext) -> str:
        raise NotImplementedError

    def heal(self, ctx: ChaosContext) -> str:
        return "nothing to heal"

    def hold(self, ctx: ChaosContext) -> float:
        """Seconds between inject and heal."""
        return ctx.rng.uniform(*self.hold_s)

    def usable(self, ctx: ChaosContext) -> bool:
        return self.needs is None or getattr(ctx, self.needs) is not None


FAULTS: dict[str, type[Fault]] = {}


def register(cls: type[Fault]) -> type[Fault]:
    if cls.kind in FAULTS and FAULTS[cls.kind] is not cls:
        raise ValueError(f"fault kind {cls.kind!r} registered twice")
    FAULTS[cls.kind] = cls
    return cls


def load_fault_modules(modules: Iterable[str]) -> None:
    """Import modules that register more fault kinds."""
    for name in modules:
        importlib.import_module(name)


def fault_kinds(names: Iterable[str] | None) -> list[str]:
    """The kinds asked for (all registered ones when None), in the registry's order; an unknown
    name is an error naming it and the known ones."""
    if names is None:
        return [k for k, cls in FAULTS.items() if getattr(cls, "by_default", True)]
    wanted = [n.strip() for n in names if n.strip()]
    unknown = [n for n in wanted if n not in FAULTS]
    if unknown:
        raise ValueError(f"unknown fault kinds {unknown}; known: {sorted(FAULTS)}")
    return wanted


# ------------------------------------------------------------------------------ broker crashes


class _BrokerDown(Fault):
    """Take one broker down in `take_down`; heal restarts it."""

    def __init__(self) -> None:
        self.broker: int | None = None

    def target(self, ctx: ChaosContext) -> int:
        running = ctx.running()
        if not running:
            raise FaultError("no broker is running")
        return ctx.rng.choice(running)

    def take_down(self, ctx: ChaosContext, broker: int) -> None:
        ctx.cluster.kill_broker(broker)

    def inject(self, ctx: ChaosContext) -> str:
        self.broker = self.target(ctx)
        self.take_down(ctx, self.broker)
        return f"broker {self.broker} down"

    def heal(self, ctx: ChaosContext) -> str:
        assert self.broker is not None
        ctx.cluster.start_broker(self.broker)
        return f"broker {self.broker} restarted and registered"


@register
class KillBroker(_BrokerDown):
    """kill -9 of a random broker; heal restarts it."""

    kind = "kill-broker"

    def inject(self, ctx: ChaosContext) -> str:
        return "kill -9: " + super().inject(ctx)


@register
class KillController(_BrokerDown):
    """kill -9 of the controller; heal restarts it."""

    kind = "kill-controller"

    def target(self, ctx: ChaosContext) -> int:
        controller = ctx.cluster.controller_id()
        if controller is None:
            raise FaultError("no controller")
        return controller

    def inject(self, ctx: ChaosContext) -> str:
        return "kill -9 of the controller: " + super().inject(ctx)


@register
class KillLeader(_BrokerDown):
    """kill -9 of the leader of a random data partition; heal restarts it."""

    kind = "kill-leader"

    def target(self, ctx: ChaosContext) -> int:
        from epochlog.testing.chaos.workloads import DATA_TOPIC

        self.partition = ctx.rng.randrange(_partitions(ctx, DATA_TOPIC))
        return ctx.leader_of(DATA_TOPIC, self.partition)

    def inject(self, ctx: ChaosContext) -> str:
        detail = super().inject(ctx)  # chooses the partition
        return f"kill -9 of the leader of chaos-{self.partition}: {detail}"


def _partitions(ctx: ChaosContext, topic: str) -> int:
    return sum(1 for p in ctx.status()["partitions"] if p["topic"] == topic) or 1


def coordinator_partition(key: str, partitions: int) -> int:
    """Kafka's choice of a group's or transactional id's coordinator partition."""
    return java_utils_abs(java_string_hash(key)) % partitions


@register
class KillGroupCoordinator(_BrokerDown):
    """kill -9 of the consumer group's coordinator; heal restarts it."""

    kind = "kill-group-coordinator"

    def target(self, ctx: ChaosContext) -> int:
        return ctx.leader_of("__consumer_offsets", coordinator_partition(GROUP, OFFSETS_PARTITIONS))

    def inject(self, ctx: ChaosContext) -> str:
        return f"kill -9 of {GROUP}'s coordinator: " + super().inject(ctx)


@register
class KillTxnCoordinator(_BrokerDown):
    """kill -9 of the transactional id's coordinator; heal restarts it."""

    kind = "kill-txn-coordinator"

    def target(self, ctx: ChaosContext) -> int:
        partition = coordinator_partition(TRANSACTIONAL_ID, TXN_STATE_PARTITIONS)
        return ctx.leader_of("__transaction_state", partition)

    def inject(self, ctx: ChaosContext) -> str:
        return f"kill -9 of {TRANSACTIONAL_ID}'s coordinator: " + super().inject(ctx)


@register
class ControlledShutdown(_BrokerDown):
    """SIGTERM (controlled shutdown) of a random broker; heal restarts it."""

    kind = "controlled-shutdown"

    def take_down(self, ctx: ChaosContext, broker: int) -> None:
        ctx.cluster.stop_broker(broker)

    def inject(self, ctx: ChaosContext) -> str:
        return "SIGTERM (controlled shutdown): " + super().inject(ctx)


@register
class FastBounce(_BrokerDown):
    """kill -9 and an immediate restart of a random broker."""

    kind = "bounce"
    hold_s = (0.0, 0.0)

    def inject(self, ctx: ChaosContext) -> str:
        broker = self.target(ctx)
        ctx.cluster.kill_broker(broker)
        ctx.cluster.start_broker(broker)
        return f"kill -9 and immediate restart of broker {broker}"

    def heal(self, ctx: ChaosContext) -> str:
        return "nothing to heal"


@register
class Pause(_BrokerDown):
    """SIGSTOP past the ZooKeeper session: the broker's session expires while it is frozen, and
    it wakes up still believing what it believed (leader, controller)."""

    kind = "pause"

    def inject(self, ctx: ChaosContext) -> str:
        self.broker = self.target(ctx)
        pid = ctx.cluster.brokers[self.broker].pid
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)
        return f"SIGSTOP broker {self.broker} (session timeout {ctx.session_timeout_s:.0f} s)"

    def hold(self, ctx: ChaosContext) -> float:
        return ctx.session_timeout_s + ctx.rng.uniform(1.0, 4.0)

    def heal(self, ctx: ChaosContext) -> str:
        assert self.broker is not None
        pid = ctx.cluster.brokers[self.broker].pid
        assert pid is not None
        os.kill(pid, signal.SIGCONT)
        return f"SIGCONT broker {self.broker}"


# ------------------------------------------------------------------------------ ZooKeeper


def java_random_bytes(seed: int, count: int) -> bytes:
    """java.util.Random(seed).nextBytes(new byte[count])."""
    mask = (1 << 48) - 1
    state = (seed ^ 0x5DEECE66D) & mask
    out = bytearray()
    while len(out) < count:
        state = (state * 0x5DEECE66D + 0xB) & mask
        rnd = state >> 16  # next(32), as an unsigned int
        for _ in range(min(4, count - len(out))):
            out.append(rnd & 0xFF)
            rnd >>= 8
    return bytes(out)


def session_password(session_id: int) -> bytes:
    """The password ZooKeeper gave session `session_id` (ZooKeeperServer.generatePasswd)."""
    return java_random_bytes((session_id ^ 0xB3415C00) & ((1 << 64) - 1), 16)


@register
class SessionExpiry(Fault):
    """A broker's ZooKeeper session expired on the server while the broker runs on."""

    kind = "zk-session-expiry"
    hold_s = (0.0, 0.0)

    def inject(self, ctx: ChaosContext) -> str:
        from kazoo.client import KazooClient

        from epochlog.zk.session import close_client, connect

        broker = ctx.rng.choice(ctx.running())
        client = connect(ctx.cluster.zk_connect or "", session_timeout_ms=6000)
        try:
            stat = client.exists(f"/brokers/ids/{broker}")
        finally:
            close_client(client)
        if stat is None:
            raise FaultError(f"broker {broker} is not registered")
        owner = stat.ephemeralOwner
        intruder = KazooClient(
            hosts=ctx.cluster.zk_connect,
            client_id=(owner, session_password(owner)),
            timeout=ctx.session_timeout_s,
        )
        intruder.start(timeout=10)
        intruder.stop()  # closing the session expires it for its owner too
        intruder.close()
        self.broker, self.old_epoch = broker, stat.czxid
        return f"expired broker {broker}'s ZooKeeper session 0x{owner:x}"

    def heal(self, ctx: ChaosContext) -> str:
        ctx.cluster.wait_ready([self.broker], newer_than={self.broker: self.old_epoch})
        return f"broker {self.broker} registered again with a new epoch"


@register
class ZooKeeperRestart(Fault):
    """ZooKeeper (every server of an ensemble) stopped for a few seconds, then started again."""

    kind = "zk-restart"
    hold_s = (1.0, 4.0)

    def usable(self, ctx: ChaosContext) -> bool:
        return bool(ctx.zk_servers)

    def inject(self, ctx: ChaosContext) -> str:
        for server in ctx.zk_servers:
            server.stop()
        return "ZooKeeper stopped" + (
            f" (all {len(ctx.zk_servers)} servers)" if len(ctx.zk_servers) > 1 else ""
        )

    def heal(self, ctx: ChaosContext) -> str:
        # an ensemble member serves only once a quorum is up: start all, then wait for each
        for server in ctx.zk_servers:
            server.start(wait=False)
        for server in ctx.zk_servers:
            server.wait_ready()
        if ctx.cluster.zk is not None:
            ctx.cluster.zk_pid = ctx.cluster.zk.pid
        return "ZooKeeper started again"


# ------------------------------------------------------------------------------ disks


def _log_dirs(ctx: ChaosContext, broker: int) -> list[Path]:
    for line in ctx.cluster.brokers[broker].config_path.read_text().splitlines():
        if line.startswith("log.dirs="):
            return [Path(d) for d in line.split("=", 1)[1].split(",")]
    return []


@register
class DiskLoss(_BrokerDown):
    """kill -9, then the broker's log dirs are gone: it comes back empty."""

    kind = "disk-loss"

    def take_down(self, ctx: ChaosContext, broker: int) -> None:
        ctx.cluster.kill_broker(broker)
        for d in _log_dirs(ctx, broker):
            for child in d.iterdir() if d.exists() else []:
                if child.is_dir():
                    shutil.rmtree(child)
                else:
                    child.unlink()

    def inject(self, ctx: ChaosContext) -> str:
        return "kill -9 and log dirs wiped: " + super().inject(ctx)


@register
class TailCut(_BrokerDown):
    """kill -9, then each partition's active segment loses its last batches, as unflushed
    page cache would."""

    kind = "disk-tail-cut"

    def take_down(self, ctx: ChaosContext, broker: int) -> None:
        ctx.cluster.kill_broker(broker)
        self.cut = 0
        for d in _log_dirs(ctx, broker):
            for partition_dir in sorted(p for p in d.glob("*-*") if p.is_dir()):
                segments = sorted(partition_dir.glob("*.log"))
                if segments:
                    self.cut += _cut_tail(segments[-1], ctx.rng.randint(1, 3))

    def inject(self, ctx: ChaosContext) -> str:
        detail = super().inject(ctx)
        return f"kill -9 and unflushed tails cut ({self.cut} batches): {detail}"


def _cut_tail(segment: Path, batches: int) -> int:
    data = segment.read_bytes()
    try:
        ends = [0]
        for batch in decode_batches(data, verify=False):
            ends.append(ends[-1] + batch.header.size)
    except Exception:
        return 0
    if len(ends) <= 1:
        return 0
    keep = ends[max(0, len(ends) - 1 - batches)]
    os.truncate(segment, keep)
    return len(ends) - 1 - ends.index(keep)


@register
class FullDisk(Fault):
    """The tmpfs log dir of one broker fills up; heal frees it. The dir must come back by itself
    (probed every epochlog.log.dir.probe.interval.ms), which the final quiesce checks."""

    kind = "full-disk"
    needs = "full_disk_broker"

    def inject(self, ctx: ChaosContext) -> str:
        assert ctx.full_disk_broker is not None
        self.broker = ctx.full_disk_broker
        self.filler = fill_disk(_log_dirs(ctx, self.broker)[0])
        return f"broker {self.broker}'s log dir filled ({self.filler})"

    def heal(self, ctx: ChaosContext) -> str:
        self.filler.unlink(missing_ok=True)
        if not ctx.cluster.brokers[self.broker].is_running():
            ctx.cluster.start_broker(self.broker)
            return f"filler removed; broker {self.broker} had exited and was started again"
        return f"filler removed from broker {self.broker}'s log dir"


# ------------------------------------------------------------------------------ transactions


@register
class Zombie(Fault):
    """A new producer with the loop's transactional id, between its transactions."""

    kind = "zombie"
    hold_s = (0.0, 0.0)
    needs = "txn_loop"

    def inject(self, ctx: ChaosContext) -> str:
        assert ctx.txn_loop is not None
        return ctx.txn_loop.fence_between_transactions()


# ------------------------------------------------------------------------------ KIP-903's race


def _wait(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise FaultError(f"timed out waiting for {what}")
        time.sleep(0.2)


@register
class DiskLossIsrRace(Fault):
    """KAFKA-14139, the seed of KIP-903, as a schedule on its own topic (replicas [A, B]):
    B leaves, records are acknowledged by A alone, A's AlterPartition adding B back is held, B's
    disk is replaced and B comes back empty, the held request is delivered, then A dies. With the
    fetch-epoch check the controller refuses B and the partition waits for A; without it the
    empty B leads and the acknowledged records are lost. Needs the brokers' faults file; off by
    default in random schedules (it takes a broker down for most of its run)."""

    kind = "disk-loss-isr-race"
    by_default = False
    needs = "faults_file"
    hold_s = (0.0, 0.0)
    topic = "chaos-903"

    def inject(self, ctx: ChaosContext) -> str:
        from epochlog.client import Admin, NewTopic
        from epochlog.testing.faults import FaultRules

        assert ctx.faults_file is not None
        cluster = ctx.cluster
        controller = cluster.controller_id()
        a, b = [x for x in ctx.running() if x != controller][:2]
        self.a = a

        def state() -> dict[str, Any]:
            return next(p for p in ctx.status()["partitions"] if p["topic"] == self.topic)

        with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
            admin.create_topics(
                [
                    NewTopic(
                        self.topic,
                        replica_assignment={0: [a, b]},
                        configs={"min.insync.replicas": "1"},
                    )
                ]
            )
        ctx.extra_topics[self.topic] = (1, False)
        _wait(lambda: state()["isr"] == [a, b], 30, "the ISR [A, B]")
        cluster.stop_broker(b)
        _wait(lambda: state()["isr"] == [a], 30, "the ISR [A]")
        _produce_acknowledged(ctx, self.topic, 200)
        FaultRules.write(
            ctx.faults_file, [{"api": "ALTER_PARTITION", "source": a, "action": "hold"}]
        )
        cluster.start_broker(b)
        log_a = cluster.brokers[a].log_path
        _wait(
            lambda: f"{self.topic}-0: expanding the ISR" in log_a.read_text(errors="replace"),
            30,
            "A's proposal",
        )
        FaultRules.write(
            ctx.faults_file,
            [
                {"api": "ALTER_PARTITION", "source": a, "action": "hold"},
                {"api": "FETCH", "source": b, "action": "drop"},
            ],
        )
        cluster.kill_broker(b)
        shutil.rmtree(cluster.brokers[b].directory / "logs")
        cluster.start_broker(b)
        FaultRules.write(ctx.faults_file, [{"api": "FETCH", "source": b, "action": "drop"}])
        _wait(
            lambda: (
                state()["isr"] == [a, b]
                or "INELIGIBLE_REPLICA" in log_a.read_text(errors="replace")
            ),
            30,
            "the controller's answer to A",
        )
        cluster.kill_broker(a)
        _wait(lambda: state()["leader"] != a, 30, "A's leadership to end")
        FaultRules.write(ctx.faults_file, [])
        return f"{self.topic}: B={b} came back empty, then A={a} was killed; ISR {state()['isr']}"

    def heal(self, ctx: ChaosContext) -> str:
        ctx.cluster.start_broker(self.a)
        return f"broker {self.a} restarted"


def _produce_acknowledged(ctx: ChaosContext, topic: str, count: int) -> None:
    import confluent_kafka as ck

    producer = ck.Producer(
        {"bootstrap.servers": ctx.cluster.bootstrap_servers, "acks": "all", "log_level": 2}
    )
    process = "producer-903"
    for n in range(count):
        value = f"{process}-{n}"
        invoked = ctx.history.now()

        def delivered(err: Any, msg: Any, value: str = value, invoked: float = invoked) -> None:
            status = Status.OK if err is None else Status.INFO
            offset = msg.offset() if err is None else None
            ctx.history.record(
                Op(
                    process,
                    OpKind.SEND,
                    status,
                    invoked,
                    ctx.history.now(),
                    value,
                    topic,
                    0,
                    offset,
                )
            )

        producer.produce(topic, value.encode(), partition=0, on_delivery=delivered)
    producer.flush(30)
