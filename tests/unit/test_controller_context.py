"""The controller's context keeps one object per distinct replica set, ISR and ISR epochs."""

from __future__ import annotations

import uuid

from epochlog.controller.context import ControllerContext, LeaderIsr, shared


def test_equal_replica_sets_and_isrs_are_one_object_in_the_context() -> None:
    ctx = ControllerContext(controller_id=1)
    ctx.add_topic("t", uuid.uuid4(), {0: tuple([2, 3]), 1: tuple([2, 3]), 2: (3, 2)})
    assert ctx.assignments[("t", 0)] is ctx.assignments[("t", 1)]
    assert ctx.assignments[("t", 2)] == (3, 2)  # a different order is a different replica set
    state = LeaderIsr(2, 0, (2, 3), 1)
    moved = [state.with_leader(3, [3], 1) for _ in range(2)]
    assert moved[0].isr is moved[1].isr == (3,)
    assert shared(tuple([9, 8])) is shared(tuple([9, 8]))
