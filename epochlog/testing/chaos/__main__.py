"""`python -m epochlog.testing.chaos`: what `epochlog chaos` runs (see `epochlog.cli.chaos_cmd`).

One seed (`--seed N`) or a soak (`--seeds K`: seeds N..N+K-1), each a fresh cluster; prints the
timeline as it goes, then the anomalies with the faults around them and the table of runs, and
writes `<out>/seed-N/{timeline.txt,timeline.png,history.jsonl}`. Exit status 1 when any run
found an anomaly, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console

from epochlog.cli.chaos_cmd import add_arguments


def build_parser(prog: str = "epochlog chaos") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    add_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    from epochlog.testing.chaos.faults import FAULTS, fault_kinds, load_fault_modules
    from epochlog.testing.chaos.report import report, timeline_png
    from epochlog.testing.chaos.runner import ChaosConfig, run, save_history

    args = build_parser().parse_args(argv)
    console = Console(width=160)
    try:
        load_fault_modules(args.fault_module)
        if args.list_faults:
            for kind, cls in FAULTS.items():
                default = "" if getattr(cls, "by_default", True) else " (only when named)"
                summary = (cls.__doc__ or "").strip().split("\n")[0]
                console.print(f"{kind}{default}: {summary}")
            return 0
        faults = args.faults.split(",") if args.faults else None
        fault_kinds(faults)
        if not 3 <= args.brokers <= 5:
            raise ValueError(f"--brokers {args.brokers}: 3 to 5")
        if args.zk_ensemble < 1 or args.zk_ensemble % 2 == 0:
            raise ValueError(f"--zk-ensemble {args.zk_ensemble}: 1 or an odd number")
        if args.duration <= 0 or args.seeds < 1:
            raise ValueError(f"--duration {args.duration} and --seeds {args.seeds} must be > 0")
        broker_config = {}
        for item in args.config:
            key, sep, value = item.partition("=")
            if not sep or not key:
                raise ValueError(f"--config {item!r}: KEY=VALUE expected")
            broker_config[key] = value
    except (ValueError, ImportError) as exc:
        console.print(f"[red]error[/]: {exc}")
        return 2
    results = []
    for seed in range(args.seed, args.seed + args.seeds):
        config = ChaosConfig(
            seed=seed,
            duration_s=args.duration,
            brokers=args.brokers,
            faults=faults,
            out=Path(args.out),
            partitions=args.partitions,
            broker_config=broker_config,
            zk_ensemble=args.zk_ensemble,
        )
        result = run(config, log=console.print)
        save_history(result)
        png = timeline_png(result, result.directory / "timeline.png")
        results.append(result)
        console.print(
            f"[bold]progress: seed {seed} done ({len(results)}/{args.seeds}): "
            f"{result.result.acknowledged} acknowledged, {len(result.result.findings)} "
            f"anomalies[/], {png}"
        )
    report(console, results)
    return 1 if any(not r.result.ok for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
