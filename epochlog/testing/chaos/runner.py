"""One chaos run: a local cluster, the workloads, a seeded fault schedule, heal, final reads,
the checker.

`run(ChaosConfig)` starts ZooKeeper and `brokers` brokers (topics with replication factor 3 and
min.insync.replicas 2), starts every workload, then draws faults from the registry with
`random.Random(seed)` until the duration is spent: a pause, a fault, its hold, its heal, each
printed as a timeline line. Afterwards it heals, stops the writers, waits for every partition's
ISR to be whole again (quiesce), lets the readers catch up, reads every partition in full from
the beginning to its high watermark, stops the cluster and reads each replica's log files from
disk, and the brokers' logs for controller elections. The history goes to the checker.

The schedule depends only on the seed (which fault, which broker by rank, how long); what the
cluster does in between does not replay exactly, as in Jepsen.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import confluent_kafka as ck

from epochlog.node.local_cluster import LocalCluster
from epochlog.protocol.records import decode_batches
from epochlog.testing.chaos import netfaults
from epochlog.testing.chaos import workloads as wl
from epochlog.testing.chaos.checker import CheckResult, check
from epochlog.testing.chaos.faults import (
    FAULTS,
    ChaosContext,
    Fault,
    FaultError,
    fault_kinds,
)
from epochlog.testing.chaos.history import ControllerClaim, FaultSpan, History, ReplicaRecord
from epochlog.testing.txn_checker import ReadRecord

CONTROLLER_LINE = re.compile(r"broker (\d+) is the controller with epoch (\d+)")
FULL_DISK_BYTES = 64 << 20


@dataclass
class ChaosConfig:
    seed: int
    duration_s: float = 60.0
    brokers: int = 3
    faults: list[str] | None = None  # None: every kind registered as on by default
    out: Path = Path("chaos-runs")
    partitions: int = 3
    broker_config: dict[str, Any] = field(default_factory=dict)
    pause_s: tuple[float, float] = (2.0, 5.0)  # between faults
    quiesce_timeout_s: float = 90.0
    producer_rate: float = 40.0  # records/s per producer
    zk_session_timeout_ms: int = 6000
    zk_ensemble: int = 1  # ZooKeeper servers: 1 (standalone) or an odd ensemble


@dataclass
class RunResult:
    config: ChaosConfig
    history: History
    result: CheckResult
    timeline: list[str]
    directory: Path
    workload_errors: dict[str, list[str]]
    notes: list[str]

    @property
    def faults_by_kind(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for span in self.history.faults:
            counts[span.kind] = counts.get(span.kind, 0) + 1
        return counts


def run(config: ChaosConfig, log: Callable[[str], None] = print) -> RunResult:
    if not 3 <= config.brokers <= 5:
        raise ValueError(f"--brokers {config.brokers}: a chaos cluster has 3 to 5 brokers")
    kinds = fault_kinds(config.faults)
    if config.zk_ensemble < 1 or config.zk_ensemble % 2 == 0:
        raise ValueError(f"--zk-ensemble {config.zk_ensemble}: 1 or an odd number of servers")
    rng = random.Random(config.seed)
    directory = (config.out / f"seed-{config.seed}").resolve()
    if directory.exists():
        import shutil

        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    history = History()
    timeline: list[str] = []
    notes: list[str] = []

    def say(line: str) -> None:
        stamped = f"{history.now():7.2f} s  {line}"
        timeline.append(stamped)
        log(stamped)

    broker_config: dict[str, Any] = {
        "min.insync.replicas": 2,
        "default.replication.factor": 3,
        "offsets.topic.replication.factor": 3,
        "transaction.state.log.replication.factor": 3,
        "transaction.state.log.min.isr": 2,
        "unclean.leader.election.enable": "false",
        "replica.lag.time.max.ms": 6000,
        **config.broker_config,
    }
    faults_file: Path | None = None
    if "disk-loss-isr-race" in kinds or "clock-jump" in kinds:
        from epochlog.testing.faults import FaultRules

        faults_file = directory / "faults.json"
        FaultRules.write(faults_file, [])
        broker_config["epochlog.test.faults.file"] = str(faults_file)
    full_disk_broker = _mount_full_disk(directory, config, kinds, rng, notes)
    if full_disk_broker is not None:
        # the default (log.segment.bytes, 1 GiB) is more than the small tmpfs ever has free, so
        # the filled dir would stay offline for good
        broker_config.setdefault("epochlog.log.dir.min.free.bytes", FULL_DISK_BYTES // 4)
    net_kinds = [k for k in kinds if k in netfaults.NETWORK_KINDS]
    skip_net = network_unavailable() if net_kinds else None
    if skip_net is not None:
        kinds = [k for k in kinds if k not in net_kinds]
        notes.append(f"network faults {net_kinds} skipped: {skip_net}")
    zk = ZooKeeperSetup(
        directory, config.brokers, config.zk_ensemble, bool(net_kinds) and not skip_net
    )
    ctx: ChaosContext | None = None
    workloads: list[wl.Workload] = []
    cluster: LocalCluster | None = None
    try:
        if skip_net is not None:
            say(f"SKIPPED network faults {net_kinds}: {skip_net}")
        zk.start()
        cluster = LocalCluster(
            directory / "cluster",
            config.brokers,
            zookeeper=zk.connect_string,
            broker_config=broker_config,
            zk_session_timeout_ms=config.zk_session_timeout_ms,
            placements=zk.placements(),
        )
        cluster.start()
        if not zk.servers and cluster.zk is not None:
            zk.servers.append(cluster.zk)
        where = f"network lab {zk.net.layout.network}" if zk.net else "loopback"
        say(
            f"cluster up: {config.brokers} brokers, ZooKeeper {cluster.zk_connect} "
            f"({len(zk.servers)} server{'s' * (len(zk.servers) > 1)}), {where}, seed {config.seed}"
        )
        _create_topics(cluster.bootstrap_servers, config.partitions)
        history.transactional_topics = {wl.OUT_TOPIC}
        bootstrap = cluster.bootstrap_servers
        txn_loop = wl.TxnLoop(
            "ctp", history, bootstrap, config.partitions, directory / "ctp-librdkafka.log"
        )
        workloads = [
            wl.CkProducer(
                "producer-ck", history, bootstrap, config.partitions, config.producer_rate
            ),
            wl.EpochlogProducer(
                "producer-el", history, bootstrap, config.partitions, config.producer_rate
            ),
            wl.CkReader("reader-ck", history, bootstrap, wl.DATA_TOPIC, config.partitions),
            wl.EpochlogReader("reader-el", history, bootstrap, wl.DATA_TOPIC, config.partitions),
            wl.GroupMembers("group", history, bootstrap, random.Random(rng.random())),
            txn_loop,
            wl.CkReader(
                "reader-committed",
                history,
                bootstrap,
                wl.OUT_TOPIC,
                config.partitions,
                read_committed=True,
            ),
        ]
        wl.start_all(workloads)
        history.load_start_s = history.now()
        ctx = ChaosContext(
            cluster,
            rng,
            history,
            txn_loop,
            full_disk_broker,
            faults_file,
            notes=notes,
            net=zk.net,
            broker_nodes=zk.broker_nodes if zk.net else {},
            zk_nodes=zk.nodes if zk.net else [],
            zk_servers=zk.servers,
        )
        _schedule(ctx, kinds, config, say)
        say("faults over: stopping the writers")
        history.load_end_s = history.now()
        notes += wl.stop_all(workloads, lambda w: not isinstance(w, wl.CkReader))
        notes += [f"{txn_loop.name}: {stall}" for stall in txn_loop.stalls]
        say("writers stopped")
        quiet = _quiesce(ctx, config.quiesce_timeout_s)
        say("quiesced: every ISR whole" if quiet else f"NOT quiesced: {_unhealthy(ctx)}")
        with contextlib.suppress(Exception):
            history.final_isr = {
                (p["topic"], p["partition"]): list(p["isr"]) for p in ctx.status()["partitions"]
            }
        if not quiet:
            notes.append(f"not quiesced after {config.quiesce_timeout_s:.0f} s: {_unhealthy(ctx)}")
        time.sleep(3)  # the readers catch up
        notes += wl.stop_all(workloads)
        say("readers stopped")
        topics = {
            wl.DATA_TOPIC: (config.partitions, False),
            wl.OUT_TOPIC: (config.partitions, True),
            **ctx.extra_topics,
        }
        _final_reads(history, bootstrap, topics, notes)
        say(f"final reads: {sum(len(r) for r in history.final_reads.values())} records")
    finally:
        wl.stop_all(workloads, timeout_s=5.0)  # normally stopped already; stuck ones noted
        history.duration_s = history.now()
        if zk.net is not None:
            with contextlib.suppress(Exception):
                zk.net.heal_all()
        if cluster is not None:
            cluster.close()
        zk.close()
        try:
            topics_on_disk = {wl.DATA_TOPIC, wl.OUT_TOPIC, *(ctx.extra_topics if ctx else {})}
            if cluster is not None:
                history.replicas = read_replicas(cluster, topics_on_disk)
        finally:
            if full_disk_broker is not None:
                from epochlog.testing.storage_faults import umount

                umount(directory / "cluster" / f"broker-{full_disk_broker}" / "logs")
    assert cluster is not None  # it did start, or the exception above went on
    history.controller_claims = controller_claims(cluster)
    result = check(history)
    errors = {w.name: w.errors for w in workloads if w.errors}
    run_result = RunResult(config, history, result, timeline, directory, errors, notes)
    (directory / "timeline.txt").write_text("\n".join(timeline) + "\n")
    return run_result


def network_unavailable() -> str | None:
    """Why this process cannot build a network lab, or None when it can."""
    import shutil

    if os.geteuid() != 0:
        return "network namespaces need root (run as root, as CI does)"
    if shutil.which("ip") is None:
        return "`ip` (iproute2) is not installed"
    if not Path("/dev/net/tun").exists():
        return "/dev/net/tun is missing (the delay and loss shapers need it)"
    return None


class ZooKeeperSetup:
    """The run's ZooKeeper servers and, for network faults, the lab they and the brokers run in.

    Without a lab and with one server, LocalCluster starts ZooKeeper itself (as before). With a
    lab, node `zk<i>` holds server i and node `b<id>` broker id, each at its own address (so
    every server uses the usual ports); an ensemble without a lab uses free loopback ports.
    """

    def __init__(self, directory: Path, brokers: int, ensemble: int, with_lab: bool) -> None:
        self.directory = directory
        self.ensemble = ensemble
        self.broker_nodes = {b: f"b{b}" for b in range(1, brokers + 1)}
        self.nodes = [f"zk{i}" for i in range(1, ensemble + 1)]
        self.net: Any = None
        if with_lab:
            from epochlog.testing.netlab import NetLab

            self.net = NetLab([*self.nodes, *self.broker_nodes.values()])
        self.servers: list[Any] = []

    def start(self) -> None:
        from epochlog.zk.launcher import ZooKeeperServer, free_port

        if self.net is not None:
            self.net.start()
        elif self.ensemble == 1:
            return  # LocalCluster starts its own
        ids = range(1, self.ensemble + 1)
        if self.net is not None:
            hosts = {i: self.net.address(f"zk{i}") for i in ids}
            ports = {i: (2181, 2888, 3888) for i in ids}
        else:
            hosts = {i: "127.0.0.1" for i in ids}
            ports = {i: (free_port(), free_port(), free_port()) for i in ids}
        servers = (
            {i: f"{hosts[i]}:{ports[i][1]}:{ports[i][2]};{hosts[i]}:{ports[i][0]}" for i in ids}
            if self.ensemble > 1
            else {}
        )
        for i in ids:
            kwargs: dict[str, Any] = {"fsync": False, "client_port": ports[i][0]}
            if servers:
                kwargs.update(servers=servers, my_id=i)
            directory = self.directory / f"zookeeper-{i}"
            if self.net is not None:
                self.servers.append(self.net.zookeeper(f"zk{i}", directory, **kwargs))
            else:
                self.servers.append(ZooKeeperServer(directory, host=hosts[i], **kwargs))
        for server in self.servers:
            server.start(wait=False)
        for server in self.servers:
            server.wait_ready()

    @property
    def connect_string(self) -> str | None:
        return ",".join(s.connect_string for s in self.servers) or None

    def placements(self) -> dict[int, Any]:
        return self.net.broker_placements(self.broker_nodes) if self.net is not None else {}

    def close(self) -> None:
        for server in self.servers:  # stopping a stopped server does nothing
            with contextlib.suppress(Exception):
                server.stop()
        if self.net is not None:
            self.net.close()


def _mount_full_disk(
    directory: Path, config: ChaosConfig, kinds: list[str], rng: random.Random, notes: list[str]
) -> int | None:
    if "full-disk" not in kinds:
        return None
    from epochlog.testing.storage_faults import can_mount_tmpfs, mount_tmpfs

    if not can_mount_tmpfs(directory / "tmpfs-probe"):
        notes.append("full-disk skipped: this machine cannot mount a tmpfs")
        return None
    broker = rng.randint(1, config.brokers)
    mount_tmpfs(directory / "cluster" / f"broker-{broker}" / "logs", FULL_DISK_BYTES)
    return broker


def _create_topics(bootstrap: str, partitions: int) -> None:
    from epochlog.client import Admin, NewTopic

    with Admin({"bootstrap.servers": bootstrap}) as admin:
        results = admin.create_topics(
            [
                NewTopic(t, partitions, 3, {"min.insync.replicas": "2"})
                for t in (wl.DATA_TOPIC, wl.OUT_TOPIC)
            ],
            timeout=60,
        )
    failed = {t: e for t, e in results.items() if e is not None}
    if failed:
        raise RuntimeError(f"creating the chaos topics failed: {failed}")


def _schedule(
    ctx: ChaosContext, kinds: list[str], config: ChaosConfig, say: Callable[[str], None]
) -> None:
    usable = [k for k in kinds if FAULTS[k]().usable(ctx)]
    if len(usable) < len(kinds):
        say(f"faults not usable here: {sorted(set(kinds) - set(usable))}")
    end = ctx.history.now() + config.duration_s
    while ctx.history.now() < end and usable:
        time.sleep(ctx.rng.uniform(*config.pause_s))
        if ctx.history.now() >= end:
            break
        fault: Fault = FAULTS[ctx.rng.choice(usable)]()
        start = ctx.history.now()
        try:
            detail = fault.inject(ctx)
        except FaultError as exc:
            say(f"{fault.kind}: not injected ({exc})")
            continue
        except Exception as exc:  # a harness bug: noted, and the run goes on
            say(f"{fault.kind}: inject failed: {type(exc).__name__}: {exc}")
            ctx.notes.append(f"{fault.kind} inject failed: {type(exc).__name__}: {exc}")
            continue
        say(f"{fault.kind}: {detail}")
        hold = fault.hold(ctx)
        time.sleep(hold)
        try:
            healed = fault.heal(ctx)
        except Exception as exc:
            healed = f"heal failed: {type(exc).__name__}: {exc}"
        ctx.history.record_fault(FaultSpan(fault.kind, detail, start, ctx.history.now()))
        say(f"{fault.kind} healed: {healed}")


def _unhealthy(ctx: ChaosContext) -> list[str]:
    try:
        status = ctx.status()
    except Exception as exc:
        return [f"status unreadable: {exc}"]
    down = [b for b, p in ctx.cluster.brokers.items() if not p.is_running()]
    bad = [
        f"{p['topic']}-{p['partition']} leader {p['leader']} isr {p['isr']}"
        for p in status["partitions"]
        if p["leader"] < 0 or len(p["isr"]) < len(p["replicas"])
    ]
    return [f"brokers down {down}"] * bool(down) + bad[:10]


def _quiesce(ctx: ChaosContext, timeout_s: float) -> bool:
    """Every broker running, every partition led with its whole ISR."""
    for broker, process in ctx.cluster.brokers.items():
        if not process.is_running():
            with contextlib.suppress(Exception):
                ctx.cluster.start_broker(broker)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not _unhealthy(ctx):
            return True
        time.sleep(1)
    return False


def _final_reads(
    history: History, bootstrap: str, topics: dict[str, tuple[int, bool]], notes: list[str]
) -> None:
    """One full read per topic group: the plain topics at read_uncommitted, the transactional
    ones at read_committed, from the beginning to the high watermark."""
    plain = {t: n for t, (n, committed) in topics.items() if not committed}
    committed = {t: n for t, (n, c) in topics.items() if c}
    history.final_reads["ck"] = []
    for group, isolation in ((plain, "read_uncommitted"), (committed, "read_committed")):
        if not group:
            continue
        records, watermarks, complete = read_everything(bootstrap, group, isolation)
        history.final_reads["ck"] += records
        history.high_watermarks.update(watermarks)
        if not complete:
            notes.append(f"final {isolation} read of {sorted(group)} stopped before the end")


def read_everything(
    bootstrap: str, topics: dict[str, int], isolation: str, idle_s: float = 5.0
) -> tuple[list[ReadRecord], dict[tuple[str, int], int], bool]:
    consumer = ck.Consumer(
        {
            **wl.CK_QUIET,
            "bootstrap.servers": bootstrap,
            "group.id": "chaos-final-read",
            "enable.auto.commit": False,
            "isolation.level": isolation,
        }
    )
    try:
        tps = [ck.TopicPartition(t, p) for t, n in topics.items() for p in range(n)]
        watermarks: dict[tuple[str, int], int] = {}
        for tp in tps:
            _, high = consumer.get_watermark_offsets(tp, timeout=30)
            watermarks[(tp.topic, tp.partition)] = high
        consumer.assign([ck.TopicPartition(t.topic, t.partition, ck.OFFSET_BEGINNING) for t in tps])
        records: list[ReadRecord] = []
        next_offset = dict.fromkeys(watermarks, 0)
        last_message = time.monotonic()
        while time.monotonic() - last_message < idle_s:
            if all(next_offset[k] >= watermarks[k] for k in watermarks):
                return records, watermarks, True
            for msg in consumer.consume(500, 0.5):
                if msg.error() is not None:
                    continue
                last_message = time.monotonic()
                key = (msg.topic(), msg.partition())
                records.append(ReadRecord(key[0], key[1], msg.offset(), msg.value().decode()))
                next_offset[key] = msg.offset() + 1
        # read_committed ends at markers and aborted records, which are never returned
        return records, watermarks, isolation == "read_committed"
    finally:
        consumer.close()


def read_replicas(
    cluster: LocalCluster, topics: set[str]
) -> dict[tuple[str, int], dict[int, list[ReplicaRecord]]]:
    """Each broker's copy of each partition of `topics`, from its log files (cluster stopped)."""
    replicas: dict[tuple[str, int], dict[int, list[ReplicaRecord]]] = {}
    for broker_id, broker in cluster.brokers.items():
        for logs in broker.directory.glob("logs*"):
            for partition_dir in logs.iterdir() if logs.is_dir() else []:
                topic, _, number = partition_dir.name.rpartition("-")
                if topic not in topics or not number.isdigit() or not partition_dir.is_dir():
                    continue
                records: list[ReplicaRecord] = []
                for segment in sorted(partition_dir.glob("*.log")):
                    try:
                        batches = decode_batches(segment.read_bytes())
                    except Exception:
                        continue
                    for batch in batches:
                        if batch.header.is_control:
                            continue
                        records += [
                            ReplicaRecord(r.offset, (r.value or b"").decode())
                            for r in batch.records
                        ]
                replicas.setdefault((topic, int(number)), {})[broker_id] = records
    return replicas


def controller_claims(cluster: LocalCluster) -> list[ControllerClaim]:
    claims = []
    for broker in cluster.brokers.values():
        if not broker.log_path.exists():
            continue
        for line in broker.log_path.read_text(errors="replace").splitlines():
            match = CONTROLLER_LINE.search(line)
            if match:
                claims.append(ControllerClaim(int(match[1]), int(match[2]), line.strip()))
    return claims


def save_history(result: RunResult) -> Path:
    """The raw history as JSON lines beside the run, for a later look."""
    path = result.directory / "history.jsonl"
    with path.open("w") as out:
        for op in result.history.ops:
            out.write(json.dumps({k: getattr(v, "value", v) for k, v in vars(op).items()}) + "\n")
    return path
