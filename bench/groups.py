"""Consumer groups: join time, commit rate, coordinator failover; epochlog vs librdkafka's mock.

In one run, on the same machine:
- (a) join: 10 confluent-kafka consumers subscribe to a new group (12-partition topic); the
  figure is the time from the first subscribe() to the moment every member has its assignment
  (its on_assign callback). Both targets use group.initial.rebalance.delay.ms = 3000: it is the
  mock's built-in value (the shared launcher does not change it; librdkafka's mock elects the
  leader 3 s after the first JoinGroup of an empty group) and Kafka's default, given to
  epochlog's brokers. The mock never extends that delay. epochlog runs it again from each new
  member's join (KIP-134's words), up to the rebalance timeout, so members that start together
  wait about one delay; Kafka's InitialDelayedJoin, which checks only at the end of each delay,
  would make them wait two.
- (b) commits: acknowledged OffsetCommits per second to one group's coordinator. The same raw
  client for both targets (epochlog's BrokerConnection, asyncio): CONNECTIONS connections to the
  coordinator, WINDOW requests in flight on each, one partition's offset per request, with
  generation -1 (a consumer that uses assign()), as librdkafka's commit(asynchronous=True)
  sends them. epochlog's commits are appended to a __consumer_offsets partition with
  replication factor 3 and acks=all; the mock keeps them in memory.
- (c) epochlog only: offsets committed for 10,000 groups whose coordinator is one broker (not
  the controller), a confluent-kafka member of one of them consuming a topic a producer keeps
  writing to (replication factor 3) and committing after every record; then kill -9 of that
  broker. Figures: time until the member receives a record produced after the kill, until one
  of its commits succeeds again, and until all 10,000 groups' offsets are served again
  (OffsetFetch, several groups per request, to the new leaders of the offsets partitions). The
  brokers' ZooKeeper session timeout (LocalCluster's 6 s) bounds how soon the controller learns
  of the death.

Targets (issue 15): all 10 assigned within delay + 1 s; >= 5,000 commits/s on one coordinator;
members consume again within 10 s of the kill.

Run: `.venv/bin/python bench/groups.py [--rounds 3] [--groups 10000] [--commits 20000]`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import confluent_kafka  # noqa: E402
from confluent_kafka.admin import AdminClient  # noqa: E402
from profiling import PySpy, hotspots  # noqa: E402 (bench/profiling.py)
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from epochlog.client import Admin, BrokerConnection  # noqa: E402
from epochlog.coordinator.group.runtime import partition_for_group  # noqa: E402
from epochlog.processes import spawn  # noqa: E402
from epochlog.protocol import messages as m  # noqa: E402
from epochlog.protocol.api import ApiKey  # noqa: E402
from epochlog.testing.cluster import LocalCluster  # noqa: E402

MOCK = Path(__file__).resolve().parents[2] / "shared" / "tools" / "librdkafka_mock_cluster.py"
TOPIC = "bench-0"
PARTITIONS = 12
MEMBERS = 10
DELAY_MS = 3000  # group.initial.rebalance.delay.ms: the mock's built-in value, Kafka's default
OFFSETS_PARTITIONS = 50
CONNECTIONS = 8
WINDOW = 16
# Pipelined commits on one connection share replication rounds (the broker begins each in order
# while earlier ones replicate); a member committing synchronously waits a round per commit, so
# 32 members committing synchronously is the other shape measured.
MEMBERS_COMMITTING = (32, 1)
FAILOVER_GIVE_UP_S = 60
RETRIABLE = {14, 15, 16}  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR
console = Console(width=160)


def log(text: str) -> None:
    console.print(f"[dim]{time.strftime('%H:%M:%S')}[/] {text}")


# ----------------------------------------------------------------------------- (a) join


def join_seconds(bootstrap: str, group: str) -> float:
    """From the first subscribe() to every member assigned."""
    assigned: dict[int, float] = {}
    stop = threading.Event()
    consumers = [
        confluent_kafka.Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "log_level": 2,
            }
        )
        for _ in range(MEMBERS)
    ]

    def run(index: int, consumer: confluent_kafka.Consumer) -> None:
        def on_assign(c: Any, partitions: list[Any]) -> None:
            if partitions:
                assigned.setdefault(index, time.perf_counter())

        consumer.subscribe([TOPIC], on_assign=on_assign)
        while not stop.is_set():
            consumer.poll(0.05)

    start = time.perf_counter()
    threads = [
        threading.Thread(target=run, args=(i, c), daemon=True) for i, c in enumerate(consumers)
    ]
    for thread in threads:
        thread.start()
    deadline = start + 60
    while len(assigned) < MEMBERS and time.perf_counter() < deadline:
        time.sleep(0.01)
    stop.set()
    for thread in threads:
        thread.join()
    closers = [threading.Thread(target=c.close) for c in consumers]
    for closer in closers:
        closer.start()
    for closer in closers:
        closer.join()
    if len(assigned) < MEMBERS:
        raise RuntimeError(f"{group}: only {len(assigned)} of {MEMBERS} members assigned in 60 s")
    return max(assigned.values()) - start


# ----------------------------------------------------------------------------- raw requests


def split(bootstrap: str) -> tuple[str, int]:
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    return host, int(port)


async def find_coordinator(bootstrap: str, group: str) -> tuple[str, int]:
    conn = BrokerConnection(*split(bootstrap), client_id="bench-groups")
    await conn.connect()
    try:
        for _ in range(100):
            version = min(3, conn.version_for(ApiKey.FIND_COORDINATOR))
            answer = await conn.send(
                m.FindCoordinatorRequest(key=group, key_type=0), version=version
            )
            if answer.error_code == 0:
                return answer.host, answer.port
            await asyncio.sleep(0.1)
        raise RuntimeError(f"no coordinator for {group}: error {answer.error_code}")
    finally:
        await conn.close()


def commit_request(group: str, partition: int, offset: int) -> Any:
    return m.OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        topics=[
            m.OffsetCommitRequest.OffsetCommitRequestTopic(
                name=TOPIC,
                partitions=[
                    m.OffsetCommitRequest.OffsetCommitRequestPartition(
                        partition_index=partition, committed_offset=offset, committed_metadata=""
                    )
                ],
            )
        ],
    )


async def pipelined_commits(
    host: str,
    port: int,
    requests: list[Any],
    on_done: Callable[[int], None] | None = None,
    shape: tuple[int, int] = (CONNECTIONS, WINDOW),
) -> float:
    """Send every request over `shape` = (connections, in flight on each); seconds."""
    connections, window = shape
    conns = [
        BrokerConnection(host, port, client_id=f"bench-commit-{i}") for i in range(connections)
    ]
    await asyncio.gather(*(c.connect() for c in conns))
    queue = iter(requests)
    done = [0]

    async def worker(conn: BrokerConnection) -> None:
        version = min(8, conn.version_for(ApiKey.OFFSET_COMMIT))
        for request in queue:
            for _attempt in range(200):
                answer = await conn.send(request, version=version)
                error = answer.topics[0].partitions[0].error_code
                if error == 0:
                    break
                if error not in RETRIABLE:
                    raise RuntimeError(f"OffsetCommit {request.group_id}: error {error}")
                await asyncio.sleep(0.05)
            else:
                raise RuntimeError(f"OffsetCommit {request.group_id}: still {error}")
            done[0] += 1
            if on_done is not None:
                on_done(done[0])

    start = time.perf_counter()
    try:
        await asyncio.gather(*(worker(c) for c in conns for _ in range(window)))
    finally:
        await asyncio.gather(*(c.close() for c in conns))
    return time.perf_counter() - start


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds of the processes so far (Linux /proc)."""
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rpartition(")")[2].split()
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def commits_per_second(
    bootstrap: str,
    group: str,
    count: int,
    pids_by_port: dict[int, int],
    profile: Path | None = None,
    shape: tuple[int, int] = (CONNECTIONS, WINDOW),
) -> tuple[float, float, float]:
    """Commits/s, and the cores used meanwhile by the coordinator and by all the servers."""

    async def run() -> tuple[float, float, float]:
        host, port = await find_coordinator(bootstrap, group)
        warm = [commit_request(group, p, 0) for p in range(PARTITIONS)]
        await pipelined_commits(host, port, warm)
        requests = [commit_request(group, i % PARTITIONS, i) for i in range(count)]
        coordinator = [pids_by_port[port]] if port in pids_by_port else []
        spy = PySpy(coordinator[0], profile) if profile and coordinator else None
        all_pids = sorted(set(pids_by_port.values()))  # the mock: one process, 3 ports
        before = cpu_seconds(coordinator), cpu_seconds(all_pids)
        elapsed = await pipelined_commits(host, port, requests, shape=shape)
        after = cpu_seconds(coordinator), cpu_seconds(all_pids)
        if spy is not None:
            spy.stop()
        return (
            count / elapsed,
            (after[0] - before[0]) / elapsed,
            (after[1] - before[1]) / elapsed,
        )

    return asyncio.run(run())


# ----------------------------------------------------------------------------- (c) failover


_admins: dict[str, AdminClient] = {}


def offsets_leaders(bootstrap: str) -> dict[int, int]:
    admin = _admins.get(bootstrap)
    if admin is None:
        admin = _admins[bootstrap] = AdminClient({"bootstrap.servers": bootstrap, "log_level": 2})
    topics = admin.list_topics("__consumer_offsets", timeout=10).topics
    info = topics.get("__consumer_offsets")
    if info is None or info.error is not None:
        return {}
    return {p: meta.leader for p, meta in info.partitions.items()}


def groups_led_by(broker: int, leaders: dict[int, int], count: int) -> list[str]:
    groups: list[str] = []
    i = 0
    while len(groups) < count:
        name = f"bench-failover-{i}"
        if leaders.get(partition_for_group(name, OFFSETS_PARTITIONS)) == broker:
            groups.append(name)
        i += 1
    return groups


async def fetch_all_offsets(
    addresses: dict[int, tuple[str, int]], bootstrap: str, groups: list[str], expected: int
) -> tuple[int, Counter[str]]:
    """Until every group's committed offset of partition 0 is served (retrying the rest), or
    FAILOVER_GIVE_UP_S: then the groups still pending and why (error code -> count)."""
    pending = set(groups)
    conns: dict[int, BrokerConnection] = {}
    why: Counter[str] = Counter()
    start = last_log = time.monotonic()
    try:
        while pending:
            if time.monotonic() - last_log > 2:
                last_log = time.monotonic()
                log(f"(c) {len(pending):,} groups not served yet: {dict(why)}")
            if time.monotonic() - start > FAILOVER_GIVE_UP_S:
                return len(pending), why
            why = Counter()
            leaders = offsets_leaders(bootstrap)
            by_leader: dict[int, list[str]] = {}
            for group in pending:
                leader = leaders.get(partition_for_group(group, OFFSETS_PARTITIONS), -1)
                if leader in addresses:
                    by_leader.setdefault(leader, []).append(group)
            for leader, names in by_leader.items():
                conn = conns.get(leader)
                if conn is None or conn.closed:
                    conn = conns[leader] = BrokerConnection(*addresses[leader])
                    try:
                        await conn.connect()
                    except OSError:
                        del conns[leader]
                        continue
                if conn.version_for(ApiKey.OFFSET_FETCH) < 8:
                    raise RuntimeError("OffsetFetch v8 (several groups) is needed")
                for start in range(0, len(names), 200):
                    request = m.OffsetFetchRequest(
                        groups=[
                            m.OffsetFetchRequest.OffsetFetchRequestGroup(
                                group_id=name,
                                topics=[
                                    m.OffsetFetchRequest.OffsetFetchRequestTopics(
                                        name=TOPIC, partition_indexes=[0]
                                    )
                                ],
                            )
                            for name in names[start : start + 200]
                        ]
                    )
                    answer = await conn.send(request, version=8)
                    for group in answer.groups:
                        if group.error_code:
                            why[f"group error {group.error_code}"] += 1
                            continue
                        partition = group.topics[0].partitions[0]
                        if partition.error_code == 0 and partition.committed_offset == expected:
                            pending.discard(group.group_id)
                        else:
                            why[f"{partition.error_code}/offset {partition.committed_offset}"] += 1
            if pending:
                await asyncio.sleep(0.1)
        return 0, why
    finally:
        await asyncio.gather(*(c.close() for c in conns.values()))


def failover(cluster: LocalCluster, group_count: int) -> dict[str, float]:
    bootstrap = cluster.bootstrap_servers
    controller = cluster.controller_id()
    leaders = offsets_leaders(bootstrap)
    led: dict[int, int] = {}
    for leader in leaders.values():
        led[leader] = led.get(leader, 0) + 1
    victim = max((b for b in led if b != controller), key=lambda b: led[b])
    log(
        f"(c) victim broker {victim} leads {led[victim]} of {OFFSETS_PARTITIONS} offsets "
        f"partitions (controller {controller})"
    )
    groups = groups_led_by(victim, leaders, group_count)
    member_group = groups[0]
    addresses = {b.broker_id: ("127.0.0.1", b.port) for b in cluster.brokers.values()}

    topic = "bench-failover"
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topic(topic, 3, 3)
    requests = [commit_request(g, 0, 42) for g in groups]
    elapsed = asyncio.run(pipelined_commits(*addresses[victim], requests))
    log(f"(c) committed offsets of {len(groups):,} groups to broker {victim} in {elapsed:.1f} s")

    stop = threading.Event()
    kill_at = [0.0]
    first_record = [0.0]
    first_commit = [0.0]
    received = [0]

    def produce() -> None:
        producer = confluent_kafka.Producer(
            {"bootstrap.servers": bootstrap, "linger.ms": 0, "log_level": 2}
        )
        while not stop.is_set():
            producer.produce(topic, str(time.time()).encode())
            producer.poll(0.02)
        producer.flush(30)

    after_kill: dict[int, int] = {}  # partition -> offset of its first record produced after

    def on_commit(err: Any, partitions: Any) -> None:
        # Only a commit of a record produced after the kill counts: earlier ones may be
        # answered by the coordinator before it died.
        if err is None and not first_commit[0]:
            for p in partitions:
                if p.error is None and p.offset > after_kill.get(p.partition, 1 << 62):
                    first_commit[0] = time.perf_counter()

    def consume() -> None:
        consumer = confluent_kafka.Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": member_group,
                "auto.offset.reset": "latest",
                "enable.auto.commit": False,
                "on_commit": on_commit,
                "log_level": 2,  # the dead broker's connection errors are expected
            }
        )
        consumer.subscribe([topic])
        while not stop.is_set():
            msg = consumer.poll(0.05)
            if msg is None or msg.error() is not None:
                continue
            received[0] += 1
            now = time.perf_counter()
            produced = float(msg.value().decode())
            if kill_at[0] and produced > kill_wall[0]:
                if not first_record[0]:
                    first_record[0] = now
                after_kill.setdefault(msg.partition(), msg.offset())
            consumer.commit(message=msg, asynchronous=True)
        consumer.close()

    kill_wall = [0.0]
    threads = [threading.Thread(target=produce), threading.Thread(target=consume)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 30
    while received[0] < 50 and time.monotonic() < deadline:
        time.sleep(0.05)
    if received[0] < 50:
        stop.set()
        raise RuntimeError("the member consumed nothing before the kill")
    log(f"(c) member of {member_group} consuming; kill -9 of broker {victim}")
    kill_wall[0] = time.time()
    kill_at[0] = time.perf_counter()
    cluster.kill_broker(victim)
    alive = {b: a for b, a in addresses.items() if b != victim}
    missing, why = asyncio.run(fetch_all_offsets(alive, bootstrap, groups, 42))
    all_served = time.perf_counter() - kill_at[0] if not missing else float("nan")
    if missing:
        log(
            f"(c) [red]{missing:,} groups' offsets not served after {FAILOVER_GIVE_UP_S} s[/]: "
            f"{why}"
        )
    else:
        log(f"(c) all {len(groups):,} groups' offsets served again after {all_served:.1f} s")
    deadline = time.monotonic() + 60
    while not (first_record[0] and first_commit[0]) and time.monotonic() < deadline:
        time.sleep(0.05)
    stop.set()
    for thread in threads:
        thread.join()
    return {
        "record": first_record[0] - kill_at[0] if first_record[0] else float("nan"),
        "commit": first_commit[0] - kill_at[0] if first_commit[0] else float("nan"),
        "all": all_served,
        "groups": float(len(groups)),
        "missing": float(missing),
    }


# ----------------------------------------------------------------------------- main


def start_mock() -> tuple[subprocess.Popen[str], str]:
    process = spawn(
        [sys.executable, str(MOCK), "3", TOPIC, str(PARTITIONS), "1"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    return process, process.stdout.readline().strip()


def print_hotspots(path: Path) -> None:
    spots = hotspots(path)
    busy = max(1, spots.samples - spots.waiting)
    log(f"coordinator profile: {spots.samples} samples, {spots.waiting} waiting")
    for name, count in spots.inclusive[:15]:
        console.print(f"  inclusive {100 * count / busy:5.1f}%  {name}")
    for name, count in spots.self_time[:15]:
        console.print(f"  self      {100 * count / busy:5.1f}%  {name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds of (a) and (b), medians")
    parser.add_argument("--commits", type=int, default=20_000)
    parser.add_argument("--groups", type=int, default=10_000)
    parser.add_argument("--failover-only", action="store_true", help="(c) alone")
    parser.add_argument(
        "--profile", action="store_true", help="py-spy the coordinator during epochlog's commits"
    )
    args = parser.parse_args()

    joins: dict[str, list[float]] = {"epochlog": [], "mock": []}
    rates: dict[str, list[float]] = {"epochlog": [], "mock": []}
    member_rates: dict[str, list[float]] = {"epochlog": [], "mock": []}
    cores: dict[str, list[tuple[float, float]]] = {"epochlog": [], "mock": []}
    with tempfile.TemporaryDirectory(prefix="epochlog-bench-groups-") as tmp:
        cluster = LocalCluster(
            tmp,
            3,
            broker_config={
                "group.initial.rebalance.delay.ms": DELAY_MS,
                "offsets.topic.num.partitions": OFFSETS_PARTITIONS,
            },
        )
        cluster.start()
        mock, mock_bootstrap = start_mock()
        try:
            bootstrap = cluster.bootstrap_servers
            with Admin({"bootstrap.servers": bootstrap}) as admin:
                admin.create_topic(TOPIC, PARTITIONS, 1)
            # The first FindCoordinator creates __consumer_offsets: not part of any figure.
            asyncio.run(find_coordinator(bootstrap, "bench-warm-up"))
            while len([leader for leader in offsets_leaders(bootstrap).values() if leader >= 0]) < (
                OFFSETS_PARTITIONS
            ):
                time.sleep(0.2)
            log(f"epochlog {bootstrap}; mock {mock_bootstrap}")
            mock_ports = [int(a.rsplit(":", 1)[1]) for a in mock_bootstrap.split(",")]
            for round_ in range(0 if args.failover_only else args.rounds):
                for name, target in (("mock", mock_bootstrap), ("epochlog", bootstrap)):
                    seconds = join_seconds(target, f"bench-join-{round_}")
                    joins[name].append(seconds)
                    log(f"(a) round {round_ + 1}: {name}: {MEMBERS} assigned in {seconds:.2f} s")
                for name, target in (("mock", mock_bootstrap), ("epochlog", bootstrap)):
                    pids = (
                        {mock_port: mock.pid for mock_port in mock_ports}
                        if name == "mock"
                        else {b.port: b.pid for b in cluster.brokers.values() if b.pid}
                    )
                    profile = (
                        Path(tmp) / f"commits-{round_}.txt"
                        if args.profile and name == "epochlog" and round_ == 0
                        else None
                    )
                    rate, coordinator_cores, server_cores = commits_per_second(
                        target, f"bench-commit-{round_}", args.commits, pids, profile
                    )
                    rates[name].append(rate)
                    cores[name].append((coordinator_cores, server_cores))
                    if profile is not None and profile.exists():
                        print_hotspots(profile)
                    log(f"(b) round {round_ + 1}: {name} {rate:,.0f} commits/s")
                    members_rate, _, _ = commits_per_second(
                        target,
                        f"bench-commit-members-{round_}",
                        args.commits,
                        pids,
                        shape=MEMBERS_COMMITTING,
                    )
                    member_rates[name].append(members_rate)
                    log(
                        f"(b) round {round_ + 1}: {name} {members_rate:,.0f} commits/s from "
                        f"{MEMBERS_COMMITTING[0]} members committing synchronously"
                    )
        finally:
            mock.send_signal(signal.SIGTERM)
            mock.wait()
        try:
            fail = failover(cluster, args.groups)
        finally:
            cluster.close()

    if args.failover_only:
        console.print(fail)
        return
    join_e, join_m = statistics.median(joins["epochlog"]), statistics.median(joins["mock"])
    rate_e, rate_m = statistics.median(rates["epochlog"]), statistics.median(rates["mock"])
    join_target = DELAY_MS / 1000 + 1
    table = Table(
        title=f"consumer groups: epochlog vs librdkafka's mock (medians of {args.rounds})"
    )
    for column in ("figure", "epochlog", "mock", "epochlog / mock", "target", "met?"):
        table.add_column(column, justify="left" if column == "figure" else "right")

    def met(ok: bool) -> str:
        return "[green]yes[/]" if ok else "[red]no[/]"

    table.add_row(
        f"(a) {MEMBERS} members join a new group, all assigned (delay {DELAY_MS} ms)",
        f"{join_e:.2f} s",
        f"{join_m:.2f} s",
        f"{join_e / join_m:.2f}x",
        f"<= {join_target:.1f} s",
        met(join_e <= join_target),
    )
    table.add_row(
        f"(b) OffsetCommits/s on one coordinator ({CONNECTIONS} conns x {WINDOW} in flight)",
        f"{rate_e:,.0f}",
        f"{rate_m:,.0f}",
        f"{rate_e / rate_m:.2f}x",
        ">= 5,000",
        met(rate_e >= 5000),
    )
    members_e = statistics.median(member_rates["epochlog"])
    members_m = statistics.median(member_rates["mock"])
    table.add_row(
        f"(b) OffsetCommits/s on one coordinator ({MEMBERS_COMMITTING[0]} members committing "
        "synchronously)",
        f"{members_e:,.0f}",
        f"{members_m:,.0f}",
        f"{members_e / members_m:.2f}x",
        ">= 5,000",
        met(members_e >= 5000),
    )
    core_e = cores["epochlog"][rates["epochlog"].index(rate_e)]
    core_m = cores["mock"][rates["mock"].index(rate_m)]
    table.add_row(
        "(b) ... cores used meanwhile: the coordinator / all servers",
        f"{core_e[0]:.2f} / {core_e[1]:.2f}",
        f"{core_m[0]:.2f} / {core_m[1]:.2f}",
        "-",
        "-",
        "-",
    )
    table.add_row(
        "(c) kill -9 of the coordinator: member receives a record produced after the kill",
        f"{fail['record']:.1f} s",
        "-",
        "-",
        "<= 10 s",
        met(fail["record"] <= 10),
    )
    table.add_row(
        "(c) ... and a commit of the member succeeds again",
        f"{fail['commit']:.1f} s",
        "-",
        "-",
        "<= 10 s",
        met(fail["commit"] <= 10),
    )
    table.add_row(
        f"(c) ... all {fail['groups']:,.0f} groups' offsets served by the new coordinators",
        f"{fail['all']:.1f} s",
        "-",
        "-",
        "-",
        "-",
    )
    console.print(table)
    console.print(
        "[dim]each round: join on the mock then on epochlog, then commits on each. "
        f"joins {', '.join(f'{x:.2f}' for x in joins['epochlog'])} s (epochlog), "
        f"{', '.join(f'{x:.2f}' for x in joins['mock'])} s (mock); commits/s "
        f"{', '.join(f'{x:,.0f}' for x in rates['epochlog'])} (epochlog), "
        f"{', '.join(f'{x:,.0f}' for x in rates['mock'])} (mock). "
        "ZooKeeper session timeout 6 s (LocalCluster).[/]"
    )


if __name__ == "__main__":
    main()
