"""Managing consumer groups: epochlog's admin client, `epochlog groups ...`, and group clients
through `epochlog proxy`, against groups that real confluent-kafka consumers create.

One 3-broker cluster for the module (group.initial.rebalance.delay.ms 300 ms, 5 offsets
partitions). Each test has its own topic (4 partitions, 10 records each) and group, made by a
confluent-kafka consumer that subscribes, reads everything and commits, as an application does.
The CLI runs in-process (`epochlog.cli.main.main`, output captured), and once as `python -m
epochlog` to show the entry point."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient

from epochlog.cli.main import main as epochlog_main
from epochlog.client import Admin, KafkaError, TopicPartition
from epochlog.processes import spawn
from epochlog.protocol.errors import ErrorCode
from epochlog.testing.cluster import LocalCluster
from epochlog.zk.launcher import free_port

PARTITIONS = 4
PER_PARTITION = 10


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    local = LocalCluster(
        tmp_path_factory.mktemp("groups-admin"),
        3,
        broker_config={
            "group.initial.rebalance.delay.ms": 300,
            "offsets.topic.num.partitions": 5,
            "group.min.session.timeout.ms": 1000,
        },
    )
    local.start()
    yield local
    local.close()


@pytest.fixture(scope="module")
def admin(cluster: LocalCluster) -> Iterator[Admin]:
    with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as client:
        yield client


def make_topic(cluster: LocalCluster, admin: Admin, name: str, timestamps: bool = False) -> None:
    """`name` with 4 partitions, 10 records each; with `timestamps`, record i of each partition
    has CreateTime 1_000_000 + i * 1000."""
    admin.create_topic(name, PARTITIONS, 3)
    producer = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers})
    for p in range(PARTITIONS):
        for i in range(PER_PARTITION):
            extra = {"timestamp": 1_000_000 + i * 1000} if timestamps else {}
            producer.produce(name, f"{name}-{p}-{i}".encode(), partition=p, **extra)
    assert producer.flush(30) == 0


def consumer(
    cluster: LocalCluster, group: str, bootstrap: str | None = None, **conf: object
) -> ck.Consumer:
    return ck.Consumer(
        {
            "bootstrap.servers": bootstrap or cluster.bootstrap_servers,
            "group.id": group,
            "client.id": f"{group}-client",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            **conf,
        }
    )


def read(c: ck.Consumer, count: int, timeout_s: float = 30) -> list[tuple[int, int]]:
    """(partition, offset) of the next `count` records (fewer if none come within the time)."""
    got: list[tuple[int, int]] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < count and time.monotonic() < deadline:
        msg = c.poll(0.3)
        if msg is not None and msg.error() is None:
            got.append((msg.partition(), msg.offset()))
    return got


def live_group(cluster: LocalCluster, admin: Admin, name: str) -> ck.Consumer:
    """A topic `name` and a group `name-g` with one confluent-kafka member that read all of it
    and committed."""
    make_topic(cluster, admin, name)
    member = consumer(cluster, f"{name}-g")
    member.subscribe([name])
    assert len(read(member, PARTITIONS * PER_PARTITION)) == PARTITIONS * PER_PARTITION
    member.commit(asynchronous=False)
    return member


def empty_group(cluster: LocalCluster, admin: Admin, name: str) -> str:
    member = live_group(cluster, admin, name)
    member.close()  # LeaveGroup: the group is Empty at once
    wait_until(lambda: admin.describe_groups([f"{name}-g"])[f"{name}-g"].state == "Empty")
    return f"{name}-g"


def wait_until(predicate: Callable[[], bool], timeout: float = 30, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, what or "condition not reached"
        time.sleep(0.2)


def committed(admin: Admin, group: str) -> dict[tuple[str, int], int]:
    return {
        (tp.topic, tp.partition): o.offset
        for tp, o in admin.list_group_offsets(group).items()
        if o is not None
    }


def groups_cli(
    cluster: LocalCluster, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, str, str]:
    """`epochlog groups ARGS --bootstrap-server ...` in-process: (exit code, stdout, stderr)."""
    capsys.readouterr()
    code = epochlog_main(["groups", *args, "--bootstrap-server", cluster.bootstrap_servers])
    out, err = capsys.readouterr()
    return code, out, " ".join(err.split())  # rich wraps stderr at 80 columns


# ----------------------------------------------------------------------------- admin client


def test_admin_lists_and_describes_a_subscribed_group_with_its_offsets_and_lag(
    cluster, admin
) -> None:
    member = live_group(cluster, admin, "adm-live")
    group = "adm-live-g"
    try:
        listed = {g.group_id: g for g in admin.list_groups()}
        assert (listed[group].protocol_type, listed[group].state) == ("consumer", "Stable")
        assert group in {g.group_id for g in admin.list_groups(["stable"])}  # any case
        assert group not in {g.group_id for g in admin.list_groups(["Empty", "Dead"])}

        described = admin.describe_groups([group])[group]
        assert (described.state, described.protocol_type, described.assignor) == (
            "Stable",
            "consumer",
            "range",  # librdkafka's default range,roundrobin
        )
        (m,) = described.members
        assert m.client_id == "adm-live-g-client" and m.host.startswith("/127.0.0.1")
        assert m.assignment == [TopicPartition("adm-live", p) for p in range(PARTITIONS)]
        confluent_admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        theirs = confluent_admin.describe_consumer_groups([group])[group].result(timeout=10)
        assert described.coordinator is not None
        assert described.coordinator.node_id == theirs.coordinator.id
        assert m.member_id == theirs.members[0].member_id

        tps = [("adm-live", p) for p in range(PARTITIONS)]
        offsets = admin.list_group_offsets(group)
        assert {tp: o.offset for tp, o in offsets.items()} == dict.fromkeys(tps, PER_PARTITION)
        mine = member.committed([ck.TopicPartition(t, p) for t, p in tps], 10)
        assert [tp.offset for tp in mine] == [PER_PARTITION] * PARTITIONS
        assert admin.log_end_offsets(tps) == dict.fromkeys(tps, PER_PARTITION)
        assert admin.log_start_offsets(tps) == dict.fromkeys(tps, 0)
        asked = admin.list_group_offsets(group, [("adm-live", 0), ("other", 0)])
        assert asked[TopicPartition("other", 0)] is None  # no commit there, as Kafka answers
    finally:
        member.close()


def test_what_a_group_with_members_refuses_is_named(cluster, admin) -> None:
    member = live_group(cluster, admin, "adm-busy")
    group = "adm-busy-g"
    try:
        with pytest.raises(KafkaError) as altered:
            admin.alter_group_offsets(group, {("adm-busy", 0): 1})
        assert altered.value.code is ErrorCode.UNKNOWN_MEMBER_ID
        assert "OffsetCommit for group 'adm-busy-g' at adm-busy-0" in str(altered.value)
        with pytest.raises(KafkaError) as deleted:
            admin.delete_group(group)
        assert deleted.value.code is ErrorCode.NON_EMPTY_GROUP
        assert "DeleteGroups for group 'adm-busy-g'" in str(deleted.value)
        with pytest.raises(KafkaError) as offsets_deleted:
            admin.delete_group_offsets(group, [("adm-busy", 0)])
        assert offsets_deleted.value.code is ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
        assert committed(admin, group)[("adm-busy", 0)] == PER_PARTITION  # nothing changed
    finally:
        member.close()


def test_admin_alters_an_empty_groups_offsets_and_its_next_consumer_starts_there(
    cluster, admin
) -> None:
    group = empty_group(cluster, admin, "adm-alter")
    admin.alter_group_offsets(group, {("adm-alter", 0): 3, ("adm-alter", 1): 7})
    assert committed(admin, group) == {
        ("adm-alter", 0): 3,
        ("adm-alter", 1): 7,
        ("adm-alter", 2): PER_PARTITION,
        ("adm-alter", 3): PER_PARTITION,
    }
    resumed = consumer(cluster, group)
    resumed.subscribe(["adm-alter"])
    got = read(resumed, 7 + 3)
    assert read(resumed, 1, timeout_s=2) == []  # and nothing more
    resumed.close()
    assert sorted(got) == [(0, o) for o in range(3, 10)] + [(1, o) for o in range(7, 10)]


def test_admin_deletes_offsets_then_the_group(cluster, admin) -> None:
    group = empty_group(cluster, admin, "adm-delete")
    admin.delete_group_offsets(group, [("adm-delete", 0), ("adm-delete", 1)])
    assert set(committed(admin, group)) == {("adm-delete", 2), ("adm-delete", 3)}
    results = admin.delete_groups([group, "adm-never-was"])
    assert results[group] is None
    assert results["adm-never-was"] is not None
    assert results["adm-never-was"].code is ErrorCode.GROUP_ID_NOT_FOUND
    described = admin.describe_groups([group])[group]
    assert (described.state, described.members) == ("Dead", [])
    assert group not in {g.group_id for g in admin.list_groups()}
    assert admin.list_group_offsets(group) == {}
    with pytest.raises(KafkaError) as again:
        admin.delete_group(group)
    assert again.value.code is ErrorCode.GROUP_ID_NOT_FOUND
    assert "DeleteGroups for group 'adm-delete-g'" in str(again.value)


def test_list_offsets_finds_offsets_by_timestamp_and_names_unknown_partitions(
    cluster, admin
) -> None:
    make_topic(cluster, admin, "adm-times", timestamps=True)
    found = admin.list_offsets({("adm-times", 0): 1_004_500, ("adm-times", 1): 9_000_000})
    assert found[TopicPartition("adm-times", 0)].offset == 5
    assert found[TopicPartition("adm-times", 1)].offset == -1  # no record that recent
    with pytest.raises(KafkaError) as raised:
        admin.log_end_offsets([("adm-times", 9)])
    assert raised.value.code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert "adm-times-9" in str(raised.value)


# ----------------------------------------------------------------------------- the CLI


def test_cli_lists_and_describes_a_live_group(cluster, admin, capsys) -> None:
    member = live_group(cluster, admin, "cli-live")
    group = "cli-live-g"
    try:
        code, out, _ = groups_cli(cluster, capsys, "list")
        assert code == 0 and group in out.split()
        code, out, _ = groups_cli(cluster, capsys, "list", "--state", "stable,empty")
        assert code == 0 and [group, "Stable"] in [line.split() for line in out.splitlines()]
        code, out, _ = groups_cli(cluster, capsys, "list", "--state", "Empty")
        assert code == 0 and group not in out
        code, out, _ = groups_cli(cluster, capsys, "list", "--json")
        assert {"group": group, "state": "Stable", "protocol_type": "consumer"} in json.loads(out)

        member_id = admin.describe_groups([group])[group].members[0].member_id
        code, out, _ = groups_cli(cluster, capsys, "describe", group)
        lines = [line.split() for line in out.splitlines() if line.strip()]
        assert code == 0 and lines[0] == [
            "GROUP",
            "TOPIC",
            "PARTITION",
            "CURRENT-OFFSET",
            "LOG-END-OFFSET",
            "LAG",
            "CONSUMER-ID",
            "HOST",
            "CLIENT-ID",
        ]
        assert lines[1:] == [
            [group, "cli-live", str(p), "10", "10", "0", member_id, "/127.0.0.1", f"{group}-client"]
            for p in range(PARTITIONS)
        ]
        code, out, _ = groups_cli(cluster, capsys, "describe", group, "--members")
        assert (
            code == 0
            and [group, member_id, "/127.0.0.1", f"{group}-client", "4"]
            == (out.splitlines()[1].split()[:5])
        )
        assert "cli-live(0,1,2,3)" in out
        code, out, _ = groups_cli(cluster, capsys, "describe", group, "--state")
        row = out.splitlines()[1].split()
        assert code == 0 and row[0] == group and row[-3:] == ["range", "Stable", "1"]
        code, out, _ = groups_cli(cluster, capsys, "describe", group, "--json")
        (report,) = json.loads(out)
        assert [r["lag"] for r in report["partitions"]] == [0] * PARTITIONS
        assert report["members"][0]["assignment"] == [["cli-live", p] for p in range(PARTITIONS)]

        code, _, err = groups_cli(cluster, capsys, "describe", "cli-no-such-group")
        assert code == 2 and "consumer group 'cli-no-such-group' does not exist" in err
    finally:
        member.close()


def test_cli_shows_lag_and_an_empty_group_without_members(cluster, admin, capsys) -> None:
    group = empty_group(cluster, admin, "cli-lag")
    admin.alter_group_offsets(group, {("cli-lag", 0): 4})
    code, out, _ = groups_cli(cluster, capsys, "describe", group)
    assert code == 0 and f"Consumer group '{group}' has no active members." in out
    rows = [line.split() for line in out.splitlines() if line.startswith(group)]
    assert rows[0] == [group, "cli-lag", "0", "4", "10", "6", "-", "-", "-"]


def test_cli_reset_offsets_is_refused_while_the_group_has_members(cluster, admin, capsys) -> None:
    member = live_group(cluster, admin, "cli-refuse")
    try:
        code, out, err = groups_cli(
            cluster,
            capsys,
            *("reset-offsets", "--group", "cli-refuse-g", "--all-topics", "--to-earliest"),
            "--execute",
        )
        assert code == 2 and out == ""
        assert "group 'cli-refuse-g' is Stable with 1 member(s)" in err
        assert "only be reset while the group is inactive" in err
        assert set(committed(admin, "cli-refuse-g").values()) == {PER_PARTITION}
    finally:
        member.close()


def test_cli_reset_offsets_dry_run_changes_nothing_and_execute_moves_the_group(
    cluster, admin, capsys
) -> None:
    group = empty_group(cluster, admin, "cli-reset")
    before = committed(admin, group)
    code, out, err = groups_cli(
        cluster, capsys, "reset-offsets", "--group", group, "--topic", "cli-reset", "--to-earliest"
    )
    assert code == 0 and "dry run: nothing was committed" in err
    lines = [line.split() for line in out.splitlines() if line.strip()]
    assert lines[0] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"]
    assert lines[1:] == [[group, "cli-reset", str(p), "10", "0"] for p in range(PARTITIONS)]
    assert committed(admin, group) == before

    code, out, err = groups_cli(
        cluster,
        capsys,
        *("reset-offsets", "--group", group, "--all-topics", "--shift-by", "-100", "--json"),
    )
    plan = json.loads(out)
    assert code == 0 and plan["executed"] is False
    assert [(r["new_offset"], r["note"]) for r in plan["partitions"]] == [
        (0, "-90 is below the log start offset; set to 0")
    ] * PARTITIONS
    assert "cli-reset-0: -90 is below the log start offset" in err

    code, out, _ = groups_cli(
        cluster,
        capsys,
        *("reset-offsets", "--group", group, "--topic", "cli-reset:1,2", "--to-offset", "4"),
        "--execute",
    )
    assert code == 0
    assert committed(admin, group) == {
        ("cli-reset", 0): 10,
        ("cli-reset", 1): 4,
        ("cli-reset", 2): 4,
        ("cli-reset", 3): 10,
    }
    resumed = consumer(cluster, group)
    resumed.subscribe(["cli-reset"])
    got = read(resumed, 12)
    assert read(resumed, 1, timeout_s=2) == []
    resumed.close()
    assert sorted(got) == [(1, o) for o in range(4, 10)] + [(2, o) for o in range(4, 10)]


def test_cli_reset_to_a_datetime_uses_record_timestamps(cluster, admin, capsys) -> None:
    make_topic(cluster, admin, "cli-times", timestamps=True)
    admin.alter_group_offsets("cli-times-g", {("cli-times", p): 0 for p in range(PARTITIONS)})
    moment = datetime.fromtimestamp(1_006_000 / 1000, UTC).isoformat()  # record 6's time
    code, out, _ = groups_cli(
        cluster,
        capsys,
        *("reset-offsets", "--group", "cli-times-g", "--topic", "cli-times"),
        *("--to-datetime", moment, "--execute", "--json"),
    )
    assert code == 0 and json.loads(out)["executed"] is True
    assert set(committed(admin, "cli-times-g").values()) == {6}
    code, out, err = groups_cli(
        cluster,
        capsys,
        *("reset-offsets", "--group", "cli-times-g", "--topic", "cli-times:0"),
        *("--to-datetime", "2100-01-01T00:00:00Z"),
    )
    assert code == 0 and out.splitlines()[1].split()[-1] == "10"  # the log end
    assert "no record at or after that time" in err


def test_cli_deletes_offsets_and_groups_and_names_what_it_could_not(cluster, admin, capsys) -> None:
    member = live_group(cluster, admin, "cli-busy")
    group = empty_group(cluster, admin, "cli-delete")
    try:
        code, out, _ = groups_cli(
            cluster, capsys, "delete-offsets", "--group", group, "--topic", "cli-delete:0"
        )
        assert code == 0 and ["cli-delete", "0", "Successful"] in [
            x.split() for x in out.splitlines()
        ]
        assert ("cli-delete", 0) not in committed(admin, group)
        code, _, err = groups_cli(
            cluster, capsys, "delete-offsets", "--group", "cli-busy-g", "--topic", "cli-busy"
        )
        assert code == 2 and "OffsetDelete for group 'cli-busy-g'" in err
        assert "GROUP_SUBSCRIBED_TO_TOPIC" in err
        code, out, err = groups_cli(cluster, capsys, "delete", group, "cli-busy-g")
        assert (
            code == 2
            and f"Deletion of requested consumer groups ('{group}') was successful." in out
        )
        assert "group 'cli-busy-g' could not be deleted: NON_EMPTY_GROUP" in err
        code, _, err = groups_cli(cluster, capsys, "delete", group)
        assert code == 2 and f"group '{group}' could not be deleted: GROUP_ID_NOT_FOUND" in err
        code, _, err = groups_cli(
            cluster,
            capsys,
            "reset-offsets",
            "--group",
            "cli-none",
            "--topic",
            "cli-delete:0",
            "--shift-by",
            "1",
        )
        assert code == 2 and "group 'cli-none': cannot shift cli-delete-0" in err
    finally:
        member.close()


def test_the_groups_command_runs_as_a_program(cluster, admin) -> None:
    group = empty_group(cluster, admin, "cli-program")
    result = subprocess.run(
        [
            sys.executable,
            *("-m", "epochlog", "groups", "list", "--state", "Empty", "--json"),
            *("--bootstrap-server", cluster.bootstrap_servers),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert {"group": group, "state": "Empty", "protocol_type": "consumer"} in json.loads(
        result.stdout
    )


# ----------------------------------------------------------------------------- the proxy


class ProxyProcess:
    """`epochlog proxy` in front of the cluster, as a process of its own."""

    def __init__(self, upstream: str, tmp: Path) -> None:
        self.port = free_port()
        self.listen = f"127.0.0.1:{self.port}"
        self.control = str(tmp / f"proxy-{self.port}.sock")
        self.log = tmp / f"proxy-{self.port}.out"
        with open(self.log, "wb") as out:
            self.process = spawn(
                [
                    sys.executable,
                    *("-m", "epochlog", "proxy", "--listen", self.listen),
                    *("--upstream", upstream, "--control", self.control),
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        wait_until(lambda: os.path.exists(self.control), 20, "the proxy did not start")

    def node_ports(self) -> set[int]:
        result = subprocess.run(
            [
                sys.executable,
                *("-m", "epochlog", "proxy", "status"),
                *("--listen", self.listen, "--control", self.control),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 0, result.stderr
        return set(json.loads(result.stdout)["node_ports"].values())

    def stop(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            self.process.wait(10)


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_a_confluent_group_subscribes_and_commits_through_the_proxy(
    cluster, admin, tmp_path
) -> None:
    make_topic(cluster, admin, "proxied")
    proxy = ProxyProcess(cluster.bootstrap_servers, tmp_path)
    try:
        logs = _Lines()
        logger = logging.getLogger("test-proxy-librdkafka")
        logger.addHandler(logs)
        logger.setLevel(logging.DEBUG)
        member = consumer(cluster, "proxied-g", proxy.listen, debug="broker", logger=logger)
        member.subscribe(["proxied"])
        assert len(read(member, PARTITIONS * PER_PARTITION)) == PARTITIONS * PER_PARTITION
        member.commit(asynchronous=False)
        mine = member.committed([ck.TopicPartition("proxied", p) for p in range(PARTITIONS)], 10)
        member.close()
        assert [tp.offset for tp in mine] == [PER_PARTITION] * PARTITIONS
        assert set(committed(admin, "proxied-g").values()) == {PER_PARTITION}

        # librdkafka connected only to the proxy, the coordinator included: every address it
        # connected to is a proxy port, never a broker's own.
        connected = {
            int(line.rsplit(":", 1)[1].split()[0])
            for line in logs.lines
            if "Connected to ipv4#127.0.0.1:" in line
        }
        broker_ports = {b.port for b in cluster.brokers.values()}
        assert connected and not connected & broker_ports
        assert connected <= proxy.node_ports() | {proxy.port}

        with Admin({"bootstrap.servers": proxy.listen}) as through:
            described = through.describe_groups(["proxied-g"])["proxied-g"]
        assert described.state == "Empty"
        assert described.coordinator is not None
        assert described.coordinator.port in proxy.node_ports()
    finally:
        proxy.stop()


def test_a_consumers_pipelined_async_commits_are_all_answered_and_the_last_one_wins(
    cluster, admin
) -> None:
    # librdkafka keeps a connection's async commits in flight together; the broker begins
    # each in request order while earlier ones replicate, so the last one sent is what stays.
    make_topic(cluster, admin, "async-commits")
    answered: list[ck.KafkaError | None] = []
    c = ck.Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "async-committer",
            "enable.auto.commit": False,
            "on_commit": lambda err, _partitions: answered.append(err),
        }
    )
    try:
        c.assign([ck.TopicPartition("async-commits", 0, 0)])
        for offset in range(1, 301):
            c.commit(offsets=[ck.TopicPartition("async-commits", 0, offset)], asynchronous=True)
        deadline = time.monotonic() + 60
        while len(answered) < 300 and time.monotonic() < deadline:
            c.poll(0.1)
        assert answered == [None] * 300
        assert committed(admin, "async-committer") == {("async-commits", 0): 300}
    finally:
        c.close()
