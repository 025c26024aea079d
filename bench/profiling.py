"""Sampling a running process with py-spy during a benchmark, and where its time went.

`PySpy(pid, path)` starts `py-spy record --format raw` on the process (non-blocking sampling,
every thread that is not idle), `stop()` ends it and writes the collapsed stacks, and
`hotspots(path)` reads them back: per function, the share of samples spent in it (self) and
under it (inclusive); `print_hotspots` prints them as a table. Used by `bench/controller.py
--profile` and `bench/efficiency.py --profile`.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from epochlog.processes import spawn

_LINE = re.compile(r"^(?P<stack>.*) (?P<count>\d+)$")
_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^():]*)(?::\d+)?\)$")


def py_spy() -> str | None:
    """The py-spy executable next to this interpreter, else on PATH."""
    local = Path(sys.executable).parent / "py-spy"
    return str(local) if local.exists() else shutil.which("py-spy")


class PySpy:
    def __init__(self, pid: int, path: Path, rate: int = 200) -> None:
        executable = py_spy()
        if executable is None:
            raise RuntimeError("py-spy not found (pip install py-spy)")
        self.pid = pid
        self.path = path
        self.process = spawn(
            [
                executable,
                "record",
                "--pid",
                str(pid),
                "--output",
                str(path),
                "--format",
                "raw",
                "--rate",
                str(rate),
                "--nonblocking",
                "--threads",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(0.5)  # attached and sampling before the measured event

    def stop(self) -> Path | None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.path if self.path.exists() else None


def _frame_name(frame: str) -> str:
    match = _FRAME.match(frame.strip())
    if match is None:
        return frame.strip()
    file = match["file"]
    for marker in ("/epochlog/", "/site-packages/", "/lib/python3"):
        if marker in file:
            file = file.split(marker, 1)[1]
            break
    return f"{match['func']} ({file})"


# Frames where a thread waits rather than works (py-spy counts some as active: uvloop's wait
# for events shows as its caller Runner.run, kazoo's as select).
WAITS = (
    "select (selectors.py)",
    "EpollSelector.select (selectors.py)",
    "Condition.wait (threading.py)",
    "Runner.run (asyncio/runners.py)",
    "run (asyncio/runners.py)",  # the same wait as py-spy 0.4 names it
    "SequentialThreadingHandler.select (kazoo/handlers/threading.py)",
)
# Frames on every stack of a thread, which say nothing about where its time went.
FRAMES_EVERYWHERE = (
    "<module>",
    "_run_code",
    "_run_module_as_main",
    "main (",
    "cmd_broker",
    "run_from_properties",
    "Runner.run",
    "run (asyncio",
    "Thread._bootstrap",
    "Thread.run",
    "_worker (",
    "_WorkItem.run",
    "Connection._serve",
    "Connection._handle",
    "run (epochlog/broker/eventloop.py)",
    "run (epochlog/cli/commands.py)",
)


@dataclass(frozen=True)
class Hotspots:
    samples: int  # all samples of non-idle threads
    waiting: int  # of which in a wait (WAITS)
    by_thread: list[tuple[str, int]]
    self_time: list[tuple[str, int]]  # busy samples only
    inclusive: list[tuple[str, int]]  # busy samples only


def hotspots(path: Path, top: int = 15) -> Hotspots:
    """Top functions by self and inclusive samples in a py-spy raw (collapsed) profile,
    leaving out the samples where a thread was waiting."""
    self_counts: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    threads: Counter[str] = Counter()
    total = waiting = 0
    for line in path.read_text().splitlines():
        match = _LINE.match(line)
        if match is None:
            continue
        count = int(match["count"])
        frames = match["stack"].split(";")
        thread, frames = frames[0], frames[1:]
        if not frames:
            continue
        total += count
        names = [_frame_name(f) for f in frames]
        if names[-1] in WAITS:
            waiting += count
            continue
        threads[re.sub(r"^thread \(\w+\):?\s*", "", thread).strip() or thread] += count
        self_counts[names[-1]] += count
        for name in set(names):
            if not name.startswith(FRAMES_EVERYWHERE):
                inclusive[name] += count
    return Hotspots(
        total,
        waiting,
        threads.most_common(6),
        self_counts.most_common(top),
        inclusive.most_common(top),
    )


def print_hotspots(console: Console, title: str, path: Path, rate: int = 200) -> None:
    """The top functions of a py-spy raw profile as a table: self and inclusive shares of the
    busy samples, then the busy samples by thread."""
    spots = hotspots(path)
    busy = spots.samples - spots.waiting
    if not busy:
        console.print(f"[dim]{title}: no busy samples ({path})[/dim]")
        return
    table = Table(
        title=f"py-spy, {title}: {busy:,} busy samples at {rate} Hz (~{busy / rate:.1f} s of "
        f"thread time; {spots.waiting:,} more waiting); {path}"
    )
    table.add_column("self", justify="right")
    table.add_column("function (self time)")
    table.add_column("inclusive", justify="right")
    table.add_column("function (inclusive)")
    for i in range(max(len(spots.self_time), len(spots.inclusive))):
        own = spots.self_time[i] if i < len(spots.self_time) else ("", 0)
        inc = spots.inclusive[i] if i < len(spots.inclusive) else ("", 0)
        table.add_row(
            f"{100 * own[1] / busy:.1f}%" if own[0] else "",
            own[0],
            f"{100 * inc[1] / busy:.1f}%" if inc[0] else "",
            inc[0],
        )
    console.print(table)
    console.print(
        "[dim]busy samples by thread: "
        + ", ".join(f"{name} {100 * c / busy:.0f}%" for name, c in spots.by_thread)
        + "[/dim]"
    )
