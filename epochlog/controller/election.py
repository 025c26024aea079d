"""Leader election algorithms, as Kafka's ZooKeeper controller runs them (pure functions).

- offline: the first replica in assignment order that is live and in the ISR; if none and unclean
  election is allowed, the first live replica (the ISR becomes just that leader).
- controlled shutdown: the first replica in assignment order that is live, in the ISR and not
  shutting down; the new ISR drops the brokers that are shutting down.
- preferred: the first replica of the assignment, only if it is live and in the ISR.
- initial (a new partition): the first live replica; the ISR is every live replica.

Each returns the new (leader, isr) or None when no replica qualifies. When the last ISR member
fails it stays in the ISR (KIP-903 point 6, Kafka's rule), so the partition remembers who has
the data.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

Election = tuple[int, tuple[int, ...]]


def offline_leader(
    assignment: Sequence[int],
    isr: Sequence[int],
    live: Collection[int],
    unclean_allowed: bool,
) -> Election | None:
    for replica in assignment:
        if replica in live and replica in isr:
            return replica, tuple(r for r in isr if r in live)
    if unclean_allowed:
        for replica in assignment:
            if replica in live:
                return replica, (replica,)
    return None


def controlled_shutdown_leader(
    assignment: Sequence[int],
    isr: Sequence[int],
    live: Collection[int],
    shutting_down: Collection[int],
) -> Election | None:
    new_isr = tuple(r for r in isr if r not in shutting_down)
    for replica in assignment:
        if replica in live and replica in new_isr:
            return replica, new_isr
    return None


def preferred_leader(
    assignment: Sequence[int], isr: Sequence[int], live: Collection[int]
) -> Election | None:
    if assignment and assignment[0] in live and assignment[0] in isr:
        return assignment[0], tuple(isr)
    return None


def initial_leader(assignment: Sequence[int], live: Collection[int]) -> Election | None:
    live_replicas = tuple(r for r in assignment if r in live)
    if not live_replicas:
        return None
    return live_replicas[0], live_replicas


def isr_without(isr: Sequence[int], removed: Collection[int]) -> tuple[int, ...]:
    """The ISR minus `removed`, but never empty: the last member stays (Kafka's rule)."""
    remaining = tuple(r for r in isr if r not in removed)
    return remaining or tuple(isr[:1])
