"""A local cluster: one real ZooKeeper and N real broker processes on loopback.

Shared by the tests, the benchmarks, the demo and `epochlog up`. Each broker gets a directory
`<dir>/broker-<id>/` with its `server.properties` (free ports chosen once, so a restarted broker
comes back at the same address), its log dir and its output. The cluster keeps the pid of every
process it started and only ever signals those pids. `placements` puts chosen brokers elsewhere
than loopback: an address of their own and a launcher prefix (a test lab's network namespace).

Two lifetimes: `die_with_parent=True` (tests, benchmarks, demo) makes every child die with the
process that started it (PR_SET_PDEATHSIG), so a crashed test leaves nothing behind;
`die_with_parent=False` (`epochlog up`) detaches the processes and records them in
`<dir>/cluster.json`, from which `LocalCluster.attach` and `epochlog down` find them again.

Each broker's first listener is the cluster's main listener (`listener`, PLAINTEXT by default;
SASL_SSL for `epochlog up --secure`): its port is `BrokerProcess.port`, `bootstrap_servers`
lists it, and it is kept in `cluster.json`. The harness itself speaks to brokers only through
ZooKeeper (`zk_state`) and a TCP connect (`wait_ready`), so it works whatever the listener's
protocol; with `zk_login` it logs in to ZooKeeper (a locked-down one, `zookeeper.set.acl`).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kazoo.exceptions import NoNodeError

from epochlog.node.shutdown_report import IncompleteShutdown, incomplete_shutdown_in
from epochlog.processes import spawn
from epochlog.zk.launcher import ZooKeeperServer, free_port
from epochlog.zk.security import ZkLogin

STATE_FILE = "cluster.json"


class ClusterError(RuntimeError):
    pass


@dataclass(frozen=True)
class BrokerPlacement:
    """Where a broker runs when not on loopback: the address it listens on (and advertises), its
    port (None: a free one) and a prefix its command runs under (`ip netns exec <ns>`: a network
    namespace of a test lab, epochlog.testing.netlab)."""

    host: str = "127.0.0.1"
    port: int | None = None
    launcher: tuple[str, ...] = ()


@dataclass
class BrokerProcess:
    broker_id: int
    port: int
    directory: Path
    pid: int | None = None
    process: subprocess.Popen[bytes] | None = None
    host: str = "127.0.0.1"
    launcher: tuple[str, ...] = ()
    # listener name -> port of the listeners after the first (the main one, which `port` is)
    extra_ports: dict[str, int] = field(default_factory=dict)
    # the Prometheus endpoint's port (metrics.port), None when metrics are off
    metrics_port: int | None = None

    @property
    def metrics_endpoint(self) -> str | None:
        """http://host:port/metrics of this broker, None when metrics are off."""
        if self.metrics_port is None:
            return None
        return f"http://{self.host}:{self.metrics_port}/metrics"

    @property
    def config_path(self) -> Path:
        return self.directory / "server.properties"

    @property
    def log_path(self) -> Path:
        return self.directory / "broker.out"

    def is_running(self) -> bool:
        if self.process is not None:
            return self.process.poll() is None
        if self.pid is None:
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        return _not_zombie(self.pid)


def _not_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _port_open(port: int, host: str = "127.0.0.1") -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False


class LocalCluster:
    def __init__(
        self,
        directory: str | os.PathLike[str],
        brokers: int = 3,
        *,
        zookeeper: str | None = None,
        broker_config: Mapping[str, Any] | None = None,
        die_with_parent: bool = True,
        zk_session_timeout_ms: int = 6000,
        log_dirs_per_broker: int = 1,
        placements: Mapping[int, BrokerPlacement] | None = None,
        extra_listeners: Sequence[str] = (),
        listener: str = "PLAINTEXT",
        zk_login: ZkLogin | None = None,
    ) -> None:
        self.directory = Path(directory).resolve()
        # The main listener (each broker's first; `bootstrap_servers`): PLAINTEXT unless secure.
        self.listener = listener.upper()
        # Listeners each broker has beside the main one, each on a free port kept across
        # restarts: e.g. ("SSL",) for clients under test, with broker_config naming their
        # protocols and the inter-broker listener as a test needs.
        self.extra_listeners = tuple(name.upper() for name in extra_listeners)
        self.zk_login = zk_login  # how the harness logs in to ZooKeeper (None: it does not)
        self.broker_count = brokers
        self.external_zookeeper = zookeeper
        self.broker_config = dict(broker_config or {})
        self.die_with_parent = die_with_parent
        self.zk_session_timeout_ms = zk_session_timeout_ms
        self.log_dirs_per_broker = log_dirs_per_broker  # logs, logs-2, ... in each broker's dir
        self.zk: ZooKeeperServer | None = None
        self.zk_pid: int | None = None
        self.zk_connect: str | None = zookeeper
        self.brokers: dict[int, BrokerProcess] = {}
        self.placements = dict(placements or {})  # broker id -> where it runs (default loopback)
        # epochs of the generations restarted brokers replace (see wait_ready)
        self._previous_epochs: dict[int, int] = {}

    # ------------------------------------------------------------------------- lifecycle

    def start(self, timeout_s: float = 60.0) -> LocalCluster:
        self.start_zookeeper()
        return self.start_brokers(timeout_s)

    def start_zookeeper(self) -> None:
        """ZooKeeper alone (unless an external one is used): what must be in it before the
        brokers start (SCRAM credentials, `epochlog up --secure`) can be written now."""
        self.directory.mkdir(parents=True, exist_ok=True)
        if self.external_zookeeper is None and self.zk is None:
            self.zk = ZooKeeperServer(
                self.directory / "zookeeper", die_with_parent=self.die_with_parent
            )
            self.zk.start()
            self.zk_pid = self.zk.pid
            self.zk_connect = self.zk.connect_string
        self._save()

    def start_brokers(self, timeout_s: float = 60.0) -> LocalCluster:
        for broker_id in range(1, self.broker_count + 1):
            self.brokers[broker_id] = self._configure(broker_id)
        for broker in self.brokers.values():
            self._spawn(broker)
        self._save()
        self.wait_ready(timeout_s=timeout_s)
        return self

    def _configure(self, broker_id: int, port: int | None = None) -> BrokerProcess:
        directory = self.directory / f"broker-{broker_id}"
        directory.mkdir(parents=True, exist_ok=True)
        config_path = directory / "server.properties"
        extra_ports: dict[str, int] = {}
        if config_path.exists():
            existing = dict(
                line.split("=", 1) for line in config_path.read_text().splitlines() if "=" in line
            )
            ports = {
                listener.split("://", 1)[0]: int(listener.rsplit(":", 1)[1])
                for listener in existing["listeners"].split(",")
            }
            extra_ports = {name: p for name, p in ports.items() if name != self.listener}
            if port is None:
                port = ports[self.listener]
        existing_dirs: str | None = None
        metrics_port: int | None = None
        if config_path.exists():
            for line in config_path.read_text().splitlines():
                if line.startswith("log.dirs="):
                    existing_dirs = line.split("=", 1)[1]  # a restart keeps the broker's dirs
                if line.startswith("metrics.port="):  # and its metrics endpoint
                    metrics_port = int(line.split("=", 1)[1])
        placement = self.placements.get(broker_id, BrokerPlacement())
        port = port or placement.port or free_port()
        for name in self.extra_listeners:
            extra_ports.setdefault(name, free_port())
        # Metrics are on in a local cluster, each broker on a port of its own (Prometheus
        # targets stay put across restarts); broker_config's metrics.port=-1 turns them off.
        if metrics_port is None or metrics_port < 0:
            metrics_port = free_port()
        if int(self.broker_config.get("metrics.port", 0)) < 0:
            metrics_port = -1
        values: dict[str, Any] = {
            "broker.id": broker_id,
            "listeners": ",".join(
                [f"{self.listener}://{placement.host}:{port}"]
                + [f"{name}://{placement.host}:{p}" for name, p in extra_ports.items()]
            ),
            "log.dirs": existing_dirs
            or ",".join(
                str(directory / ("logs" if i == 1 else f"logs-{i}"))
                for i in range(1, self.log_dirs_per_broker + 1)
            ),
            "zookeeper.connect": self.zk_connect,
            "zookeeper.session.timeout.ms": self.zk_session_timeout_ms,
            "controlled.shutdown.retry.backoff.ms": 500,
            "replica.lag.time.max.ms": 10000,
            "epochlog.cluster.dir": str(self.directory),
            "metrics.port": metrics_port,
        }
        values.update(self.broker_config)
        values["metrics.port"] = metrics_port
        config_path.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
        config_path.chmod(0o600)  # it may hold the broker's own login (sasl.jaas.config)
        return BrokerProcess(
            broker_id,
            port,
            directory,
            host=placement.host,
            launcher=placement.launcher,
            extra_ports=extra_ports,
            metrics_port=metrics_port if metrics_port >= 0 else None,
        )

    def _spawn(self, broker: BrokerProcess) -> None:
        out = open(broker.log_path, "ab")  # noqa: SIM115 - handed to the child
        try:
            broker.process = spawn(
                [
                    *broker.launcher,
                    sys.executable,
                    "-m",
                    "epochlog",
                    "broker",
                    "start",
                    "--config",
                    str(broker.config_path),
                ],
                die_with_parent_process=self.die_with_parent,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        finally:
            out.close()
        broker.pid = broker.process.pid

    def wait_ready(
        self,
        broker_ids: list[int] | None = None,
        timeout_s: float = 60.0,
        newer_than: dict[int, int] | None = None,
    ) -> None:
        """Until every broker listens and is registered, and a controller is elected.

        `newer_than` maps broker ids to epochs their registration must exceed: a restarted
        broker counts only once its new generation has registered, not while the znode of its
        killed predecessor is still waiting for the session to expire."""
        ids = broker_ids or sorted(self.brokers)
        newer_than = newer_than if newer_than is not None else self._previous_epochs
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for broker_id in ids:
                broker = self.brokers[broker_id]
                if not broker.is_running():
                    raise ClusterError(
                        f"broker {broker_id} exited; its output ends with:\n"
                        + self.output_tail(broker_id)
                    )
            if all(_port_open(self.brokers[b].port, self.brokers[b].host) for b in ids):
                state = self.zk_state()
                registered = state["brokers"]
                if (
                    all(b in registered and registered[b] > newer_than.get(b, -1) for b in ids)
                    and state["controller"] is not None
                ):
                    return
            time.sleep(0.1)
        raise ClusterError(f"brokers {ids} not ready after {timeout_s:.0f} s")

    def zk_state(self) -> dict[str, Any]:
        """Registered broker ids with epochs, and the controller (read from ZooKeeper)."""
        from epochlog.zk.session import close_client, connect

        client = connect(self.zk_connect or "", session_timeout_ms=4000, login=self.zk_login)
        try:
            brokers: dict[int, int] = {}
            if client.exists("/brokers/ids"):
                for child in client.get_children("/brokers/ids"):
                    stat = client.exists(f"/brokers/ids/{child}")
                    if stat is not None:
                        brokers[int(child)] = stat.czxid
            controller = None
            try:  # read, not exists-then-get: an election may delete it in between
                data, _ = client.get("/controller")
                controller = json.loads(data)["brokerid"]
            except NoNodeError:
                pass
            return {"brokers": brokers, "controller": controller}
        finally:
            close_client(client)

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{b.host}:{b.port}" for b in self.brokers.values())

    def listener_bootstrap(self, listener: str) -> str:
        """host:port of every broker's `listener` (one of `extra_listeners`, or the main one)."""
        if listener.upper() == self.listener:
            return self.bootstrap_servers
        return ",".join(
            f"{b.host}:{b.extra_ports[listener.upper()]}" for b in self.brokers.values()
        )

    def metrics_endpoints(self) -> dict[int, str]:
        """Each broker's Prometheus endpoint (brokers with metrics off left out)."""
        return {
            b.broker_id: endpoint
            for b in self.brokers.values()
            if (endpoint := b.metrics_endpoint) is not None
        }

    def controller_id(self) -> int | None:
        return self.zk_state()["controller"]

    def output_tail(self, broker_id: int, lines: int = 30) -> str:
        path = self.brokers[broker_id].log_path
        if not path.exists():
            return "(no output)"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    # ------------------------------------------------------------------------- operations

    def stop_broker(self, broker_id: int, timeout_s: float = 60.0) -> IncompleteShutdown | None:
        """SIGTERM: the broker runs its controlled shutdown, then exits. Returns what its
        controlled shutdown left behind (the partitions it still led), None when complete."""
        broker = self.brokers[broker_id]
        start = broker.log_path.stat().st_size if broker.log_path.exists() else 0
        self._signal_and_wait(broker, signal.SIGTERM, timeout_s)
        if not broker.log_path.exists():
            return None
        with open(broker.log_path, "rb") as out:
            out.seek(start)
            return incomplete_shutdown_in(out.read().decode(errors="replace"))

    def kill_broker(self, broker_id: int) -> None:
        """SIGKILL: a crash."""
        self._signal_and_wait(self.brokers[broker_id], signal.SIGKILL, 10.0)

    def start_broker(self, broker_id: int, wait: bool = True) -> None:
        broker = self.brokers[broker_id]
        if broker.is_running():
            raise ClusterError(f"broker {broker_id} is already running (pid {broker.pid})")
        previous = self.zk_state()["brokers"].get(broker_id, -1)
        self._spawn(broker)
        self._save()
        self._previous_epochs[broker_id] = previous
        if wait:
            self.wait_ready([broker_id], newer_than={broker_id: previous})

    def _signal_and_wait(self, broker: BrokerProcess, sig: int, timeout_s: float) -> None:
        if not broker.is_running() or broker.pid is None:
            return
        os.kill(broker.pid, sig)
        deadline = time.monotonic() + timeout_s
        while broker.is_running():
            if time.monotonic() > deadline:
                os.kill(broker.pid, signal.SIGKILL)
                deadline = time.monotonic() + 10
            time.sleep(0.05)
            if broker.process is not None:
                broker.process.poll()

    def close(self) -> None:
        """Stop every process this cluster started (brokers by SIGTERM, then ZooKeeper)."""
        for broker in self.brokers.values():
            if broker.is_running() and broker.pid is not None:
                os.kill(broker.pid, signal.SIGTERM)
        for broker in self.brokers.values():
            self._signal_and_wait(broker, signal.SIGTERM, 30.0)
        if self.zk is not None:
            self.zk.stop()
        elif self.zk_pid is not None and self.external_zookeeper is None:
            _kill_pid(self.zk_pid)
        state = self.directory / STATE_FILE
        if state.exists():
            state.unlink()

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------------- persistence

    def _save(self) -> None:
        state = {
            "zookeeper": self.zk_connect,
            "zookeeper_pid": self.zk_pid,
            "external_zookeeper": self.external_zookeeper is not None,
            "listener": self.listener,
            "brokers": {
                str(b.broker_id): {
                    "port": b.port,
                    "pid": b.pid,
                    "host": b.host,
                    "extra_ports": b.extra_ports,
                    "metrics_port": b.metrics_port,
                }
                for b in self.brokers.values()
            },
        }
        (self.directory / STATE_FILE).write_text(json.dumps(state, indent=2))

    @classmethod
    def attach(
        cls, directory: str | os.PathLike[str], zk_login: ZkLogin | None = None
    ) -> LocalCluster:
        """The cluster `epochlog up` started in `directory` (`zk_login`: how to log in to its
        ZooKeeper, when it is locked down)."""
        path = Path(directory).resolve() / STATE_FILE
        if not path.exists():
            raise ClusterError(f"no local cluster in {path.parent} (run `epochlog up` first)")
        state = json.loads(path.read_text())
        cluster = cls(
            path.parent,
            len(state["brokers"]),
            die_with_parent=False,
            listener=state.get("listener", "PLAINTEXT"),
            zk_login=zk_login,
        )
        cluster.zk_connect = state["zookeeper"]
        cluster.zk_pid = state["zookeeper_pid"]
        if state["external_zookeeper"]:
            cluster.external_zookeeper = state["zookeeper"]
        for broker_id, info in state["brokers"].items():
            b = BrokerProcess(
                int(broker_id),
                info["port"],
                path.parent / f"broker-{broker_id}",
                host=info.get("host", "127.0.0.1"),
                extra_ports=info.get("extra_ports", {}),
                metrics_port=info.get("metrics_port"),
            )
            b.pid = info["pid"]
            cluster.brokers[int(broker_id)] = b
        return cluster


def _kill_pid(pid: int, timeout_s: float = 10.0) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        if not _not_zombie(pid):
            return
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
