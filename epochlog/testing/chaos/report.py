"""A chaos run's report: a table of runs, each anomaly with the faults around it, and a PNG
timeline of throughput and latency with the faults shaded."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table

from epochlog.testing.chaos.checker import Anomaly, Finding
from epochlog.testing.chaos.history import FaultSpan, History, OpKind, Status
from epochlog.testing.chaos.runner import RunResult

CONTEXT_S = 10.0  # faults this close to a finding's time are printed with it


def runs_table(results: Sequence[RunResult]) -> Table:
    table = Table(title="chaos runs")
    for column in ("seed", "duration s", "faults", "acknowledged", "anomalies", "unavailable s"):
        table.add_column(column)
    for r in results:
        counts = r.result.counts()
        anomalies = ", ".join(f"{a.value} {n}" for a, n in counts.items() if n) or "none"
        faults = ", ".join(f"{k} {n}" for k, n in sorted(r.faults_by_kind.items())) or "none"
        unavailable = (
            ", ".join(f"{k} {s:.1f}" for k, s in sorted(r.result.unavailable_s.items())) or "0"
        )
        table.add_row(
            str(r.config.seed),
            f"{r.history.duration_s:.0f}",
            faults,
            str(r.result.acknowledged),
            anomalies,
            unavailable,
        )
    return table


def anomaly_counts_table(results: Sequence[RunResult]) -> Table:
    table = Table(title="anomalies by kind")
    table.add_column("seed")
    for a in Anomaly:
        table.add_column(a.value)
    for r in results:
        counts = r.result.counts()
        table.add_row(str(r.config.seed), *(str(counts[a]) for a in Anomaly))
    return table


def faults_near(faults: Sequence[FaultSpan], at_s: float | None) -> list[FaultSpan]:
    if at_s is None:
        return list(faults)
    return [f for f in faults if f.start_s - CONTEXT_S <= at_s <= f.end_s + CONTEXT_S]


def print_findings(console: Console, result: RunResult, limit: int = 20) -> None:
    findings: list[Finding] = result.result.findings
    if not findings:
        return
    console.print(f"[bold red]seed {result.config.seed}: {len(findings)} anomalies[/]")
    for finding in findings[:limit]:
        where = "" if finding.at_s is None else f" at {finding.at_s:.2f} s"
        console.print(f"[red]{finding.anomaly.value}[/]{where}: {finding.detail}", markup=True)
        for span in faults_near(result.history.faults, finding.at_s):
            console.print(
                f"    fault {span.start_s:.2f}-{span.end_s:.2f} s {span.kind}: {span.detail}"
            )
    if len(findings) > limit:
        console.print(f"... and {len(findings) - limit} more (see {result.directory})")


def per_second(history: History) -> tuple[list[int], list[int], list[float], list[float]]:
    """Seconds, acknowledged sends completing in each, and their p50 and max latency (ms)."""
    latencies: dict[int, list[float]] = defaultdict(list)
    for op in history.ops:
        if op.kind is OpKind.SEND and op.status is Status.OK:
            latencies[int(op.complete_s)].append((op.complete_s - op.invoke_s) * 1000)
    seconds = list(range(int(history.duration_s) + 1))
    counts = [len(latencies.get(s, [])) for s in seconds]
    p50 = [
        sorted(latencies[s])[len(latencies[s]) // 2] if latencies.get(s) else 0.0 for s in seconds
    ]
    peak = [max(latencies[s]) if latencies.get(s) else 0.0 for s in seconds]
    return seconds, counts, p50, peak


def timeline_png(result: RunResult, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    seconds, counts, p50, peak = per_second(result.history)
    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(12, 6))
    top.plot(seconds, counts, color="tab:blue")
    top.set_ylabel("acknowledged / s")
    bottom.plot(seconds, p50, color="tab:green", label="p50")
    bottom.plot(seconds, peak, color="tab:red", label="max", alpha=0.6)
    bottom.set_yscale("symlog")
    bottom.set_ylabel("latency ms")
    bottom.set_xlabel("seconds into the run")
    bottom.legend(loc="upper right")
    colours = plt.get_cmap("tab10")
    kinds = sorted({f.kind for f in result.history.faults})
    for f in result.history.faults:
        colour = colours(kinds.index(f.kind) % 10)
        for axis in (top, bottom):
            axis.axvspan(f.start_s, max(f.end_s, f.start_s + 0.3), color=colour, alpha=0.2)
        top.annotate(f.kind, (f.start_s, max(counts or [1])), fontsize=7, rotation=90, va="top")
    for finding in result.result.findings:
        if finding.at_s is not None:
            for axis in (top, bottom):
                axis.axvline(finding.at_s, color="black", linestyle=":", linewidth=0.8)
    top.set_title(f"seed {result.config.seed}: {len(result.result.findings)} anomalies")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def report(console: Console, results: Sequence[RunResult]) -> None:
    for r in results:
        print_findings(console, r)
        for name, errors in r.workload_errors.items():
            console.print(f"workload {name}: {len(errors)} client errors, first: {errors[0]}")
        for note in r.notes:
            console.print(f"[yellow]note[/]: {note}")
    console.print(runs_table(results))
