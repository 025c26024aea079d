"""KIP-39's decisions without ZooKeeper: the elector's steps, the election guard, `pin --auto`,
the pin's state, and the PinController request's validation and wire format."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from epochlog.broker.handlers.pin_controller import invalid_pin_request
from epochlog.protocol import messages as m
from epochlog.protocol.api import APIS, ApiKey, decode_request, encode_request
from epochlog.protocol.messages.pin_controller import (
    PinOperation,
    PinState,
    PinStatus,
    pin_state,
)
from epochlog.zk.pinning import (
    ElectionGuard,
    ElectorStep,
    ElectorView,
    choose_auto_pin,
    election_guard,
    elector_steps,
)

S = ElectorStep


def view(**kw) -> ElectorView:
    base = dict(
        broker_id=1, controller=None, acting=False, pinned=None, ready=None, holding_ready=False
    )
    base.update(kw)
    return ElectorView(**base)


# ----------------------------------------------------------------------------- elector steps


def test_without_a_pin_the_election_is_as_before() -> None:
    assert elector_steps(view()) == [S.ELECT]
    assert elector_steps(view(controller=2)) == []
    assert elector_steps(view(controller=1, acting=True)) == []
    # our controller node is gone (session lost, deleted): stop acting and try again
    assert elector_steps(view(controller=None, acting=True)) == [S.STOP_CONTROLLER, S.ELECT]
    assert elector_steps(view(controller=2, acting=True)) == [S.STOP_CONTROLLER]


def test_the_pinned_broker_announces_itself_and_withdraws_when_the_pin_moves() -> None:
    assert elector_steps(view(pinned=1, controller=2)) == [S.ANNOUNCE_READY]
    assert elector_steps(view(pinned=1, controller=2, ready=1, holding_ready=True)) == []
    assert elector_steps(view(pinned=3, controller=2, ready=1, holding_ready=True)) == [
        S.WITHDRAW_READY
    ]
    assert elector_steps(view(pinned=None, controller=2, ready=1, holding_ready=True)) == [
        S.WITHDRAW_READY
    ]
    # another broker's pin is none of our business
    assert elector_steps(view(broker_id=2, pinned=1, controller=2, acting=True)) == []


def test_the_controller_resigns_when_another_broker_is_ready() -> None:
    acting = view(broker_id=2, controller=2, acting=True, pinned=1)
    assert elector_steps(replace(acting, ready=1)) == [S.RESIGN]
    assert elector_steps(replace(acting, ready=2)) == []
    assert elector_steps(replace(acting, ready=None)) == []  # x not ready (yet): stay


def test_a_controller_pinned_itself_does_not_resign_for_a_lingering_ready_node() -> None:
    # the pin moved from 3 to us; 3's ready node is about to be withdrawn
    steps = elector_steps(view(controller=1, acting=True, pinned=1, ready=3))
    assert steps == [S.ANNOUNCE_READY]


def test_only_the_ready_broker_joins_an_election() -> None:
    assert elector_steps(view(broker_id=2, pinned=1, ready=1)) == []
    assert elector_steps(view(broker_id=1, pinned=1, ready=1, holding_ready=True)) == [S.ELECT]
    # gotcha II: x died, its ready node vanished: everybody joins again
    assert elector_steps(view(broker_id=2, pinned=1, ready=None)) == [S.ELECT]


def test_a_broker_withdrawing_its_ready_node_may_join_at_once() -> None:
    steps = elector_steps(view(pinned=None, ready=1, holding_ready=True))
    assert steps == [S.WITHDRAW_READY, S.ELECT]


def test_a_controller_node_naming_us_while_not_acting_is_adopted_or_ignored() -> None:
    # ours from this session (then resigned if another is ready) or a previous generation's
    assert elector_steps(view(controller=1)) == [S.ELECT]
    assert elector_steps(view(controller=1, ready=2)) == [S.ELECT]


def test_the_controller_pinned_and_ready_stays() -> None:
    v = view(controller=1, acting=True, pinned=1, ready=1, holding_ready=True)
    assert elector_steps(v) == []


# ----------------------------------------------------------------------------- election guard


def test_election_guard() -> None:
    assert election_guard(None, 1) == ElectionGuard(None)
    assert election_guard((1, 4), 1) == ElectionGuard(4)
    assert election_guard((2, 0), 1) is None


class RecordingTx:
    def __init__(self) -> None:
        self.ops: list[tuple] = []

    def create(self, path: str, value: bytes) -> None:
        self.ops.append(("create", path))

    def delete(self, path: str) -> None:
        self.ops.append(("delete", path))

    def check(self, path: str, version: int) -> None:
        self.ops.append(("check", path, version))


def test_election_guard_ops() -> None:
    absent, mine = RecordingTx(), RecordingTx()
    ElectionGuard(None).add_to(absent)  # type: ignore[arg-type]
    ElectionGuard(3).add_to(mine)  # type: ignore[arg-type]
    path = "/admin/ready_to_serve_as_controller"
    # commits only while the node does not exist
    assert absent.ops == [("create", path), ("delete", path)]
    assert mine.ops == [("check", path, 3)]


# ----------------------------------------------------------------------------- pin --auto


def test_auto_pin_chooses_the_live_broker_leading_the_fewest_partitions() -> None:
    leaders = [1, 1, 2, 2, 2, 3, 1, -1, 9]  # -1: offline partition, 9: a dead broker
    assert choose_auto_pin([1, 2, 3], leaders, controller=1) == 3
    assert choose_auto_pin([1, 2, 3, 4], leaders, controller=1) == 4  # leads nothing


def test_auto_pin_ties_keep_the_controller_then_take_the_lowest_id() -> None:
    assert choose_auto_pin([1, 2, 3], [1, 2, 3], controller=2) == 2
    assert choose_auto_pin([3, 2, 1], [1, 2, 3], controller=None) == 1
    assert choose_auto_pin([1, 2, 3], [1, 2, 3], controller=7) == 1
    assert choose_auto_pin([], [1], controller=None) is None


# ----------------------------------------------------------------------------- pin state


def test_pin_state_and_summary() -> None:
    assert pin_state(1, None) is PinState.NONE
    assert pin_state(1, 1) is PinState.IN_FORCE
    assert pin_state(2, 1) is PinState.PENDING
    assert pin_state(None, 1) is PinState.PENDING
    assert PinStatus(1, None, None).summary() == "not pinned"
    assert PinStatus(1, 1, 1, True).summary() == "pinned to broker 1 (in force)"
    assert "broker 7 is not registered" in PinStatus(1, 7, None, False).summary()
    assert "waiting for broker 2" in PinStatus(1, 2, None, True).summary()
    assert "moving to broker 2" in PinStatus(1, 2, 2, True).summary()


# ----------------------------------------------------------------------------- the request


def request(**kw) -> object:
    return m.PinControllerRequest(**kw)


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        (dict(operation=7), "unknown Operation 7"),
        (dict(operation=PinOperation.PIN), "needs a BrokerId >= 0"),
        (dict(operation=PinOperation.PIN, broker_id=-5), "got -5"),
        (dict(operation=PinOperation.PIN, broker_id=2, auto=True), "one or the other"),
        (dict(operation=PinOperation.PIN, auto=True, allow_absent=True), "AllowAbsent"),
        (dict(operation=PinOperation.UNPIN, broker_id=2), "unpin takes no BrokerId"),
        (dict(operation=PinOperation.DESCRIBE, auto=True), "describe takes no Auto"),
    ],
)
def test_malformed_pin_requests_are_named(fields: dict, problem: str) -> None:
    found = invalid_pin_request(request(**fields))
    assert found is not None and problem in found


@pytest.mark.parametrize(
    "fields",
    [
        dict(operation=PinOperation.PIN, broker_id=0),
        dict(operation=PinOperation.PIN, broker_id=3, allow_absent=True),
        dict(operation=PinOperation.PIN, auto=True),
        dict(operation=PinOperation.UNPIN),
        dict(operation=PinOperation.DESCRIBE),
    ],
)
def test_well_formed_pin_requests(fields: dict) -> None:
    assert invalid_pin_request(request(**fields)) is None


def test_pin_controller_is_a_vendor_api_advertised_once() -> None:
    api = APIS[ApiKey.PIN_CONTROLLER]
    assert api.key >= 10000 and (api.min_version, api.max_version) == (0, 0)
    assert api.name == "PinController"
    frame = encode_request(
        ApiKey.PIN_CONTROLLER, 0, 5, "cli", request(operation=1, broker_id=3, allow_absent=True)
    )
    decoded = decode_request(frame[4:])
    assert decoded.body == request(operation=1, broker_id=3, allow_absent=True)
    assert decoded.header.client_id == "cli"


def test_handler_answers_invalid_request_and_changes_nothing() -> None:
    from epochlog.broker.handlers.context import ConnectionInfo
    from epochlog.broker.handlers.pin_controller import handle_pin_controller
    from epochlog.protocol.api import Request
    from epochlog.protocol.errors import ErrorCode

    class Pins:
        def __init__(self) -> None:
            self.calls: list[str] = []

        async def describe(self) -> PinStatus:
            return PinStatus(2, 1, None, True)

        async def pin(self, broker_id: int | None, allow_absent: bool) -> PinStatus:
            self.calls.append(f"pin {broker_id} {allow_absent}")
            return PinStatus(2, broker_id, None, True)

        async def unpin(self) -> PinStatus:
            self.calls.append("unpin")
            return PinStatus(2, None, None)

    class Services:
        controller_pins = Pins()

    services = Services()
    connection = ConnectionInfo("PLAINTEXT", "127.0.0.1:1")

    def send(body: object) -> object:
        req = Request(header=None, body=body)
        return asyncio.run(handle_pin_controller(services, req, connection))  # type: ignore[arg-type]

    bad = send(request(operation=PinOperation.UNPIN, broker_id=4))
    assert bad.error_code == ErrorCode.INVALID_REQUEST
    assert "BrokerId" in bad.error_message
    assert (bad.controller_id, bad.pinned_broker_id, bad.pin_state) == (2, 1, PinState.PENDING)
    assert services.controller_pins.calls == []
    ok = send(request(operation=PinOperation.PIN, auto=True))
    assert ok.error_code == ErrorCode.NONE and services.controller_pins.calls == ["pin None False"]
