"""The lab's addressing and the `ip` commands behind each link fault, as pure data.

A lab is a star: one hub network namespace routes between the nodes, each node its own
namespace joined to the hub by a veth pair (node side `eth0`, address 10.S.i.2/24; hub side
`<prefix>h<i>`, 10.S.i.1/24, the node's default gateway). Node 0 is the host: the root
namespace, where the test process and its clients run, joined by a veth whose root-side end is
`<prefix>c` and a route to 10.S.0.0/16.

Faults are per directed link (packets from node a to node b) and live only in the hub, as policy
routing rules matched before the main table:
- cut: `ip rule add pref CUT from A to B blackhole`; the hub drops the packets silently, as a
  partition does (senders see timeouts, not refusals);
- delay / jitter / loss: `ip rule add pref SHAPE from A to B iif <a's hub veth> lookup T`, where
  table T routes B into a TUN device that a shaper process (shaper.py) reads, holds and writes
  back; packets coming back out of the TUN have another input device, so the rule lets them
  through to B by the main table.
The functions here say which commands take a link from one fault to another; lab.py runs them.
"""

from __future__ import annotations

from dataclasses import dataclass

HOST = 0  # the index of the host node (the root namespace)
MAX_NODES = 40  # keeps interface names within IFNAMSIZ and rule numbers apart
CUT_PREF_BASE = 1000
SHAPE_PREF_BASE = 10000
TABLE_BASE = 1000


class NetLabError(RuntimeError):
    """A lab operation failed or was asked for something that does not exist."""


@dataclass(frozen=True)
class Shape:
    """Delay (with jitter) and loss for one direction of a link."""

    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    loss_percent: float = 0.0

    def __post_init__(self) -> None:
        if self.delay_ms < 0 or self.jitter_ms < 0:
            raise NetLabError(
                f"delay and jitter must be >= 0 ms (got delay {self.delay_ms}, "
                f"jitter {self.jitter_ms})"
            )
        if not 0 <= self.loss_percent <= 100:
            raise NetLabError(f"loss must be a percentage in [0, 100] (got {self.loss_percent})")

    @property
    def is_noop(self) -> bool:
        return self.delay_ms == 0 and self.jitter_ms == 0 and self.loss_percent == 0


@dataclass(frozen=True)
class LinkFault:
    """What one direction of a link suffers now: cut, shaped, both (the cut wins), or nothing."""

    cut: bool = False
    shape: Shape | None = None

    @property
    def is_healthy(self) -> bool:
        return not self.cut and self.shape is None


HEALTHY = LinkFault()


@dataclass(frozen=True)
class Layout:
    """Names and addresses of one lab; `nodes` lists the node names, the host first."""

    prefix: str
    subnet: int  # the S in 10.S.i.x
    nodes: tuple[str, ...]

    def __post_init__(self) -> None:
        if not 0 < self.subnet < 256:
            raise NetLabError(f"subnet octet must be in 1..255 (got {self.subnet})")
        if len(self.nodes) > MAX_NODES:
            raise NetLabError(f"a lab holds at most {MAX_NODES} nodes (got {len(self.nodes)})")
        if len(set(self.nodes)) != len(self.nodes):
            raise NetLabError(f"node names must be unique (got {list(self.nodes)})")
        if len(self.tun(MAX_NODES - 1, MAX_NODES - 1)) > 15:
            raise NetLabError(f"prefix {self.prefix!r} too long for interface names")

    def index(self, node: str) -> int:
        try:
            return self.nodes.index(node)
        except ValueError:
            raise NetLabError(f"no node {node!r} in this lab (nodes: {list(self.nodes)})") from None

    @property
    def hub(self) -> str:
        return f"{self.prefix}-hub"

    def namespace(self, node: str) -> str | None:
        """The node's namespace; None for the host, which is the root namespace."""
        i = self.index(node)
        return None if i == HOST else f"{self.prefix}-{node}"

    def address(self, node: str) -> str:
        return f"10.{self.subnet}.{self.index(node)}.2"

    def gateway(self, node: str) -> str:
        return f"10.{self.subnet}.{self.index(node)}.1"

    def hub_veth(self, node: str) -> str:
        return f"{self.prefix}h{self.index(node)}"

    @property
    def host_veth(self) -> str:
        return f"{self.prefix}c"

    @property
    def network(self) -> str:
        return f"10.{self.subnet}.0.0/16"

    def tun(self, src: int, dst: int) -> str:
        return f"{self.prefix}t{src}_{dst}"

    def exec_prefix(self, node: str) -> list[str]:
        """The command prefix that runs a program in the node's namespace (empty for the host)."""
        ns = self.namespace(node)
        return [] if ns is None else ["ip", "netns", "exec", ns]


def _ids(layout: Layout, src: str, dst: str) -> tuple[int, int]:
    a, b = layout.index(src), layout.index(dst)
    if a == b:
        raise NetLabError(f"a link joins two different nodes (got {src!r} twice)")
    return a, b


def cut_rule(layout: Layout, src: str, dst: str) -> list[str]:
    """The hub's rule (without add/del) that drops packets from src to dst."""
    a, b = _ids(layout, src, dst)
    pref = CUT_PREF_BASE + a * MAX_NODES + b
    return ["pref", str(pref), "from", f"{layout.address(src)}/32",
            "to", f"{layout.address(dst)}/32", "blackhole"]  # fmt: skip


def shape_table(layout: Layout, src: str, dst: str) -> int:
    a, b = _ids(layout, src, dst)
    return TABLE_BASE + a * MAX_NODES + b


def shape_rule(layout: Layout, src: str, dst: str) -> list[str]:
    """The hub's rule (without add/del) that sends packets from src to dst through the TUN."""
    a, b = _ids(layout, src, dst)
    pref = SHAPE_PREF_BASE + a * MAX_NODES + b
    return ["pref", str(pref), "from", f"{layout.address(src)}/32",
            "to", f"{layout.address(dst)}/32", "iif", layout.hub_veth(src),
            "lookup", str(shape_table(layout, src, dst))]  # fmt: skip


@dataclass(frozen=True)
class Step:
    """One thing to do in the hub: an `ip` command, or starting/stopping a link's shaper."""

    kind: str  # "ip", "start_shaper", "stop_shaper"
    args: tuple[str, ...] = ()
    shape: Shape | None = None


def transition(layout: Layout, src: str, dst: str, old: LinkFault, new: LinkFault) -> list[Step]:
    """The steps that take the directed link src -> dst from fault `old` to fault `new`.

    A shaper whose shape changes is replaced (stopped, then started with the new shape); the
    cut rule sits in front of the shaping rule, so cutting a shaped link needs no shaper change.
    """
    _ids(layout, src, dst)
    steps: list[Step] = []
    if old.cut and not new.cut:
        steps.append(Step("ip", ("rule", "del", *cut_rule(layout, src, dst))))
    if old.shape != new.shape:
        if old.shape is not None:
            steps.append(Step("ip", ("rule", "del", *shape_rule(layout, src, dst))))
            steps.append(Step("stop_shaper"))
        if new.shape is not None:
            # the shaper creates the TUN; the route and rule can only follow it
            steps.append(Step("start_shaper", shape=new.shape))
            steps.append(Step("ip", ("link", "set", layout.tun(*_ids(layout, src, dst)), "up")))
            steps.append(
                Step(
                    "ip",
                    (
                        "route",
                        "add",
                        f"{layout.address(dst)}/32",
                        "dev",
                        layout.tun(*_ids(layout, src, dst)),
                        "table",
                        str(shape_table(layout, src, dst)),
                    ),  # fmt: skip
                )
            )
            steps.append(Step("ip", ("rule", "add", *shape_rule(layout, src, dst))))
    if new.cut and not old.cut:
        steps.append(Step("ip", ("rule", "add", *cut_rule(layout, src, dst))))
    return steps
