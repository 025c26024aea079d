"""ErrorCode.of: every named code maps to itself, anything else to UNKNOWN_SERVER_ERROR."""

from __future__ import annotations

from epochlog.protocol.errors import ErrorCode


def test_every_named_code_maps_to_its_member() -> None:
    for code in ErrorCode:
        assert ErrorCode.of(code.value) is code
        assert ErrorCode.of(int(code)) is code


def test_codes_the_table_does_not_know_are_unknown_server_error() -> None:
    for code in (12345, -2, 2**15):
        assert ErrorCode.of(code) is ErrorCode.UNKNOWN_SERVER_ERROR
