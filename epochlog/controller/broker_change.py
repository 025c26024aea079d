"""Broker-change classification (KIP-380): new, dead and bounced brokers.

The controller reads every `/brokers/ids/<id>` with its czxid (the broker epoch) and compares
with what it holds: new = registered but unknown to the controller; dead = known but no longer
registered; bounced = known and registered with a larger epoch, i.e. the broker restarted (or
lost its session) between two looks, possibly so fast that its znode never went missing. The
controller must treat a bounced broker as failed and started again; without KIP-380 it would not
notice it at all, and the restarted broker would never get its LeaderAndIsr.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class BrokerChange:
    new: tuple[int, ...]
    dead: tuple[int, ...]
    bounced: tuple[int, ...]

    @property
    def empty(self) -> bool:
        return not (self.new or self.dead or self.bounced)


def classify_brokers(
    known_epochs: Mapping[int, int],
    registered_epochs: Mapping[int, int],
    detect_bounces: bool = True,
) -> BrokerChange:
    """Compare the controller's broker epochs with ZooKeeper's registrations.

    `detect_bounces=False` is the pre-KIP-380 behaviour (a test-only switch): ids are compared,
    epochs ignored, so a fast bounce goes unnoticed.
    """
    new = tuple(sorted(set(registered_epochs) - set(known_epochs)))
    dead = tuple(sorted(set(known_epochs) - set(registered_epochs)))
    bounced: tuple[int, ...] = ()
    if detect_bounces:
        bounced = tuple(
            sorted(
                b
                for b in set(known_epochs) & set(registered_epochs)
                if registered_epochs[b] > known_epochs[b]
            )
        )
    return BrokerChange(new, dead, bounced)
