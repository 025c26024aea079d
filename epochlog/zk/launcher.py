"""Start a real ZooKeeper server (Debian's `zookeeper` package) as a child process.

`ZooKeeperServer` writes a `zoo.cfg` into a directory of its own (`<dir>/zoo.cfg`, data in
`<dir>/data`, log4j output in `<dir>/logs/zookeeper.log`, the JVM's stdout and stderr in
`<dir>/logs/zookeeper.out`) and runs `java ... org.apache.zookeeper.server.quorum.QuorumPeerMain
zoo.cfg` with the classpath from `reference/zookeeper.md` (without the two log4j jars there would
be no logs at all). The child gets PR_SET_PDEATHSIG through `prctl` so it dies with the process
that started it; note that Linux ties this to the starting *thread*, so start servers from a
thread that lives as long as the server should (the main thread, not a short-lived worker).
Readiness is the `srvr` four-letter word answering with a `Mode:` line. `stop()` sends SIGTERM,
waits, then SIGKILLs; `kill()` SIGKILLs at once (a crash). The server is a context manager.

The zoo.cfg text and the `srvr` parsing are pure functions (`render_zoo_cfg`, `parse_srvr_mode`),
so the ensemble form of the config (`servers` and `my_id`, as in reference/zookeeper.md §4) is
tested without a JVM. For an ensemble, start every node with `wait=False` and then call
`wait_ready()` on each: a node reports a `Mode:` only once a quorum exists.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from epochlog.processes import spawn

ZOOKEEPER_CONF_DIR = "/etc/zookeeper/conf"
ZOOKEEPER_JAR_CANDIDATES = ("/usr/share/java/zookeeper.jar",)
LOG4J_JARS = ("/usr/share/java/slf4j-log4j12.jar", "/usr/share/java/log4j-1.2.jar")
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
INSTALL_HINT = "install Debian's ZooKeeper: `sudo apt-get install zookeeper` (or run `make setup`)"


class ZooKeeperNotInstalledError(RuntimeError):
    """java or the ZooKeeper jar is missing; the message says what to install."""


class ZooKeeperStartError(RuntimeError):
    """The server process exited or did not become ready; the message carries the log tail."""


def find_zookeeper_jar(candidates: tuple[str, ...] = ZOOKEEPER_JAR_CANDIDATES) -> Path:
    """Return the path of `zookeeper.jar`, or raise saying which package provides it."""
    env = os.environ.get("EPOCHLOG_ZOOKEEPER_JAR")
    for candidate in ((env,) if env else ()) + candidates:
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    raise ZooKeeperNotInstalledError(
        f"ZooKeeper jar not found (looked at {', '.join(candidates)}); {INSTALL_HINT}"
    )


def find_java() -> str:
    """Return the java executable ($JAVA_HOME/bin/java or `java` on PATH), or raise."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and os.access(Path(java_home, "bin", "java"), os.X_OK):
        return str(Path(java_home, "bin", "java"))
    found = shutil.which("java")
    if found:
        return found
    raise ZooKeeperNotInstalledError(
        "java not found on PATH; `sudo apt-get install zookeeper` pulls in a Java runtime "
        "(or install one: `sudo apt-get install default-jre-headless`)"
    )


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port the kernel just handed out on `host` (free now, not reserved)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class ZooKeeperConfig:
    """What goes into zoo.cfg. Times in milliseconds; `servers` maps id -> "host:p1:p2;host:cp"."""

    data_dir: Path
    client_port: int
    client_address: str = "127.0.0.1"
    tick_time_ms: int = 500
    min_session_timeout_ms: int = 1000
    # ZooKeeper's default maximum is 20 ticks (10 s at tick 500), which would silently cut
    # Kafka's default zookeeper.session.timeout.ms of 18000; allow up to a minute.
    max_session_timeout_ms: int = 60000
    init_limit: int = 20
    sync_limit: int = 5
    fsync: bool = True
    servers: Mapping[int, str] = field(default_factory=dict)
    my_id: int | None = None
    extra: Mapping[str, str] = field(default_factory=dict)


def render_zoo_cfg(config: ZooKeeperConfig) -> str:
    """The zoo.cfg text for `config` (standalone unless `servers` is given)."""
    lines = [
        f"tickTime={config.tick_time_ms}",
        f"initLimit={config.init_limit}",
        f"syncLimit={config.sync_limit}",
        f"dataDir={config.data_dir}",
        f"clientPort={config.client_port}",
        f"clientPortAddress={config.client_address}",
        f"minSessionTimeout={config.min_session_timeout_ms}",
        f"maxSessionTimeout={config.max_session_timeout_ms}",
        "admin.enableServer=false",
        "4lw.commands.whitelist=*",
        # Unknown keys become zookeeper.* system properties; forceSync=no skips the fsync per txn.
        f"forceSync={'yes' if config.fsync else 'no'}",
    ]
    if config.servers:
        if config.my_id is None or config.my_id not in config.servers:
            raise ValueError("an ensemble config needs my_id, one of the server ids")
        lines += [f"server.{sid}={spec}" for sid, spec in sorted(config.servers.items())]
    lines += [f"{key}={value}" for key, value in config.extra.items()]
    return "\n".join(lines) + "\n"


def parse_srvr_mode(reply: str) -> str | None:
    """The `Mode:` value (standalone, leader, follower, ...) of a `srvr` reply, or None."""
    for line in reply.splitlines():
        if line.startswith("Mode:"):
            return line.split(":", 1)[1].strip() or None
    return None


def four_letter_word(host: str, port: int, word: str, timeout: float = 1.0) -> str:
    """Send a four-letter command (`srvr`, `ruok`, `mntr`, ...) and return the whole reply."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(word.encode("ascii"))
        chunks: list[bytes] = []
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


class ZooKeeperServer:
    """One ZooKeeper server process with its own directory; see the module docstring."""

    def __init__(
        self,
        base_dir: str | os.PathLike[str],
        *,
        client_port: int | None = None,
        host: str = "127.0.0.1",
        tick_time_ms: int = 500,
        min_session_timeout_ms: int = 1000,
        max_session_timeout_ms: int = 60000,
        fsync: bool = True,
        servers: Mapping[int, str] | None = None,
        my_id: int | None = None,
        extra_config: Mapping[str, str] | None = None,
        heap: str = "256m",
        startup_timeout_s: float = 30.0,
        die_with_parent: bool = True,
    ) -> None:
        self.base_dir = Path(base_dir).resolve()
        self.host = host
        self.client_port = client_port if client_port is not None else free_port(host)
        self.config = ZooKeeperConfig(
            data_dir=self.base_dir / "data",
            client_port=self.client_port,
            client_address=host,
            tick_time_ms=tick_time_ms,
            min_session_timeout_ms=min_session_timeout_ms,
            max_session_timeout_ms=max_session_timeout_ms,
            fsync=fsync,
            servers=dict(servers or {}),
            my_id=my_id,
            extra=dict(extra_config or {}),
        )
        self.heap = heap
        self.startup_timeout_s = startup_timeout_s
        self.die_with_parent = die_with_parent
        self.log_dir = self.base_dir / "logs"
        self.cfg_path = self.base_dir / "zoo.cfg"
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def connect_string(self) -> str:
        return f"{self.host}:{self.client_port}"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def is_running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def command(self) -> list[str]:
        """The java command line (resolving java and the jar, which may raise)."""
        jar = find_zookeeper_jar()
        classpath = ":".join([ZOOKEEPER_CONF_DIR, str(jar), *LOG4J_JARS])
        return [
            find_java(),
            f"-Xmx{self.heap}",
            "-XX:+UseSerialGC",
            f"-Dzookeeper.log.dir={self.log_dir}",
            "-Dzookeeper.root.logger=INFO,ROLLINGFILE",
            "-cp",
            classpath,
            MAIN_CLASS,
            str(self.cfg_path),
        ]

    def start(self, *, wait: bool = True) -> ZooKeeperServer:
        """Write zoo.cfg, spawn the JVM and (with `wait`) block until it serves.

        With `die_with_parent` the server is SIGKILLed when the *calling thread* exits, so call
        this from a long-lived thread. Raises ZooKeeperNotInstalledError or ZooKeeperStartError.
        """
        if self.is_running():
            raise RuntimeError(f"ZooKeeper at {self.connect_string} is already running")
        cmd = self.command()
        self.config.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.cfg_path.write_text(render_zoo_cfg(self.config))
        if self.config.my_id is not None:
            (self.config.data_dir / "myid").write_text(f"{self.config.my_id}\n")
        with open(self.log_dir / "zookeeper.out", "ab") as out:
            self._process = spawn(
                cmd,
                die_with_parent_process=self.die_with_parent,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.base_dir,
            )
        if wait:
            try:
                self.wait_ready()
            except BaseException:
                self.kill()
                raise
        return self

    def wait_ready(self, timeout_s: float | None = None) -> str:
        """Poll `srvr` until it reports a mode; return it. Raises ZooKeeperStartError."""
        deadline = time.monotonic() + (
            timeout_s if timeout_s is not None else self.startup_timeout_s
        )
        while True:
            if self._process is None or self._process.poll() is not None:
                code = None if self._process is None else self._process.returncode
                raise ZooKeeperStartError(
                    f"ZooKeeper on port {self.client_port} exited with code {code}"
                    f"\n--- log tail ---\n{self.log_tail()}"
                )
            with contextlib.suppress(OSError):
                mode = parse_srvr_mode(four_letter_word(self.host, self.client_port, "srvr"))
                if mode:
                    return mode
            if time.monotonic() > deadline:
                raise ZooKeeperStartError(
                    f"ZooKeeper on port {self.client_port} not ready after "
                    f"{timeout_s or self.startup_timeout_s:.1f}s\n--- log tail ---\n"
                    f"{self.log_tail()}"
                )
            time.sleep(0.05)

    def mode(self) -> str | None:
        """The server's current mode from `srvr`, or None if it does not answer."""
        try:
            return parse_srvr_mode(four_letter_word(self.host, self.client_port, "srvr"))
        except OSError:
            return None

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM, wait up to `timeout_s`, then SIGKILL. Safe to call when not running."""
        process = self._process
        if process is None:
            return
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.kill()
                return
        process.wait()

    def kill(self) -> None:
        """SIGKILL the server (a crash: no clean shutdown) and reap it."""
        process = self._process
        if process is None:
            return
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
        process.wait()

    def log_tail(self, lines: int = 40) -> str:
        parts = []
        for name in ("zookeeper.out", "zookeeper.log"):
            path = self.log_dir / name
            if path.is_file() and path.stat().st_size > 0:
                text = path.read_text("utf-8", "replace").splitlines()[-lines:]
                parts.append(f"[{path}]\n" + "\n".join(text))
        return "\n".join(parts) or "(no log output)"

    def __enter__(self) -> ZooKeeperServer:
        if not self.is_running():
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.is_running() else "stopped"
        return f"ZooKeeperServer({self.connect_string}, pid={self.pid}, {state})"


def main(argv: list[str] | None = None) -> int:
    """`python -m epochlog.zk.launcher DIR [PORT]`: run a server in the foreground until ^C."""
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print("usage: python -m epochlog.zk.launcher DIR [PORT]", file=sys.stderr)
        return 2
    server = ZooKeeperServer(args[0], client_port=int(args[1]) if len(args) > 1 else None)
    with server:
        mode, where = server.mode(), server.connect_string
        print(f"ZooKeeper {mode} at {where} (pid {server.pid})", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while server.is_running():
                time.sleep(0.5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
