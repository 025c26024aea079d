"""Every (API, version) we serve round-trips through the compiled codec; bad bytes fail cleanly."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from epochlog.protocol.api import APIS
from epochlog.protocol.codec import Message
from epochlog.protocol.errors import DecodeError
from tests.schema_strategies import message_strategy

CASES = [
    pytest.param(cls, version, id=f"{cls.SCHEMA.name}-v{version}")
    for api in APIS.values()
    for cls in (api.request, api.response)
    for version in range(api.min_version, api.max_version + 1)
]

FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize(("cls", "version"), CASES)
@FAST
@given(data=st.data())
def test_message_round_trips(cls: type[Message], version: int, data: st.DataObject) -> None:
    obj = data.draw(message_strategy(cls, version))
    encoded = obj.encode(version)
    assert cls.decode(encoded, version) == obj
    # decoding is deterministic: encoding the decoded message gives the same bytes
    assert cls.decode(encoded, version).encode(version) == encoded


@pytest.mark.parametrize(("cls", "version"), CASES)
@settings(max_examples=5, deadline=None)
@given(data=st.data())
def test_every_truncation_raises_decode_error_naming_the_message(
    cls: type[Message], version: int, data: st.DataObject
) -> None:
    encoded = data.draw(message_strategy(cls, version)).encode(version)
    for cut in range(len(encoded)):
        with pytest.raises(DecodeError) as info:
            cls.decode(encoded[:cut], version)
        assert f"{cls.SCHEMA.name} v{version}" in str(info.value)


@pytest.mark.parametrize(("cls", "version"), CASES)
@settings(max_examples=30, deadline=None)
@given(garbage=st.binary(max_size=64))
def test_garbage_either_decodes_or_raises_decode_error(
    cls: type[Message], version: int, garbage: bytes
) -> None:
    try:
        obj = cls.decode(garbage, version)
    except DecodeError:
        return
    assert isinstance(obj, cls)
