"""What each `epochlog` command does (the parser is in `main`)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from epochlog.cli.common import CommandError, client_config
from epochlog.client.config import Role
from epochlog.node.shutdown_report import IncompleteShutdown


def run(args: argparse.Namespace, console: Console) -> int:
    handler = {
        "up": cmd_up,
        "down": cmd_down,
        "status": cmd_status,
        "broker": cmd_broker,
        "topics": cmd_topics,
        "leaders": cmd_leaders,
        "records": cmd_records,
        "controller": cmd_controller,
        "produce": cmd_produce,
        "consume": cmd_consume,
        "demo": cmd_demo,
    }[args.command]
    return handler(args, console)


def _key_values(pairs: list[str], what: str) -> dict[str, str]:
    values = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise CommandError(f"{what} {pair!r} is not KEY=VALUE")
        values[key.strip()] = value.strip()
    return values


# ----------------------------------------------------------------------------- local cluster


def cmd_up(args: argparse.Namespace, console: Console) -> int:
    from kazoo.exceptions import KazooException

    from epochlog.config.broker import BrokerConfig, ConfigError
    from epochlog.node.local_cluster import STATE_FILE, ClusterError, LocalCluster
    from epochlog.node.secure_cluster import (
        ADMIN_USER,
        BROKER_USER,
        LISTENER,
        SecureCluster,
        write_scram_credentials,
    )

    directory = Path(args.dir)
    if (directory / STATE_FILE).exists():
        raise CommandError(f"a cluster is already up in {directory} (epochlog down first)")
    if args.brokers < 1:
        raise CommandError(f"--brokers must be at least 1, got {args.brokers}")
    overrides = _key_values(args.config, "--config")
    try:  # validate the overrides before starting anything
        BrokerConfig.from_dict({"broker.id": 0, "zookeeper.connect": "x:1", **overrides})
    except ConfigError as exc:
        raise CommandError(str(exc)) from None
    # A directory keeps its kind: a secure cluster's ZooKeeper data is locked to its login, a
    # plain one's brokers have PLAINTEXT listeners in their server.properties.
    was_secure = SecureCluster.load(directory) is not None
    was_plain = not was_secure and (directory / "broker-1" / "server.properties").exists()
    if was_secure and not args.secure:
        raise CommandError(f"{directory} holds a secure cluster: `up --secure`, or another --dir")
    if was_plain and args.secure:
        raise CommandError(f"{directory} holds a plaintext cluster: `up --secure --dir` elsewhere")
    secure: SecureCluster | None = None
    if args.secure:  # a restart in the same directory keeps its secrets (and ZooKeeper's data)
        secure = SecureCluster.load(directory) or SecureCluster.create(directory)
    cluster = LocalCluster(
        directory,
        args.brokers,
        zookeeper=args.zookeeper,
        broker_config={**(secure.broker_config() if secure else {}), **overrides},
        die_with_parent=False,
        listener=LISTENER if secure else "PLAINTEXT",
        zk_login=secure.zk_login if secure else None,
    )
    with console.status(f"starting ZooKeeper and {args.brokers} brokers in {directory} ..."):
        try:
            cluster.start_zookeeper()
            if secure is not None:  # before any broker starts, as kafka-configs --zookeeper
                write_scram_credentials(
                    cluster.zk_connect or "",
                    secure.zk_login,
                    {ADMIN_USER: secure.admin_password, BROKER_USER: secure.broker_password},
                )
            cluster.start_brokers()
        except (ClusterError, KazooException) as exc:  # nothing left running
            cluster.close()
            raise CommandError(str(exc) or f"ZooKeeper: {type(exc).__name__}") from None
    console.print(f"ZooKeeper: {cluster.zk_connect}")
    console.print(f"bootstrap servers: [bold]{cluster.bootstrap_servers}[/]", soft_wrap=True)
    for broker_id, endpoint in sorted(cluster.metrics_endpoints().items()):
        console.print(f"broker {broker_id} metrics: {endpoint}")
    if secure is not None:
        secure.write_client_properties()
        console.print(
            f"secure: {LISTENER} only, SCRAM-SHA-512, ACLs on (super user {ADMIN_USER}), "
            f"ZooKeeper locked down; secrets in {secure.secrets_dir}"
        )
        for line in secure.usage(cluster.bootstrap_servers):
            console.print(line, soft_wrap=True, highlight=False, markup=False)
    return 0


def attach_local(args: argparse.Namespace) -> Any:
    """The local cluster in `--dir`, logged in to its ZooKeeper when it is a secure one."""
    from epochlog.node.local_cluster import ClusterError, LocalCluster
    from epochlog.node.secure_cluster import SecureCluster

    try:
        secure = SecureCluster.load(args.dir)
        if secure is None:
            return LocalCluster.attach(args.dir)
        return LocalCluster.attach(args.dir, zk_login=secure.zk_login)
    except (ClusterError, ValueError, OSError) as exc:
        raise CommandError(str(exc)) from None


def cmd_down(args: argparse.Namespace, console: Console) -> int:
    cluster = attach_local(args)
    with console.status("stopping brokers and ZooKeeper ..."):
        cluster.close()
    console.print("cluster stopped")
    return 0


def _zookeeper_of(args: argparse.Namespace) -> str:
    from epochlog.node.local_cluster import ClusterError, LocalCluster

    if getattr(args, "zookeeper", None):
        return args.zookeeper
    try:  # what status reads is world-readable even in a locked-down ZooKeeper
        return LocalCluster.attach(args.dir).zk_connect or ""
    except ClusterError as exc:
        raise CommandError(f"{exc}, or pass --zookeeper") from None


def read_status(zookeeper: str) -> dict[str, Any]:
    """Controller, brokers (endpoints, epochs) and partitions, read from ZooKeeper."""
    from epochlog.zk import controller_zk as zkc
    from epochlog.zk.pinning import read_pin_status
    from epochlog.zk.session import close_client, connect

    client = connect(zookeeper, session_timeout_ms=6000)
    try:
        pin = read_pin_status(client)
        brokers = zkc.read_brokers(client)
        controller = zkc.read_controller(client)
        epoch = zkc.read_controller_epoch(client)
        topics = zkc.read_topics(client)
        states = zkc.read_all_partition_states(client, topics)
    finally:
        close_client(client)
    live = set(brokers)
    partitions = []
    for (topic, partition), versioned in sorted(states.items()):
        replicas = list(topics[topic].partitions[partition])
        state = versioned.state
        partitions.append(
            {
                "topic": topic,
                "partition": partition,
                "leader": state.leader,
                "leader_epoch": state.leader_epoch,
                "partition_epoch": versioned.version,
                "replicas": replicas,
                "isr": list(state.isr),
                "under_replicated": len(state.isr) < len(replicas),
                "offline": state.leader < 0 or state.leader not in live,
            }
        )
    return {
        "controller": controller,
        "controller_epoch": epoch[0] if epoch else None,
        "pinned_controller": pin.pinned,
        "pin": pin.summary(),
        "brokers": [
            {
                "id": broker_id,
                "endpoints": [str(e) for e in registered.registration.endpoints],
                "rack": registered.registration.rack,
                "epoch": registered.epoch,
            }
            for broker_id, registered in sorted(brokers.items())
        ],
        "topics": {t: str(a.topic_id) for t, a in sorted(topics.items())},
        "partitions": partitions,
    }


def cmd_status(args: argparse.Namespace, console: Console) -> int:
    status = read_status(_zookeeper_of(args))
    if args.json:
        print(json.dumps(status, indent=2))
        return 0
    console.print(
        f"controller: broker [bold]{status['controller']}[/] "
        f"(controller epoch {status['controller_epoch']}), {status['pin']}"
    )
    brokers = Table(title="brokers")
    for column in ("id", "endpoints", "rack", "broker epoch (czxid)"):
        brokers.add_column(column)
    for b in status["brokers"]:
        brokers.add_row(str(b["id"]), ", ".join(b["endpoints"]), b["rack"] or "", str(b["epoch"]))
    console.print(brokers)
    parts = Table(title="partitions")
    for column in ("topic", "partition", "leader", "leader epoch", "replicas", "isr"):
        parts.add_column(column, overflow="fold")
    # Never elided, on a narrow terminal or in a pipe (80 columns): it is what people look for.
    parts.add_column("state", min_width=len("under-replicated"), no_wrap=True)
    for p in status["partitions"]:
        state = (
            "offline" if p["offline"] else ("under-replicated" if p["under_replicated"] else "ok")
        )
        parts.add_row(
            p["topic"],
            str(p["partition"]),
            str(p["leader"]),
            str(p["leader_epoch"]),
            ",".join(map(str, p["replicas"])),
            ",".join(map(str, p["isr"])),
            state,
        )
    console.print(parts)
    return 0


def cmd_broker(args: argparse.Namespace, console: Console) -> int:
    if args.broker_command == "start" and args.config:
        from epochlog.node.process import run_from_properties

        return run_from_properties(args.config)
    if args.broker_command == "start" and args.id is None:
        raise CommandError("broker start needs --config FILE, or a local-cluster broker ID")
    cluster = attach_local(args)
    if args.id not in cluster.brokers:
        raise CommandError(f"no broker {args.id} in the local cluster {args.dir}")
    started = time.monotonic()
    if args.broker_command == "stop":
        left = cluster.stop_broker(args.id)
        if left is not None:
            return _report_incomplete_shutdown(console, left, time.monotonic() - started)
    elif args.broker_command == "kill":
        cluster.kill_broker(args.id)
    elif args.broker_command == "start":
        cluster.start_broker(args.id)
    elif args.broker_command == "bounce":
        cluster.stop_broker(args.id)
        cluster.start_broker(args.id)
    console.print(
        f"broker {args.id}: {args.broker_command} done in {time.monotonic() - started:.1f} s"
    )
    return 0


def _report_incomplete_shutdown(console: Console, left: IncompleteShutdown, took_s: float) -> int:
    """The broker stopped, but its controlled shutdown left partitions led by it: say which."""
    if not left.controller_answered:
        console.print(
            f"broker {left.broker_id}: stopped in {took_s:.1f} s WITHOUT a controlled shutdown: "
            f"no controller answered in {left.attempts} attempts; its leaderships move only "
            "when its ZooKeeper session ends"
        )
        return 1
    names = left.remaining_partitions
    if not names:
        console.print(
            f"broker {left.broker_id}: stopped in {took_s:.1f} s WITHOUT a controlled shutdown: "
            f"the controller answered {left.error} {left.attempts} times"
        )
        return 1
    console.print(
        f"broker {left.broker_id}: stopped in {took_s:.1f} s, but its controlled shutdown left "
        f"{len(names)} partitions led by it after {left.attempts} attempts (no other replica "
        "in their ISR): they are offline until it returns"
    )
    console.print("  " + ", ".join(names))
    return 1


def cmd_controller(args: argparse.Namespace, console: Console) -> int:
    from epochlog.cli.controller_cmd import run as controller

    return controller(args, console)


def cmd_leaders(args: argparse.Namespace, console: Console) -> int:
    from epochlog.cli.partitions_cmd import cmd_elect

    return cmd_elect(args, console)


def cmd_records(args: argparse.Namespace, console: Console) -> int:
    from epochlog.cli.partitions_cmd import cmd_records as records

    return records(args, console)


# ----------------------------------------------------------------------------- clients


def cmd_topics(args: argparse.Namespace, console: Console) -> int:
    from epochlog.client import Admin, KafkaError

    with Admin(client_config(args, Role.ADMIN)) as admin:
        try:
            return _topics(admin, args, console)
        except KafkaError as exc:
            raise CommandError(str(exc)) from None


def _topics(admin: Any, args: argparse.Namespace, console: Console) -> int:
    command = args.topics_command
    if command == "create":
        admin.create_topic(
            args.topic,
            args.partitions,
            args.replication_factor,
            _key_values(args.config, "--config"),
        )
        console.print(f"Created topic {args.topic}.")
    elif command == "alter":
        from epochlog.cli.partitions_cmd import alter_topic

        alter_topic(admin, args, console)
    elif command == "delete":
        admin.delete_topic(args.topic)
        console.print(f"Deleted topic {args.topic}.")
    elif command == "list":
        for name in admin.list_topics():
            print(name)
    elif command == "describe":
        names = [args.topic] if args.topic else admin.list_topics()
        table = Table()
        for column in ("topic", "topic id", "partition", "leader", "replicas", "isr"):
            table.add_column(column)
        for name, description in sorted(admin.describe_topics(names).items()):
            for p in description.partitions:
                table.add_row(
                    name,
                    str(description.topic_id),
                    str(p.partition),
                    str(p.leader),
                    ",".join(map(str, p.replicas)),
                    ",".join(map(str, p.isr)),
                )
        console.print(table)
    return 0


def cmd_produce(args: argparse.Namespace, console: Console) -> int:
    from epochlog.client import KafkaError, Producer

    count = 0
    with Producer(client_config(args, Role.PRODUCER, acks=args.acks)) as producer:
        try:
            for line in sys.stdin:
                line = line.rstrip("\n")
                key = None
                if args.key_separator and args.key_separator in line:
                    key, line = line.split(args.key_separator, 1)
                producer.send(args.topic, line.encode(), key=key.encode() if key else None)
                count += 1
            producer.flush()
        except KafkaError as exc:
            raise CommandError(str(exc)) from None
    Console(stderr=True).print(f"produced {count} records to {args.topic}")
    return 0


def cmd_consume(args: argparse.Namespace, console: Console) -> int:
    from epochlog.client import Admin, Consumer

    with Admin(client_config(args, Role.ADMIN)) as admin:
        description = admin.describe_topics([args.topic]).get(args.topic)
    if description is None:
        raise CommandError(f"topic {args.topic!r} does not exist")
    config = client_config(
        args,
        Role.CONSUMER,
        **{"auto.offset.reset": "earliest" if args.from_beginning else "latest"},
    )
    if args.group:  # kafka-console-consumer's --group: a member that commits as it reads
        config.update({"group.id": args.group, "enable.auto.commit": True})
    seen = 0
    idle_since = time.monotonic()
    with Consumer(config) as consumer:
        if args.group:
            consumer.subscribe([args.topic])
        else:
            consumer.assign([(args.topic, p.partition) for p in description.partitions])
        while args.max_messages is None or seen < args.max_messages:
            records = consumer.poll(0.5)
            if not records:
                if args.timeout_ms and (time.monotonic() - idle_since) * 1000 > args.timeout_ms:
                    break
                continue
            idle_since = time.monotonic()
            for record in records:
                value = record.value.decode(errors="replace") if record.value is not None else ""
                if args.print_key:
                    key = record.key.decode(errors="replace") if record.key is not None else ""
                    print(f"{key}\t{value}", flush=True)
                else:
                    print(value, flush=True)
                seen += 1
                if args.max_messages is not None and seen >= args.max_messages:
                    break
    return 0


def cmd_demo(args: argparse.Namespace, console: Console) -> int:
    if args.storage:
        from epochlog.cli.storage_demo import run as storage_demo

        return 0 if storage_demo(Path(args.dir), console) else 1
    for name in ("events", "rate"):
        value = getattr(args, name, None)
        if value is not None and value <= 0:
            console.print(f"[red]error:[/] --{name} must be positive, not {value}")
            return 2
    if args.no_spark:
        from epochlog.cli.cluster_demo import run as cluster_demo

        sizes = {k: v for k, v in (("events", args.events), ("rate", args.rate)) if v is not None}
        return 0 if cluster_demo(Path(args.dir), console, **sizes) else 1
    from epochlog.cli.spark_demo import DemoSettings
    from epochlog.cli.spark_demo import run as spark_demo

    settings = DemoSettings()
    if args.events is not None:
        settings.events = args.events
    if args.rate is not None:
        settings.rate = args.rate
    return 0 if spark_demo(Path(args.dir), console, settings) else 1
