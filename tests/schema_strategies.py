"""Hypothesis strategies that build random messages from the schemas, version by version."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from epochlog.protocol.codec import Message
from epochlog.protocol.schema import INT_RANGES, Field


def _scalar(t: str) -> st.SearchStrategy[Any]:
    if t in INT_RANGES:
        lo, hi = INT_RANGES[t]
        return st.integers(lo, hi)
    if t == "bool":
        return st.booleans()
    if t == "float64":
        return st.floats(allow_nan=False)
    if t == "uuid":
        return st.uuids()
    if t == "string":
        return st.text(max_size=12)
    if t in ("bytes", "records"):
        return st.binary(max_size=40)
    raise AssertionError(t)


def field_strategy(cls: type[Message], f: Field, version: int) -> st.SearchStrategy[Any]:
    if f.is_struct:
        elem = message_strategy(getattr(cls.MESSAGE, f.element_type), version)
    else:
        elem = _scalar(f.element_type)
    value = st.lists(elem, max_size=3) if f.is_array else elem
    if version in f.nullable:
        value = st.none() | value
    return value


def message_strategy(cls: type[Message], version: int) -> st.SearchStrategy[Message]:
    """Random instances of `cls` with every field of `version` set (others left default)."""
    kwargs = {f.attr: field_strategy(cls, f, version) for f in cls.FIELDS if version in f.versions}
    return st.builds(cls, **kwargs)
