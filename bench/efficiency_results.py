"""What bench/efficiency.py measures, saves and prints: the matrix, the results, the tables.

Sans-I/O apart from printing: `Results` is what a run produces and what `--json` saves;
`medians` reduces repeats; `print_tables` prints ours beside the anchors with each issue-20
target marked met or not met; `print_comparison` prints a saved run before -> after another.
"""

from __future__ import annotations

import argparse
import json
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

PARTITIONS = 16
TARGETS = ("epochlog", "mock", "tansu")
LABELS = {"epochlog": "epochlog", "mock": "librdkafka mock", "tansu": "Tansu"}
LATENCY_RATE = 10_000
LATENCY_WARMUP_S = 1.0
console = Console(width=200)

# ----------------------------------------------------------------------------- the matrix


@dataclass(frozen=True)
class Workload:
    rf: int
    size: int
    batching: str  # "large" | "small"

    @property
    def key(self) -> str:
        return f"rf{self.rf}-{self.size}B-{self.batching}"

    @property
    def label(self) -> str:
        batches = "large batches" if self.batching == "large" else "10 a batch"
        size = "1 KiB" if self.size == 1024 else f"{self.size} B"
        return f"RF {self.rf}, {size}, {batches}"

    @staticmethod
    def parse(key: str) -> Workload:
        try:
            rf, size, batching = key.split("-")
            workload = Workload(int(rf.removeprefix("rf")), int(size.removesuffix("B")), batching)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"workload {key!r}: expected rf<N>-<bytes>B-<large|small>, e.g. rf3-100B-small"
            ) from None
        if (
            batching not in ("large", "small")
            or workload.rf not in (1, 3)
            or workload.size
            not in (
                100,
                1024,
            )
        ):
            raise argparse.ArgumentTypeError(
                f"workload {key!r}: rf must be 1 or 3, the size 100B or 1024B and the batching "
                "large or small"
            )
        return workload


# (workload key, "produce" | "consume") -> the most ours may be of the mock's CPU per record
TARGET_RATIOS: dict[tuple[str, str], float] = {
    ("rf1-100B-large", "produce"): 2.0,
    ("rf1-100B-large", "consume"): 2.0,
    ("rf3-100B-large", "produce"): 3.0,
    ("rf3-100B-large", "consume"): 2.0,
    ("rf1-100B-small", "produce"): 2.0,
    ("rf3-100B-small", "produce"): 3.0,
}
LATENCY_P99_TARGET_MS = 10.0


def record_counts(size: int, batching: str, scale: float) -> int:
    # The mock keeps at most 5 MiB and 100k batches per partition; every partition gets an
    # equal share, so these stay well under (30,000 x 1 KiB is 1.9 MB a partition).
    base = {
        (100, "large"): 200_000,
        (1024, "large"): 30_000,
        (100, "small"): 60_000,
        (1024, "small"): 30_000,
    }[(size, batching)]
    return max(1_000, int(base * scale))


@dataclass
class Phase:
    records: int
    seconds: float
    server_cpu_s: float
    idle_cores: float  # the servers' CPU s/s over IDLE_S right before the phase
    records_per_batch: float | None = None
    records_per_request: float | None = None

    @property
    def us_per_record(self) -> float:
        return self.server_cpu_s / self.records * 1e6

    @property
    def idle_us_per_record(self) -> float:
        return self.idle_cores * self.seconds / self.records * 1e6

    @property
    def rate(self) -> float:
        return self.records / self.seconds


@dataclass
class Run:
    target: str
    workload: str
    produce: Phase
    consume: Phase | None = None


@dataclass
class Latency:
    target: str
    rf: int
    rate: int
    records: int  # measured, after the warm-up second
    p50_ms: float
    p99_ms: float
    max_ms: float
    achieved_rate: float
    server_cpu_us_per_record: float


@dataclass
class Results:
    meta: dict[str, Any]
    runs: list[Run] = field(default_factory=list)
    latency: list[Latency] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # target -> why

    def to_json(self) -> dict[str, Any]:
        return {
            "meta": self.meta,
            "runs": [asdict(r) for r in self.runs],
            "latency": [asdict(r) for r in self.latency],
            "skipped": self.skipped,
        }

    @staticmethod
    def from_json(data: dict[str, Any]) -> Results:
        def phase(d: dict[str, Any] | None) -> Phase | None:
            return Phase(**d) if d else None

        runs = [
            Run(r["target"], r["workload"], Phase(**r["produce"]), phase(r.get("consume")))
            for r in data["runs"]
        ]
        return Results(
            data["meta"], runs, [Latency(**x) for x in data["latency"]], data.get("skipped", {})
        )


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


# ----------------------------------------------------------------------------- reporting


def fmt(value: float | None, spec: str, suffix: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{suffix}"


def number(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def medians(results: Results) -> dict[tuple[str, str], dict[str, float | None]]:
    """(target, workload) -> the median of each figure over the repeats."""
    grouped: dict[tuple[str, str], list[Run]] = {}
    for run in results.runs:
        grouped.setdefault((run.target, run.workload), []).append(run)

    def med(values: list[float | None]) -> float | None:
        present = [v for v in values if v is not None]
        return statistics.median(present) if present else None

    out: dict[tuple[str, str], dict[str, float | None]] = {}
    for key, runs in grouped.items():
        consumes = [r.consume for r in runs if r.consume is not None]
        out[key] = {
            "produce_us": med([r.produce.us_per_record for r in runs]),
            "produce_idle_us": med([r.produce.idle_us_per_record for r in runs]),
            "rate": med([r.produce.rate for r in runs]),
            "per_batch": med([r.produce.records_per_batch for r in runs]),
            "per_request": med([r.produce.records_per_request for r in runs]),
            "consume_us": med([c.us_per_record for c in consumes]),
            "consume_idle_us": med([c.idle_us_per_record for c in consumes]),
        }
    return out


def ratio_cell(ours: float | None, anchor: float | None, target: float | None = None) -> str:
    if ours is None or anchor is None or anchor == 0:
        return "-"
    ratio = ours / anchor
    if target is None:
        return f"{ratio:.2f}x"
    met = ratio <= target
    verdict = "met" if met else "not met"
    return f"[{'green' if met else 'red'}]{ratio:.2f}x ({verdict}, ≤{target:g}x)[/]"


def workload_order(results: Results) -> list[str]:
    seen: list[str] = []
    for run in results.runs:
        if run.workload not in seen:
            seen.append(run.workload)
    return seen


def print_tables(results: Results) -> None:
    m = medians(results)
    targets = [t for t in TARGETS if any(r.target == t for r in results.runs)]
    meta = results.meta

    def get(target: str, workload: str, figure: str) -> float | None:
        return m.get((target, workload), {}).get(figure)

    table = Table(
        title=f"Servers' CPU per record produced (acks=all) and the pinned produce rate: "
        f"confluent-kafka {meta['confluent_kafka']} on core {meta['client_core']}, servers on "
        f"core {meta['server_core']}, {PARTITIONS} partitions, median of {meta['repeat']}"
    )
    table.add_column("workload", no_wrap=True)
    for target in targets:
        table.add_column(f"{target} µs/rec (idle)", justify="right")
    table.add_column("ours vs mock", justify="right")
    if "tansu" in targets:
        table.add_column("ours vs Tansu", justify="right")
    for target in targets:
        table.add_column(f"{target} msg/s", justify="right")
    table.add_column("rate ours/mock", justify="right")
    table.add_column("rec/batch ours; mock", justify="right")
    for workload in workload_order(results):
        row = [Workload.parse(workload).label]
        for target in targets:
            us, idle = get(target, workload, "produce_us"), get(target, workload, "produce_idle_us")
            row.append(f"{fmt(us, '.2f')} ({fmt(idle, '.2f')})" if us is not None else "-")
        ours = get("epochlog", workload, "produce_us")
        row.append(
            ratio_cell(
                ours,
                get("mock", workload, "produce_us"),
                TARGET_RATIOS.get((workload, "produce")),
            )
        )
        if "tansu" in targets:
            row.append(ratio_cell(ours, get("tansu", workload, "produce_us")))
        for target in targets:
            row.append(fmt(get(target, workload, "rate"), ",.0f"))
        row.append(ratio_cell(get("epochlog", workload, "rate"), get("mock", workload, "rate")))
        # librdkafka sends one partition's batch per ProduceRequest: records per request
        # (saved in the JSON) are the same figure
        row.append(
            f"{fmt(get('epochlog', workload, 'per_batch'), ',.0f')}; "
            f"{fmt(get('mock', workload, 'per_batch'), ',.0f')}"
        )
        table.add_row(*row)
    console.print(table)

    consumed = [w for w in workload_order(results) if get("epochlog", w, "consume_us") is not None]
    if consumed:
        table = Table(title="Servers' CPU per record consumed (assign() from the beginning)")
        table.add_column("workload", no_wrap=True)
        for target in targets:
            table.add_column(f"{target} µs/rec (idle)", justify="right")
        table.add_column("ours vs mock", justify="right")
        if "tansu" in targets:
            table.add_column("ours vs Tansu", justify="right")
        for workload in consumed:
            row = [Workload.parse(workload).label]
            for target in targets:
                us = get(target, workload, "consume_us")
                idle = get(target, workload, "consume_idle_us")
                row.append(f"{fmt(us, '.3f')} ({fmt(idle, '.3f')})" if us is not None else "-")
            ours = get("epochlog", workload, "consume_us")
            row.append(
                ratio_cell(
                    ours,
                    get("mock", workload, "consume_us"),
                    TARGET_RATIOS.get((workload, "consume")),
                )
            )
            if "tansu" in targets:
                row.append(ratio_cell(ours, get("tansu", workload, "consume_us")))
            table.add_row(*row)
        console.print(table)

    if results.latency:
        table = Table(
            title=f"End-to-end latency at {LATENCY_RATE:,} msg/s, acks=all, linger.ms "
            f"{meta.get('latency_linger_ms', '?')}, 100 B, {PARTITIONS} partitions (the first "
            f"{LATENCY_WARMUP_S:g} s left out); the mock's consumer uses fetch.wait.max.ms 10 "
            "(it holds a Fetch for the whole max wait)"
        )
        for column in (
            "target",
            "RF",
            "records",
            "achieved msg/s",
            "p50 ms",
            "p99 ms",
            "max ms",
            "server µs/rec",
            f"p99 < {LATENCY_P99_TARGET_MS:g} ms",
        ):
            table.add_column(column, justify="left" if column == "target" else "right")
        for lat in results.latency:
            met = lat.p99_ms < LATENCY_P99_TARGET_MS
            table.add_row(
                LABELS[lat.target],
                str(lat.rf),
                f"{lat.records:,}",
                f"{lat.achieved_rate:,.0f}",
                f"{lat.p50_ms:.2f}",
                f"{lat.p99_ms:.2f}",
                f"{lat.max_ms:.2f}",
                f"{lat.server_cpu_us_per_record:.1f}",
                f"[{'green' if met else 'red'}]{'met' if met else 'not met'}[/]"
                if lat.target == "epochlog"
                else "",
            )
        console.print(table)
    for what, why in results.skipped.items():
        console.print(f"[yellow]{what}: not measured: {why}[/yellow]")
    console.print(
        "[dim]µs/rec: the servers' utime + stime over the timed phase per record; (idle): the "
        "part of it the same servers spend doing nothing, from their CPU over one idle second "
        "before the phase. Targets (issue 20) apply to 100 B records against the mock. "
        f"Load average at the end of the run: {meta.get('load_average', 0):.2f} on "
        f"{meta.get('cores', '?')} cores.[/dim]"
    )


def print_comparison(old: Results, new: Results) -> None:
    before, after = medians(old), medians(new)
    table = Table(
        title=f"before -> after: {old.meta.get('date', '?')} ({old.meta.get('commit', '?')}) -> "
        f"{new.meta.get('date', '?')} ({new.meta.get('commit', '?')})"
    )
    for column in ("target", "workload", "figure", "before", "after", "after / before"):
        table.add_column(column, justify="left" if column in ("target", "workload") else "right")
    figures = (
        ("produce_us", "produce µs/rec"),
        ("rate", "msg/s"),
        ("consume_us", "consume µs/rec"),
    )
    for key in sorted(set(before) & set(after)):
        for figure, label in figures:
            b, a = before[key].get(figure), after[key].get(figure)
            if b is None or a is None:
                continue
            table.add_row(
                LABELS.get(key[0], key[0]), key[1], label, number(b), number(a), f"{a / b:.2f}x"
            )
    # ours over the mock: each measured in its own run beside the mock, so the machine's
    # noise that moves both cancels out here
    for workload in sorted({w for t, w in before} & {w for t, w in after}):
        for figure, label in (
            ("produce_us", "produce ours/mock"),
            ("consume_us", "consume ours/mock"),
            ("rate", "rate ours/mock"),
        ):
            ratios = []
            for side in (before, after):
                ours = side.get(("epochlog", workload), {}).get(figure)
                mock = side.get(("mock", workload), {}).get(figure)
                ratios.append(ours / mock if ours is not None and mock else None)
            b, a = ratios
            if b is not None and a is not None:
                table.add_row(
                    "epochlog / mock", workload, label, f"{b:.2f}x", f"{a:.2f}x", f"{a / b:.2f}x"
                )
    for lat_a in new.latency:
        for lat_b in old.latency:
            if lat_a.target == lat_b.target:
                for label, b, a in (
                    ("latency p50 ms", lat_b.p50_ms, lat_a.p50_ms),
                    ("latency p99 ms", lat_b.p99_ms, lat_a.p99_ms),
                ):
                    table.add_row(
                        LABELS[lat_a.target],
                        f"RF {lat_a.rf}",
                        label,
                        f"{b:.2f}",
                        f"{a:.2f}",
                        f"{a / b:.2f}x",
                    )
    console.print(table)


def load(path: Path) -> Results:
    try:
        return Results.from_json(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SystemExit(f"{path}: not a results file of bench/efficiency.py ({e})") from e
