"""`epochlog controller pin ID | pin --auto | unpin | show`: KIP-39's pinned controller.

Each command sends one PinController request to any broker of the cluster (`--bootstrap-server`,
or the local cluster's brokers through `--dir`). `pin` then waits (`--wait` seconds, 30 by
default) until the pinned broker is the controller and says how long the move took; a pin on a
broker that is not registered needs `--allow-absent` and stays pending until that broker starts.
`show` prints the controller, the pinned broker and whether the pin is in force or pending.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from rich.console import Console

if TYPE_CHECKING:  # the protocol package is imported only when a command runs
    from epochlog.protocol.messages.pin_controller import PinStatus


def add_parser(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    add_bootstrap: Callable[[argparse.ArgumentParser], None],
) -> None:
    controller = sub.add_parser("controller", help="pin the controller to a broker (KIP-39)")
    commands = controller.add_subparsers(dest="controller_command", required=True)
    pin = commands.add_parser("pin", help="move the controller to a broker and keep it there")
    pin.add_argument("id", nargs="?", type=int, help="the broker to pin the controller to")
    pin.add_argument(
        "--auto", action="store_true", help="pin the live broker leading the fewest partitions"
    )
    pin.add_argument(
        "--allow-absent",
        action="store_true",
        help="accept a broker that is not registered (the pin waits until it starts)",
    )
    pin.add_argument(
        "--wait",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="wait this long for the controller to move (0: do not wait; default 30)",
    )
    add_bootstrap(pin)
    unpin = commands.add_parser("unpin", help="remove the pin; the controller stays where it is")
    add_bootstrap(unpin)
    show = commands.add_parser("show", help="the controller, the pinned broker, the pin's state")
    show.add_argument("--json", action="store_true", help="machine-readable output")
    add_bootstrap(show)


def status_json(status: PinStatus) -> dict[str, object]:
    return {
        "controller": status.controller,
        "pinned": status.pinned,
        "ready": status.ready,
        "pinned_registered": status.pinned_registered,
        "state": status.state.label,
    }


def _controller_text(status: PinStatus) -> str:
    return "none" if status.controller is None else f"broker {status.controller}"


def run(args: argparse.Namespace, console: Console) -> int:
    from epochlog.cli.common import CommandError, client_config
    from epochlog.client import Admin, KafkaError
    from epochlog.client.config import Role

    if args.controller_command == "pin":
        if (args.id is None) == (not args.auto):
            raise CommandError("controller pin needs a broker ID or --auto (one of the two)")
        if args.id is not None and args.id < 0:
            raise CommandError(f"broker ID must be >= 0, got {args.id}")
        if args.auto and args.allow_absent:
            raise CommandError("--allow-absent does not apply to --auto (it picks a live broker)")
        if args.wait < 0:
            raise CommandError(f"--wait must be >= 0, got {args.wait}")
    with Admin(client_config(args, Role.ADMIN)) as admin:
        try:
            if args.controller_command == "show":
                status = admin.describe_controller_pin()
                if args.json:
                    print(json.dumps(status_json(status), indent=2))
                else:
                    console.print(f"controller: {_controller_text(status)}, {status.summary()}")
                return 0
            if args.controller_command == "unpin":
                status = admin.unpin_controller()
                console.print(f"controller unpinned; the controller is {_controller_text(status)}")
                return 0
            return _pin(admin, args, console)
        except KafkaError as exc:
            raise CommandError(str(exc)) from None


def _pin(admin: object, args: argparse.Namespace, console: Console) -> int:
    from epochlog.protocol.messages.pin_controller import PinState

    started = time.monotonic()
    status: PinStatus = admin.pin_controller(  # type: ignore[attr-defined]
        args.id, auto=args.auto, allow_absent=args.allow_absent
    )
    console.print(f"controller pinned to broker {status.pinned}")
    deadline = started + args.wait
    while (
        status.state is PinState.PENDING
        and status.pinned_registered
        and time.monotonic() < deadline
    ):
        time.sleep(0.1)
        status = admin.describe_controller_pin()  # type: ignore[attr-defined]
    if status.state is PinState.IN_FORCE:
        console.print(
            f"broker {status.pinned} is the controller "
            f"({time.monotonic() - started:.1f} s after the pin)"
        )
        return 0
    console.print(f"controller: {_controller_text(status)}, {status.summary()}")
    # pending because the broker is absent is what --allow-absent asked for
    return 0 if not status.pinned_registered or args.wait == 0 else 1
