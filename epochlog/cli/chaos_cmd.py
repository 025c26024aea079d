"""`epochlog chaos`: the chaos harness (issue 19) on a fresh local cluster per seed.

The harness is test code (`epochlog.testing.chaos`), which production code never imports, so
this command runs it as its own program (`python -m epochlog.testing.chaos`) with the same
arguments and returns its exit status: 0 when no run found an anomaly, 1 when one did, 2 on bad
arguments. The arguments are defined here, once; the harness's own entry point uses
`add_arguments` too.

    epochlog chaos --duration 60 --seed 7 [--brokers 3..5] [--faults kill-leader,pause]
    epochlog chaos --seeds 20 --duration 60          # soak: seeds 0..19
    epochlog chaos --seed 7 --zk-ensemble 3          # a 3-node ZooKeeper ensemble
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Callable

from rich.console import Console

HARNESS = "epochlog.testing.chaos"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of faults per run")
    parser.add_argument("--seed", type=int, default=0, help="the (first) seed")
    parser.add_argument("--seeds", type=int, default=1, help="soak: this many seeds in a row")
    parser.add_argument("--brokers", type=int, default=3, help="3 to 5")
    parser.add_argument("--partitions", type=int, default=3, help="of each chaos topic")
    parser.add_argument(
        "--zk-ensemble", type=int, default=1, help="ZooKeeper servers: 1 or an odd ensemble (3)"
    )
    parser.add_argument("--faults", help="comma-separated fault kinds (default: all)")
    parser.add_argument("--out", default="chaos-runs", help="directory for runs (chaos-runs)")
    parser.add_argument(
        "--config", action="append", default=[], metavar="KEY=VALUE", help="broker setting"
    )
    parser.add_argument(
        "--fault-module",
        action="append",
        default=[],
        metavar="MODULE",
        help="import this module first: it registers more fault kinds",
    )
    parser.add_argument("--list-faults", action="store_true", help="list the fault kinds")


def add_parser(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    add_bootstrap: Callable[[argparse.ArgumentParser], None] | None = None,
) -> None:
    chaos = sub.add_parser(
        "chaos", help="random faults against a local cluster, checked like Jepsen (issue 19)"
    )
    add_arguments(chaos)


def to_argv(args: argparse.Namespace) -> list[str]:
    """The harness's command line for parsed arguments."""
    argv = [
        "--duration", str(args.duration),
        "--seed", str(args.seed),
        "--seeds", str(args.seeds),
        "--brokers", str(args.brokers),
        "--partitions", str(args.partitions),
        "--zk-ensemble", str(args.zk_ensemble),
        "--out", args.out,
    ]  # fmt: skip
    if args.faults:
        argv += ["--faults", args.faults]
    for item in args.config:
        argv += ["--config", item]
    for module in args.fault_module:
        argv += ["--fault-module", module]
    if args.list_faults:
        argv.append("--list-faults")
    return argv


def run(args: argparse.Namespace, console: Console) -> int:
    return subprocess.run([sys.executable, "-m", HARNESS, *to_argv(args)]).returncode
