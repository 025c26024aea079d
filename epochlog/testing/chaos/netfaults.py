"""Network and clock faults for the chaos runner, registered by importing this module.

The network kinds act on one link of the run's `NetLab` (the runner builds one, with ZooKeeper
and each broker in its own network namespace, when any of these kinds is selected and the
process is root): a link is chosen by class first (client-broker, broker-broker,
broker-ZooKeeper), then by its ends, so that each class is drawn as often whatever the cluster
size. The client is the host node, where every workload and the harness itself run.

The clock jump writes the `clock_offset_ms` rule into the brokers' faults file (the runner sets
`epochlog.test.faults.file` when the kind is selected): that broker's data-plane wall clock
(LogAppendTime, retention, ISR lag) jumps forwards or backwards until the heal clears it.
"""

from __future__ import annotations

from typing import Any

from epochlog.testing.chaos.faults import ChaosContext, Fault, FaultError, register

NETWORK_KINDS = ("net-cut", "net-one-way", "net-delay", "net-loss")
LINK_CLASSES = ("client-broker", "broker-broker", "broker-zookeeper")
CLOCK_JUMPS_MS = (-3_600_000, -60_000, 60_000, 3_600_000, 86_400_000)


def choose_link(ctx: ChaosContext) -> tuple[str, str, str]:
    """(link class, a, b): a random link of a random class, a and b node names of the lab."""
    brokers = [ctx.broker_nodes[b] for b in sorted(ctx.broker_nodes)]
    if not brokers:
        raise FaultError("no broker nodes in the lab")
    link_class = ctx.rng.choice(LINK_CLASSES)
    if link_class == "client-broker":
        return link_class, ctx.net.host, ctx.rng.choice(brokers)
    if link_class == "broker-broker":
        a, b = ctx.rng.sample(brokers, 2)
        return link_class, a, b
    if not ctx.zk_nodes:
        raise FaultError("no ZooKeeper node in the lab")
    return link_class, ctx.rng.choice(brokers), ctx.rng.choice(ctx.zk_nodes)


class _LinkFault(Fault):
    """One fault on one link of the lab; heal removes every fault on that link."""

    needs = "net"
    hold_s = (3.0, 10.0)  # sometimes past the 6 s ZooKeeper session

    def __init__(self) -> None:
        self.link: tuple[str, str, str] | None = None

    def inject(self, ctx: ChaosContext) -> str:
        self.link = choose_link(ctx)
        link_class, a, b = self.link
        return f"{link_class} link {a} - {b}: {self.apply(ctx, a, b)}"

    def apply(self, ctx: ChaosContext, a: str, b: str) -> str:
        raise NotImplementedError

    def heal(self, ctx: ChaosContext) -> str:
        assert self.link is not None
        link_class, a, b = self.link
        ctx.net.heal(a, b)
        return f"{link_class} link {a} - {b} whole again"


@register
class NetCut(_LinkFault):
    """A link cut both ways (packets silently dropped in the hub)."""

    kind = "net-cut"

    def apply(self, ctx: ChaosContext, a: str, b: str) -> str:
        ctx.net.cut(a, b)
        return "cut both ways"


@register
class NetOneWay(_LinkFault):
    """A link cut in one direction only."""

    kind = "net-one-way"

    def apply(self, ctx: ChaosContext, a: str, b: str) -> str:
        if ctx.rng.random() < 0.5:
            a, b = b, a
        ctx.net.cut_one_way(a, b)
        return f"cut one way: {a} -> {b} dropped, {b} -> {a} passes"


@register
class NetDelay(_LinkFault):
    """Delay (with jitter) both ways on a link."""

    kind = "net-delay"

    def apply(self, ctx: ChaosContext, a: str, b: str) -> str:
        ms = round(ctx.rng.uniform(50, 800))
        jitter = round(ms * ctx.rng.uniform(0.0, 0.3))
        ctx.net.delay(a, b, ms, jitter)
        return f"delayed {ms} ms ± {jitter} ms both ways"


@register
class NetLoss(_LinkFault):
    """Packet loss both ways on a link."""

    kind = "net-loss"

    def apply(self, ctx: ChaosContext, a: str, b: str) -> str:
        percent = round(ctx.rng.uniform(5, 40))
        ctx.net.loss(a, b, percent)
        return f"{percent}% packet loss both ways"


@register
class ClockJump(Fault):
    """A broker's wall clock (data plane: timestamps, retention, ISR lag) jumps; heal undoes it."""

    kind = "clock-jump"
    needs = "faults_file"
    hold_s = (3.0, 10.0)

    def inject(self, ctx: ChaosContext) -> str:
        from epochlog.testing.faults import FaultRules

        assert ctx.faults_file is not None
        running = ctx.running()
        if not running:
            raise FaultError("no broker is running")
        self.broker = ctx.rng.choice(running)
        offset = ctx.rng.choice(CLOCK_JUMPS_MS)
        FaultRules.write(ctx.faults_file, [{"clock_offset_ms": offset, "broker": self.broker}])
        return f"broker {self.broker}'s clock jumped {offset:+d} ms"

    def heal(self, ctx: ChaosContext) -> str:
        from epochlog.testing.faults import FaultRules

        assert ctx.faults_file is not None
        FaultRules.write(ctx.faults_file, [])
        return f"broker {self.broker}'s clock back"


@register
class ZooKeeperNodeLost(Fault):
    """kill -9 of one node of a ZooKeeper ensemble; heal starts it again (it rejoins the quorum)."""

    kind = "zk-node-lost"
    hold_s = (3.0, 12.0)

    def usable(self, ctx: ChaosContext) -> bool:
        return len(ctx.zk_servers) > 1

    def inject(self, ctx: ChaosContext) -> str:
        alive = [i for i, s in enumerate(ctx.zk_servers) if s.is_running()]
        if len(alive) < len(ctx.zk_servers):
            raise FaultError("a ZooKeeper node is already down")
        self.index = ctx.rng.choice(alive)
        server: Any = ctx.zk_servers[self.index]
        mode = server.mode()
        server.kill()
        return f"kill -9 of ZooKeeper node {self.index + 1} ({mode}, {server.connect_string})"

    def heal(self, ctx: ChaosContext) -> str:
        server = ctx.zk_servers[self.index]
        server.start()
        return f"ZooKeeper node {self.index + 1} started again ({server.mode()})"
