"""A network lab: each node in its own network namespace, routed by a hub, with faults on links.

    with NetLab(["zk", "b1", "b2", "b3"]) as lab:      # plus the host node, "client"
        zk = lab.zookeeper("zk", tmp / "zk").start()
        cluster = LocalCluster(tmp / "c", 3, zookeeper=zk.connect_string,
                               placements=lab.broker_placements({1: "b1", 2: "b2", 3: "b3"}))
        lab.cut("b1", "zk")                 # both directions
        lab.cut_one_way("b2", "b1")         # packets from b2 to b1 only
        lab.delay("client", "b3", 50, jitter_ms=5)
        lab.loss("b2", "b3", 10)
        lab.heal("b1", "zk"); lab.heal_all()
        lab.faults()            # {(src, dst): LinkFault} now: for the chaos runner's timeline
        lab.shaped_packets()    # {(src, dst): (passed, lost)} of the shapers stopped so far

Every fault call acts at once and returns; bad input (an unknown node, a negative delay) raises
NetLabError naming it and changes nothing. A ZooKeeper ensemble works the same way: give
`zookeeper()` the `servers` and `my_id` of ZooKeeperServer, one node per server.

The host node (`host=`, "client" by default) is the root namespace, where the calling process
and its clients run; faults on its links act on everything this process sends into the lab.
Layout and fault rules: layout.py. Delay and loss: shaper.py (this kernel has no sch_netem, so
the hub routes a shaped link through a TUN device that a small process serves).

Everything the lab creates is named `e<pid>l<n>...` (namespaces, interfaces); `close()` removes
it and stops the shaper processes it started (by their pids), and a finalizer does the same if
the lab is dropped or the interpreter exits. `sweep_stale()` removes what labs of processes that
no longer exist left behind (after a SIGKILL). Requires root and `ip` (iproute2).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import random
import re
import select
import subprocess
import sys
import threading
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from epochlog.node.local_cluster import BrokerPlacement
from epochlog.processes import spawn
from epochlog.testing.netlab.layout import (
    HEALTHY,
    HOST,
    Layout,
    LinkFault,
    NetLabError,
    Shape,
    transition,
)
from epochlog.zk.launcher import ZooKeeperServer

_counter = itertools.count()
_NAME = re.compile(r"^e([0-9a-f]+)l\d+-")
SHAPER_READY_TIMEOUT_S = 10.0


def _ip(*args: str) -> str:
    result = subprocess.run(["ip", *args], capture_output=True, text=True)
    if result.returncode != 0:
        raise NetLabError(f"`ip {' '.join(args)}` failed: {result.stderr.strip()}")
    return result.stdout


@dataclass
class _Resources:
    """What a lab created, held apart from the lab so that its finalizer can remove it."""

    namespaces: list[str] = field(default_factory=list)
    host_veth: str | None = None
    shapers: dict[tuple[int, int], subprocess.Popen[bytes]] = field(default_factory=dict)

    def release(self) -> None:
        for process in self.shapers.values():
            _stop(process)
        self.shapers.clear()
        for ns in self.namespaces:  # nodes first, the hub (listed first) last
            with contextlib.suppress(NetLabError):
                _ip("netns", "del", ns)
        self.namespaces.clear()
        if self.host_veth is not None:
            with contextlib.suppress(NetLabError):
                _ip("link", "del", self.host_veth)
            self.host_veth = None


def _stop(process: subprocess.Popen[bytes]) -> tuple[int, int]:
    """Stop a shaper; the (passed, lost) packet counts it reports, (0, 0) if it cannot."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    report = b""
    if process.stdout is not None:
        report = process.stdout.read()
        process.stdout.close()
    match = re.search(rb"passed (\d+) lost (\d+)", report)
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)


class NamespacedZooKeeper(ZooKeeperServer):
    """A ZooKeeper server whose JVM runs under a command prefix (`ip netns exec <ns>`)."""

    def __init__(self, base_dir: str | os.PathLike[str], launcher: Sequence[str], **kwargs: Any):
        super().__init__(base_dir, **kwargs)
        self.launcher = list(launcher)

    def command(self) -> list[str]:
        return [*self.launcher, *super().command()]


class NetLab:
    """See the module docstring."""

    def __init__(
        self, nodes: Sequence[str], *, host: str = "client", seed: int | None = None
    ) -> None:
        if host in nodes:
            raise NetLabError(f"node {host!r} is the host (the root namespace); name it once")
        self._rng = random.Random(seed)
        self._seed = seed
        self._prefix = f"e{os.getpid():x}l{next(_counter) % 10}"
        self._nodes = (host, *nodes)
        Layout(self._prefix, 1, self._nodes)  # checks the names now, before any I/O
        self._layout: Layout | None = None  # the subnet is chosen in start()
        self._resources = _Resources()
        self._finalizer = weakref.finalize(self, self._resources.release)
        self._faults: dict[tuple[int, int], LinkFault] = {}
        self._counts: dict[tuple[int, int], tuple[int, int]] = {}  # stopped shapers' reports
        self._lock = threading.Lock()
        self._started = False

    # ------------------------------------------------------------------------ lifecycle

    def start(self) -> NetLab:
        if self._started:
            raise NetLabError(f"lab {self._prefix} is already started")
        self._started = True
        self.sweep_stale()
        self._layout = Layout(self._prefix, self._free_subnet(), self._nodes)
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        return self

    def _free_subnet(self) -> int:
        used = set(re.findall(r"\b10\.(\d+)\.", _ip("-4", "route") + _ip("-4", "addr")))
        free = [s for s in range(100, 250) if str(s) not in used]
        if not free:
            raise NetLabError("no free 10.S.0.0/16 subnet for a lab (100..249 all routed)")
        return random.SystemRandom().choice(free)  # not the seed: two labs must differ

    def _build(self) -> None:
        layout, res = self.layout, self._resources
        _ip("netns", "add", layout.hub)
        res.namespaces.append(layout.hub)
        self._sysctl(layout.hub, "net.ipv4.ip_forward=1")
        # packets a shaper writes back arrive from its TUN with another node's source address
        self._sysctl(layout.hub, "net.ipv4.conf.all.rp_filter=0")
        self._sysctl(layout.hub, "net.ipv4.conf.default.rp_filter=0")
        _ip("-n", layout.hub, "link", "set", "lo", "up")
        for node in layout.nodes:
            ns = layout.namespace(node)
            veth = layout.hub_veth(node)
            if ns is None:
                _ip("link", "add", layout.host_veth, "type", "veth",
                    "peer", "name", veth, "netns", layout.hub)  # fmt: skip
                res.host_veth = layout.host_veth
                _ip("addr", "add", f"{layout.address(node)}/24", "dev", layout.host_veth)
                _ip("link", "set", layout.host_veth, "up")
            else:
                _ip("netns", "add", ns)
                res.namespaces.insert(0, ns)  # removed before the hub
                _ip("link", "add", "name", veth, "netns", layout.hub, "type", "veth",
                    "peer", "name", "eth0", "netns", ns)  # fmt: skip
                _ip("-n", ns, "addr", "add", f"{layout.address(node)}/24", "dev", "eth0")
                _ip("-n", ns, "link", "set", "lo", "up")
                _ip("-n", ns, "link", "set", "eth0", "up")
                _ip("-n", ns, "route", "add", "default", "via", layout.gateway(node))
            _ip("-n", layout.hub, "addr", "add", f"{layout.gateway(node)}/24", "dev", veth)
            _ip("-n", layout.hub, "link", "set", veth, "up")
        _ip("route", "add", layout.network, "via", layout.gateway(layout.nodes[HOST]))

    @staticmethod
    def _sysctl(ns: str, setting: str) -> None:
        result = subprocess.run(
            ["ip", "netns", "exec", ns, "sysctl", "-qw", setting], capture_output=True, text=True
        )
        if result.returncode != 0:
            raise NetLabError(f"sysctl {setting} in {ns} failed: {result.stderr.strip()}")

    def close(self) -> None:
        """Stop the shapers and remove every namespace and interface this lab created."""
        self._finalizer()

    def __enter__(self) -> NetLab:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @staticmethod
    def sweep_stale() -> list[str]:
        """Remove the namespaces (and host veths) of labs whose process no longer exists."""
        removed: list[str] = []
        for line in _ip("netns", "list").splitlines():
            name = line.split()[0] if line.strip() else ""
            match = _NAME.match(name)
            if match and not _alive(int(match.group(1), 16)):
                with contextlib.suppress(NetLabError):
                    _ip("netns", "del", name)
                    removed.append(name)
        for line in _ip("-o", "link", "show").splitlines():
            parts = line.split(":")
            if len(parts) > 1:
                name = parts[1].strip().split("@")[0]
                match = re.match(r"^e([0-9a-f]+)l\d+c$", name)
                if match and not _alive(int(match.group(1), 16)):
                    with contextlib.suppress(NetLabError):
                        _ip("link", "del", name)
                        removed.append(name)
        return removed

    # ------------------------------------------------------------------------ nodes

    @property
    def layout(self) -> Layout:
        if self._layout is None:
            raise NetLabError(f"lab {self._prefix} is not started (call start())")
        return self._layout

    @property
    def host(self) -> str:
        return self._nodes[HOST]

    def address(self, node: str) -> str:
        return self.layout.address(node)

    def namespace(self, node: str) -> str | None:
        return self.layout.namespace(node)

    def exec_prefix(self, node: str) -> list[str]:
        """Prefix a command with this to run it in the node's namespace."""
        return self.layout.exec_prefix(node)

    def zookeeper(
        self, node: str, directory: str | os.PathLike[str], **kwargs: Any
    ) -> NamespacedZooKeeper:
        """A ZooKeeper server (not started) in the node's namespace, on port 2181."""
        kwargs.setdefault("client_port", 2181)
        return NamespacedZooKeeper(
            Path(directory), self.exec_prefix(node), host=self.address(node), **kwargs
        )

    def broker_placements(
        self, brokers: Mapping[int, str], port: int = 9092
    ) -> dict[int, BrokerPlacement]:
        """LocalCluster placements: broker id -> its node's address and namespace."""
        return {
            broker_id: BrokerPlacement(self.address(node), port, tuple(self.exec_prefix(node)))
            for broker_id, node in brokers.items()
        }

    # ------------------------------------------------------------------------ faults

    def cut(self, a: str, b: str) -> None:
        """No packet passes between a and b, either way."""
        self._update(a, b, lambda f: LinkFault(True, f.shape))
        self._update(b, a, lambda f: LinkFault(True, f.shape))

    def cut_one_way(self, a: str, b: str) -> None:
        """No packet passes from a to b; b's packets still reach a."""
        self._update(a, b, lambda f: LinkFault(True, f.shape))

    def delay(
        self, a: str, b: str, ms: float, jitter_ms: float = 0.0, *, both_ways: bool = True
    ) -> None:
        """Packets from a to b (and b to a, unless not `both_ways`) wait ms ± jitter_ms."""
        for src, dst in [(a, b), (b, a)] if both_ways else [(a, b)]:
            self._update(src, dst, lambda f: LinkFault(f.cut, _with(f.shape, ms, jitter_ms)))

    def loss(self, a: str, b: str, percent: float, *, both_ways: bool = True) -> None:
        """Each packet from a to b (and b to a, unless not `both_ways`) is lost with `percent`%."""
        for src, dst in [(a, b), (b, a)] if both_ways else [(a, b)]:
            self._update(src, dst, lambda f: LinkFault(f.cut, _with(f.shape, loss=percent)))

    def heal(self, a: str, b: str) -> None:
        """Remove every fault between a and b, both ways."""
        self._update(a, b, lambda f: HEALTHY)
        self._update(b, a, lambda f: HEALTHY)

    def heal_all(self) -> None:
        with self._lock:
            links = list(self._faults)
        for a, b in links:
            self._update(self.layout.nodes[a], self.layout.nodes[b], lambda f: HEALTHY)

    def faults(self) -> dict[tuple[str, str], LinkFault]:
        """The faulty directed links now: (source node, destination node) -> fault."""
        with self._lock:
            return {
                (self.layout.nodes[a], self.layout.nodes[b]): f
                for (a, b), f in self._faults.items()
            }

    def shaped_packets(self) -> dict[tuple[str, str], tuple[int, int]]:
        """(passed, lost) packets per directed link, over the shapers stopped so far (a shape
        that is changed or healed stops its shaper)."""
        with self._lock:
            return {
                (self.layout.nodes[a], self.layout.nodes[b]): c
                for (a, b), c in self._counts.items()
            }

    def _update(self, src: str, dst: str, change: Any) -> None:
        key = (self.layout.index(src), self.layout.index(dst))
        with self._lock:
            old = self._faults.get(key, HEALTHY)
            new = change(old)
            if new.shape is not None and new.shape.is_noop:
                new = LinkFault(new.cut, None)
            for step in transition(self.layout, src, dst, old, new):
                if step.kind == "ip":
                    _ip("-n", self.layout.hub, *step.args)
                elif step.kind == "stop_shaper":
                    passed, lost = _stop(self._resources.shapers.pop(key))
                    before = self._counts.get(key, (0, 0))
                    self._counts[key] = (before[0] + passed, before[1] + lost)
                else:
                    assert step.shape is not None
                    self._resources.shapers[key] = self._start_shaper(key, step.shape)
            if new.is_healthy:
                self._faults.pop(key, None)
            else:
                self._faults[key] = new

    def _start_shaper(self, key: tuple[int, int], shape: Shape) -> subprocess.Popen[bytes]:
        seed = self._rng.randrange(2**31) if self._seed is not None else None
        process = spawn(
            [
                "ip",
                "netns",
                "exec",
                self.layout.hub,
                sys.executable,
                "-m",
                "epochlog.testing.netlab.shaper",
                "--tun",
                self.layout.tun(*key),
                "--delay-ms",
                str(shape.delay_ms),
                "--jitter-ms",
                str(shape.jitter_ms),
                "--loss-percent",
                str(shape.loss_percent),
                *(["--seed", str(seed)] if seed is not None else []),
            ],
            stdout=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
        )
        assert process.stdout is not None
        ready, _, _ = select.select([process.stdout], [], [], SHAPER_READY_TIMEOUT_S)
        line = process.stdout.readline() if ready else b""
        if line.strip() != b"ready":
            _stop(process)
            raise NetLabError(
                f"shaper for {self.layout.tun(*key)} did not start (exit {process.returncode})"
            )
        return process


def _with(
    shape: Shape | None,
    delay_ms: float | None = None,
    jitter_ms: float | None = None,
    loss: float | None = None,
) -> Shape:
    base = shape or Shape()
    return Shape(
        base.delay_ms if delay_ms is None else delay_ms,
        base.jitter_ms if jitter_ms is None else jitter_ms,
        base.loss_percent if loss is None else loss,
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
