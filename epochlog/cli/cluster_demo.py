"""The cluster demo (`make demo`): ZooKeeper + 3 brokers, records flowing, a leader killed.

A producer (epochlog's client, idempotent, acks=all) writes clickstream events at a steady
rate to a 6-partition topic with replication factor 3 and min.insync.replicas 2. Half-way
through, the leader of partition 0 is killed with SIGKILL and started again a few seconds later.
At the end the demo reads the whole topic and checks that every acknowledged event is there
exactly once, in order per partition, then prints a summary. It exits non-zero when the check
fails.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from pathlib import Path

from rich.console import Console
from rich.table import Table

from epochlog.client import Admin, Consumer, Producer
from epochlog.node.local_cluster import LocalCluster

TOPIC = "clickstream"
PARTITIONS = 6
PAGES = ["/", "/search", "/cart", "/checkout", "/product/1", "/product/2"]
COUNTRIES = ["NL", "DE", "FR", "US", "BR", "JP"]


def run(directory: Path, console: Console, events: int = 6000, rate: int = 1000) -> bool:
    console.rule("[bold]epochlog cluster demo: ZooKeeper + 3 brokers, a leader killed mid-stream")
    cluster = LocalCluster(directory / "cluster-demo", 3, zk_session_timeout_ms=4000)
    with console.status("starting ZooKeeper and 3 brokers ..."):
        started = time.monotonic()
        cluster.start()
    console.print(f"cluster up in {time.monotonic() - started:.1f} s: {cluster.bootstrap_servers}")
    try:
        return _run(cluster, console, events, rate)
    finally:
        with console.status("stopping the cluster ..."):
            cluster.close()


def _run(cluster: LocalCluster, console: Console, events: int, rate: int) -> bool:
    bootstrap = cluster.bootstrap_servers
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topic(TOPIC, PARTITIONS, 3, {"min.insync.replicas": "2"})
        leader = admin.describe_topics([TOPIC])[TOPIC].partitions[0].leader
    acked: dict[int, tuple[int, int]] = {}  # event id -> (partition, offset)
    failed: list[str] = []
    lock = threading.Lock()

    def on_delivery(event_id: int):  # noqa: ANN202 - a callback factory
        def done(metadata, error) -> None:  # noqa: ANN001
            with lock:
                if error is not None:
                    failed.append(f"event {event_id}: {error}")
                else:
                    acked[event_id] = (metadata.partition, metadata.offset)

        return done

    bounced = threading.Event()
    bounce_info: dict[str, float] = {}

    def bouncer() -> None:
        while len(acked) < events // 2:
            time.sleep(0.05)
        t0 = time.monotonic()
        cluster.kill_broker(leader)
        bounce_info["killed_at"] = len(acked)
        time.sleep(3)
        cluster.start_broker(leader)
        bounce_info["seconds"] = time.monotonic() - t0
        bounced.set()

    threading.Thread(target=bouncer, daemon=True).start()
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    started = time.monotonic()
    last_report = started
    for event_id in range(events):
        event = {
            "id": event_id,
            "ts": int(time.time() * 1000),
            "page": PAGES[event_id % len(PAGES)],
            "country": COUNTRIES[(event_id * 7) % len(COUNTRIES)],
            "user": f"user-{event_id % 97}",
        }
        producer.send(
            TOPIC,
            json.dumps(event).encode(),
            key=event["user"].encode(),
            on_delivery=on_delivery(event_id),
        )
        target = started + (event_id + 1) / rate
        pause = target - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        if time.monotonic() - last_report > 1:
            last_report = time.monotonic()
            if bounced.is_set():
                state = f"broker {leader} back"
            elif "killed_at" in bounce_info:
                state = f"broker {leader} killed"
            else:
                state = "all brokers up"
            console.print(f"  sent {event_id + 1:>6,}  acknowledged {len(acked):>6,}  ({state})")
    producer.flush(120)
    producer.close()
    produce_seconds = time.monotonic() - started
    bounced.wait(60)

    seen: Counter[int] = Counter()
    order_ok = True
    last_offset: dict[int, int] = {}
    with Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"}) as consumer:
        consumer.assign([(TOPIC, p) for p in range(PARTITIONS)])
        deadline = time.monotonic() + 60
        while sum(seen.values()) < len(acked) and time.monotonic() < deadline:
            for record in consumer.poll(1.0):
                seen[json.loads(record.value)["id"]] += 1
                if record.offset <= last_offset.get(record.partition, -1):
                    order_ok = False
                last_offset[record.partition] = record.offset
    lost = sorted(set(acked) - set(seen))
    duplicates = sorted(e for e, n in seen.items() if n > 1)
    per_partition = Counter(p for p, _ in acked.values())

    table = Table(title="cluster demo summary")
    table.add_column("what")
    table.add_column("value", justify="right")
    table.add_row("events sent", f"{events:,}")
    table.add_row("acknowledged (acks=all)", f"{len(acked):,}")
    table.add_row("failed deliveries", f"{len(failed):,}")
    table.add_row("read back", f"{sum(seen.values()):,}")
    table.add_row("lost (acknowledged, not read)", f"{len(lost):,}")
    table.add_row("duplicates", f"{len(duplicates):,}")
    table.add_row("offsets in order per partition", "yes" if order_ok else "NO")
    table.add_row(
        f"leader of p0 (broker {leader}) killed -9, restarted after",
        f"{bounce_info.get('seconds', 0):.1f} s",
    )
    table.add_row("produce rate", f"{len(acked) / produce_seconds:,.0f} events/s")
    table.add_row(
        "events per partition",
        " ".join(f"p{p}:{per_partition[p]}" for p in range(PARTITIONS)),
    )
    console.print(table)
    for line in failed[:5]:
        console.print(f"[red]{line}[/]")
    ok = not lost and not duplicates and order_ok and len(acked) == events and not failed
    if ok:
        console.print("[bold green]OK[/]: every event was acknowledged and read back exactly once.")
    else:
        console.print("[bold red]FAILED[/]: see the table above.")
    return ok
