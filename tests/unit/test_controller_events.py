"""The controller's inputs are the typed values of controller/events.py, each with one handler."""

from __future__ import annotations

import dataclasses
import inspect
import typing

import pytest

from epochlog.controller import events as ev
from epochlog.controller.controller import Controller


def handler_table() -> dict[type, typing.Any]:
    # the table only binds methods: a Controller without its I/O is enough to read it
    return Controller.__new__(Controller)._handler_table()


def test_every_event_type_has_exactly_one_handler_and_every_handler_an_event() -> None:
    declared = set(typing.get_args(ev.ControllerEvent))
    defined = {
        cls for _, cls in inspect.getmembers(ev, inspect.isclass) if cls.__module__ == ev.__name__
    }
    assert declared == defined  # nothing defined outside the union, nothing listed twice
    assert set(handler_table()) == declared


def test_each_handler_takes_its_event() -> None:
    for event_type, handler in handler_table().items():
        parameters = list(inspect.signature(handler).parameters.values())
        assert len(parameters) == 1, (event_type.__name__, handler.__name__)
        hint = typing.get_type_hints(handler).get(parameters[0].name)
        assert hint is event_type, (event_type.__name__, handler.__name__, hint)


def test_events_are_immutable_values() -> None:
    event = ev.ControlledShutdown(broker_id=2, broker_epoch=7)
    assert event == ev.ControlledShutdown(2, 7)
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.broker_id = 3  # type: ignore[misc]
