"""Delay, jitter and loss for one direction of a lab link, in user space (this kernel has no netem).

Run in the lab's hub namespace as `python -m epochlog.testing.netlab.shaper --tun NAME
--delay-ms D --jitter-ms J --loss-percent L --seed N`. It creates the TUN device NAME (it goes
away when this process exits), prints `ready`, then reads every IP packet the hub routes into
the device, drops it with probability L%, or writes it back into the device D ± J ms later; the
hub then forwards it to its destination. Packets leave in the order they came (a jittered packet
never overtakes an earlier one), so TCP sees latency and loss, not reordering.

`ShapePolicy` is the decision (when, if ever, a packet arriving now leaves), tested without a
device; `run` is the loop around it. On SIGTERM the shaper prints `passed N lost M` and exits.
"""

from __future__ import annotations

import argparse
import collections
import fcntl
import os
import random
import select
import signal
import struct
import sys
import time
from dataclasses import dataclass, field

TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000
MAX_PACKET = 65536


@dataclass
class ShapePolicy:
    delay_ms: float
    jitter_ms: float = 0.0
    loss_percent: float = 0.0
    rng: random.Random = field(default_factory=random.Random)
    passed: int = 0
    lost: int = 0
    _last_release: float = float("-inf")

    def release_at(self, now: float) -> float | None:
        """The time (seconds, the clock of `now`) a packet arriving at `now` leaves; None: lost."""
        if self.loss_percent and self.rng.random() * 100 < self.loss_percent:
            self.lost += 1
            return None
        self.passed += 1
        delay = self.delay_ms
        if self.jitter_ms:
            delay += self.rng.uniform(-self.jitter_ms, self.jitter_ms)
        release = max(now + max(delay, 0.0) / 1000, self._last_release)  # no overtaking
        self._last_release = release
        return release


def open_tun(name: str) -> int:
    fd = os.open("/dev/net/tun", os.O_RDWR)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TUN | IFF_NO_PI))
    return fd


def run(fd: int, policy: ShapePolicy) -> None:
    held: collections.deque[tuple[float, bytes]] = collections.deque()
    while True:
        now = time.monotonic()
        while held and held[0][0] <= now:
            os.write(fd, held.popleft()[1])
        timeout = max(0.0, held[0][0] - now) if held else None
        readable, _, _ = select.select([fd], [], [], timeout)
        if readable:
            packet = os.read(fd, MAX_PACKET)
            release = policy.release_at(time.monotonic())
            if release is not None:
                held.append((release, packet))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tun", required=True)
    parser.add_argument("--delay-ms", type=float, default=0.0)
    parser.add_argument("--jitter-ms", type=float, default=0.0)
    parser.add_argument("--loss-percent", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    fd = open_tun(args.tun)
    policy = ShapePolicy(args.delay_ms, args.jitter_ms, args.loss_percent, random.Random(args.seed))
    print("ready", flush=True)
    try:
        run(fd, policy)
    finally:  # SIGTERM: tell the lab what this direction suffered
        print(f"passed {policy.passed} lost {policy.lost}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
