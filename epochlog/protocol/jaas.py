"""Kafka's `sasl.jaas.config` values: JAAS login-module entries in one line.

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_alice="alice-secret";

Each entry is a login module class, a control flag (required, requisite, sufficient, optional),
options `key=value` (the value quoted with `"`, or a bare token), and a closing `;` (Kafka's
JaasConfig: exactly one entry for a client or a listener's mechanism). What the options mean:
PLAIN on a broker: `user_<name>="<password>"` are the users it accepts, `username`/`password`
what the broker itself logs in with to other brokers; SCRAM's module takes `username`/`password`
for the client side (the server's credentials are in ZooKeeper).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<quoted>"(?:[^"\\]|\\.)*")
      | (?P<semicolon>;)
      | (?P<equals>=)
      | (?P<word>[^\s=;"]+)
    )""",
    re.VERBOSE,
)


@dataclass(frozen=True, slots=True)
class JaasEntry:
    login_module: str
    control_flag: str
    options: dict[str, str] = field(default_factory=dict)

    @property
    def plain_users(self) -> dict[str, str]:
        """PlainLoginModule's `user_<name>` options: name -> password."""
        return {k[len("user_") :]: v for k, v in self.options.items() if k.startswith("user_")}


def _tokens(text: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            raise ValueError(f"invalid JAAS config at character {pos}: {text[pos : pos + 20]!r}")
        kind = match.lastgroup
        assert kind is not None
        value = match.group(kind)
        if kind == "quoted":
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        tokens.append((kind, value))
        pos = match.end()
    return tokens


def parse_jaas_config(text: str) -> list[JaasEntry]:
    """Every entry of a `sasl.jaas.config` value; ValueError naming what is wrong."""
    tokens = _tokens(text)
    entries: list[JaasEntry] = []
    i = 0
    while i < len(tokens):
        if tokens[i][0] != "word":
            raise ValueError(f"invalid JAAS config: expected a login module, got {tokens[i][1]!r}")
        module = tokens[i][1]
        if i + 1 >= len(tokens) or tokens[i + 1][1] not in CONTROL_FLAGS:
            raise ValueError(
                f"invalid JAAS config: {module} needs a control flag ({', '.join(CONTROL_FLAGS)})"
            )
        flag = tokens[i + 1][1]
        i += 2
        options: dict[str, str] = {}
        while True:
            if i >= len(tokens):
                raise ValueError(f"invalid JAAS config: the entry for {module} does not end in ;")
            if tokens[i][0] == "semicolon":
                i += 1
                break
            if (
                i + 2 >= len(tokens)
                or tokens[i][0] != "word"
                or tokens[i + 1][0] != "equals"
                or tokens[i + 2][0] not in ("quoted", "word")
            ):
                raise ValueError(
                    f"invalid JAAS config: expected key=value in the entry for {module}, "
                    f"got {tokens[i][1]!r}"
                )
            options[tokens[i][1]] = tokens[i + 2][1]
            i += 3
        entries.append(JaasEntry(module, flag, options))
    if not entries:
        raise ValueError("invalid JAAS config: no login module")
    return entries


def single_entry(text: str) -> JaasEntry:
    """The one entry Kafka allows in a client's or a listener mechanism's `sasl.jaas.config`."""
    entries = parse_jaas_config(text)
    if len(entries) != 1:
        raise ValueError(
            f"sasl.jaas.config must hold exactly one login module, it holds {len(entries)}"
        )
    return entries[0]


def username_password(text: str) -> tuple[str, str]:
    """A client's `username` and `password` options (PLAIN or SCRAM login module)."""
    entry = single_entry(text)
    try:
        return entry.options["username"], entry.options["password"]
    except KeyError as missing:
        raise ValueError(f"sasl.jaas.config has no {missing.args[0]} option") from None


_SECTION = re.compile(
    r'\s*(?P<name>[A-Za-z_][\w.-]*)\s*\{(?P<body>(?:"(?:[^"\\]|\\.)*"|[^"}])*)\}\s*;'
)


def parse_jaas_sections(text: str) -> dict[str, list[JaasEntry]]:
    """A JAAS file (`Name { module flag key="value"...; };` sections, `//` comments ignored):
    section name -> its entries; ValueError naming what is wrong."""
    text = re.sub(r"^\s*//.*$", "", text, flags=re.MULTILINE)
    sections: dict[str, list[JaasEntry]] = {}
    pos = 0
    while text[pos:].strip():
        match = _SECTION.match(text, pos)
        if match is None:
            raise ValueError(
                f"invalid JAAS file at character {pos}: expected `Name {{ ... }};`, got "
                f"{text[pos : pos + 20].strip()!r}"
            )
        sections[match.group("name")] = parse_jaas_config(match.group("body"))
        pos = match.end()
    return sections
