"""Controller moves during a rolling restart, with and without KIP-39's pin.

Each run starts a fresh local cluster (real ZooKeeper, `--brokers` real broker processes, one
topic of `--partitions` partitions with replication factor 3), then restarts every broker in
turn the way an operator does: SIGTERM (controlled shutdown), start it again, and wait until
every partition has its full ISR before the next broker. A ZooKeeper data watch on
`/controller` records every change with the znode's creation time (the ZooKeeper server's clock,
on this host), from which the bench counts

- moves: how often the controller changed from one broker to another;
- elections: how many controllers were elected (a broker can be re-elected: no move);
- time without a controller: from seeing `/controller` deleted (with `--crash`: from the kill
  of the controller's process, whose node lingers until its session expires) to the creation
  of the next one.

Unpinned, the controller moves whenever the broker holding it restarts, to whichever broker wins,
which may be restarted later (a move again); how often depends on where it starts, so the
unpinned runs place it first on broker 1, 3, 5, 2, 4 in turn (with a pin removed before the
restart begins). Pinned (to `--pin`, default broker 3, in the middle
of the order), it should move only when the pinned broker itself restarts: away and back.
The unpinned runs are the anchor measured in the same run; the pinned-to-unpinned ratio of moves
is the figure of merit. Issue target: pinned, at most 2 moves per rolling restart and each move
leaves the cluster without a controller for < 2 s.

Run: `.venv/bin/python bench/controller_moves.py [--brokers 5] [--partitions 30] [--rounds 3]
[--pin 3] [--crash]` (or `make bench-controller-moves`). `--crash` restarts with kill -9: each
move away then waits for the session timeout. It prints a table; it asserts nothing.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kazoo.client import KazooClient  # noqa: E402
from kazoo.protocol.states import ZnodeStat  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn  # noqa: E402
from rich.table import Table  # noqa: E402

from epochlog.cli.commands import read_status  # noqa: E402
from epochlog.client import Admin  # noqa: E402
from epochlog.testing.cluster import LocalCluster  # noqa: E402
from epochlog.zk.pinning import read_next_controller, read_ready_to_serve  # noqa: E402
from epochlog.zk.session import close_client, connect  # noqa: E402
from epochlog.zk.znodes import CONTROLLER_PATH, decode_controller  # noqa: E402

# Where the unpinned runs' controller starts (0-based, wrapped to --brokers): first, middle, last
# in the restart order, then the rest.
UNPINNED_STARTS = (0, 2, 4, 1, 3)


@dataclass
class ControllerLog:
    """What a watch on /controller saw: (wall time, controller or None, node ctime)."""

    changes: list[tuple[float, int | None, float | None]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def on_change(self, data: bytes | None, stat: ZnodeStat | None) -> None:
        now = time.time()
        with self.lock:
            if stat is None:
                self.changes.append((now, None, None))
            else:
                self.changes.append((now, decode_controller(data).broker_id, stat.ctime / 1000))

    def holder(self) -> int | None:
        with self.lock:
            return self.changes[-1][1] if self.changes else None

    def controller_killed(self, at: float) -> None:
        """The controller's process died at `at`: no controller from then on, although its
        node lives until the session expires."""
        with self.lock:
            self.changes.append((at, None, None))

    def summary(self, since: float) -> tuple[int, int, list[float]]:
        """(moves, elections, gaps in seconds) for the changes after `since`."""
        with self.lock:
            changes = sorted(self.changes, key=lambda change: change[0])
        before = [c for c in changes if c[0] < since]
        holder = before[-1][1] if before else None
        last_holder = holder
        moves = elections = 0
        absent_since: float | None = None if holder is not None else since
        gaps: list[float] = []
        for seen, controller, created in changes:
            if seen < since:
                continue
            if controller is None:
                absent_since = seen if absent_since is None else absent_since
                continue
            elections += 1
            if absent_since is not None and created is not None:
                gaps.append(max(0.0, created - absent_since))
            absent_since = None
            if last_holder is not None and controller != last_holder:
                moves += 1
            last_holder = controller
        return moves, elections, gaps


@dataclass
class Run:
    mode: str
    start_at: int  # the controller when the rolling restart began
    moves: int
    elections: int
    gaps: list[float]
    seconds: float

    @property
    def without_controller(self) -> float:
        return sum(self.gaps)


def wait(condition, timeout_s: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"not within {timeout_s} s: {what}")
        time.sleep(0.05)


def fully_replicated(cluster: LocalCluster) -> bool:
    partitions = read_status(cluster.zk_connect or "")["partitions"]
    return bool(partitions) and all(
        not p["under_replicated"] and not p["offline"] for p in partitions
    )


def one_run(
    mode: str,
    start_at: int,
    args: argparse.Namespace,
    progress: Progress,
    task: object,
    workdir: Path,
) -> Run:
    directory = Path(tempfile.mkdtemp(prefix=f"moves-{mode}-", dir=workdir))
    cluster = LocalCluster(
        directory,
        args.brokers,
        zk_session_timeout_ms=args.session_timeout_ms,
        broker_config={"auto.leader.rebalance.enable": "false"},
    )
    zk: KazooClient | None = None
    try:
        progress.update(task, description=f"{mode}: starting {args.brokers} brokers")  # type: ignore[arg-type]
        cluster.start()
        zk = connect(cluster.zk_connect or "", session_timeout_ms=10000)
        with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
            admin.create_topic("moves", args.partitions, min(3, args.brokers))
            wait(lambda: fully_replicated(cluster), 60, "the topic fully replicated")
            # Pinned: to --pin. Unpinned: the controller starts where `start_at` says (placed
            # with a pin that is removed again), so that the runs cover its positions.
            place = args.pin if mode == "pinned" else start_at
            admin.pin_controller(place)
            wait(lambda: cluster.controller_id() == place, 30, f"the controller on {place}")
            if mode == "unpinned":
                admin.unpin_controller()
                wait(lambda: read_ready_to_serve(zk) is None, 30, "the pin removed")
        log = ControllerLog()
        zk.DataWatch(CONTROLLER_PATH, log.on_change)
        time.sleep(0.5)
        started = time.time()
        for broker_id in sorted(cluster.brokers):
            progress.update(task, description=f"{mode}: restarting broker {broker_id}")  # type: ignore[arg-type]
            if args.crash:
                killed_at = time.time()
                was_controller = log.holder() == broker_id
                cluster.kill_broker(broker_id)
                if was_controller:
                    log.controller_killed(killed_at)
            else:
                cluster.stop_broker(broker_id)
            cluster.start_broker(broker_id)
            wait(lambda: fully_replicated(cluster), 120, "the ISR refilled")
            progress.advance(task)  # type: ignore[arg-type]
        if mode == "pinned":  # the pinned broker takes the controller back once it is ready
            wait(
                lambda: read_ready_to_serve(zk) == args.pin == cluster.controller_id(),
                30,
                "the pin in force again",
            )
            assert read_next_controller(zk) == args.pin
        time.sleep(1.0)  # let any last move show up
        moves, elections, gaps = log.summary(started)
        return Run(mode, start_at, moves, elections, gaps, time.time() - started)
    finally:
        if zk is not None:
            close_client(zk)
        cluster.close()
        if not args.keep:
            shutil.rmtree(directory, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", type=int, default=5)
    parser.add_argument("--partitions", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3, help="runs of each mode, alternating")
    parser.add_argument(
        "--crash", action="store_true", help="kill -9 each broker instead of SIGTERM"
    )
    parser.add_argument("--pin", type=int, default=3, help="the broker to pin (default 3)")
    parser.add_argument("--session-timeout-ms", type=int, default=6000)
    parser.add_argument("--keep", action="store_true", help="keep each cluster's directory")
    args = parser.parse_args()
    if not 1 <= args.pin <= args.brokers:
        parser.error(f"--pin {args.pin} is not a broker of 1..{args.brokers}")
    console = Console(width=None if sys.stdout.isatty() else 140)  # a file gets the whole table
    workdir = Path(tempfile.mkdtemp(prefix="epochlog-controller-moves-"))
    runs: list[Run] = []
    try:
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total} restarts"),
            TimeElapsedColumn(),
            console=console,
        ) as progress:
            task = progress.add_task("", total=2 * args.rounds * args.brokers)
            for round_ in range(args.rounds):
                start_at = UNPINNED_STARTS[round_ % len(UNPINNED_STARTS)] % args.brokers + 1
                runs.append(one_run("unpinned", start_at, args, progress, task, workdir))
                runs.append(one_run("pinned", args.pin, args, progress, task, workdir))
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
        elif runs:
            console.print(f"cluster directories kept in {workdir}")

    how = "kill -9 and start" if args.crash else "SIGTERM and start"
    table = Table(
        title=f"rolling restart ({how}) of {args.brokers} brokers, {args.partitions} partitions "
        f"(pinned to broker {args.pin}), {args.rounds} run(s) per mode"
    )
    for column in (
        "mode",
        "run",
        "controller at start",
        "moves",
        "elections",
        "no controller (s)",
        "longest gap (s)",
        "gaps (s)",
        "took (s)",
    ):
        table.add_column(column, justify="right" if column not in ("mode", "gaps (s)") else "left")
    for mode in ("unpinned", "pinned"):
        for i, run in enumerate(r for r in runs if r.mode == mode):
            table.add_row(
                mode,
                str(i + 1),
                str(run.start_at),
                str(run.moves),
                str(run.elections),
                f"{run.without_controller:.3f}",
                f"{max(run.gaps, default=0):.3f}",
                ", ".join(f"{g:.3f}" for g in run.gaps),
                f"{run.seconds:.1f}",
            )
    console.print(table)
    unpinned = [r.moves for r in runs if r.mode == "unpinned"]
    pinned = [r.moves for r in runs if r.mode == "pinned"]
    anchor = statistics.median(unpinned)
    ratio = statistics.median(pinned) / anchor if anchor else float("nan")
    longest = {
        mode: max((g for r in runs if r.mode == mode for g in r.gaps), default=0.0)
        for mode in ("unpinned", "pinned")
    }
    console.print(
        f"median moves: unpinned {anchor:g} (anchor), pinned {statistics.median(pinned):g} "
        f"(ratio {ratio:.2f}); longest gap: pinned {longest['pinned']:.3f} s, "
        f"unpinned {longest['unpinned']:.3f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
