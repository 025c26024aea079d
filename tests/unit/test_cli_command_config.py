"""`--command-config FILE`: Kafka's client-properties file, passed to each command's clients."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from epochlog.cli.common import CommandError, client_config
from epochlog.cli.main import build_parser
from epochlog.client.config import Role


def args_with(tmp_path: Path, text: str) -> argparse.Namespace:
    path = tmp_path / "client.properties"
    path.write_text(text)
    return build_parser().parse_args(
        ["topics", "list", "--bootstrap-server", "h:1", "--command-config", str(path)]
    )


def test_keys_reach_the_role_that_takes_them(tmp_path: Path) -> None:
    args = args_with(tmp_path, "# ours\nclient.id=ops\nlinger.ms=7\nrequest.timeout.ms: 9000\n")
    assert client_config(args, Role.ADMIN) == {
        "bootstrap.servers": "h:1",
        "client.id": "ops",
        "request.timeout.ms": "9000",
    }
    assert client_config(args, Role.PRODUCER, acks="all")["linger.ms"] == "7"


def test_a_key_no_client_knows_is_refused_by_name(tmp_path: Path) -> None:
    args = args_with(tmp_path, "client.id=ops\nsasl.mechansim=PLAIN\n")
    with pytest.raises(CommandError, match="'sasl.mechansim' is not a client config key"):
        client_config(args, Role.ADMIN)


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    args = build_parser().parse_args(
        ["topics", "list", "--bootstrap-server", "h:1", "--command-config", str(tmp_path / "x")]
    )
    with pytest.raises(CommandError, match="cannot read --command-config"):
        client_config(args, Role.ADMIN)


def subcommands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """Every (command path, parser) below `parser`, nested subcommands included."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*path, name), sub
                yield from subcommands(sub, (*path, name))


def test_every_command_that_reaches_brokers_takes_it() -> None:
    reaching = [
        (path, sub)
        for path, sub in subcommands(build_parser())
        if any("--bootstrap-server" in a.option_strings for a in sub._actions)
    ]
    assert len(reaching) > 20
    for path, sub in reaching:
        assert any("--command-config" in a.option_strings for a in sub._actions), path
