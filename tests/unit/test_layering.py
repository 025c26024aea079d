"""The one-way dependencies DESIGN.md draws: protocol at the bottom, storage and config on it; the
data plane, the controller and the coordinators side by side on those, never importing each
other; one package (node) assembling a broker process; the client on protocol alone; the Spark
source and the proxy on the client; nothing in production importing testing/. Read from the
source's import statements, so a module that reaches across (the Spark source importing broker
code, say) fails here rather than in review."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

import epochlog

PACKAGE = Path(epochlog.__file__).parent

# package -> the other epochlog packages and modules it may import
ALLOWED: dict[str, set[str]] = {
    "protocol": set(),
    "storage": {"protocol", "metrics"},
    # configuration sits below everything that reads it
    "config": {"protocol", "storage"},
    "zk": {"protocol", "storage", "security", "processes", "metrics"},
    "coordinator": {"protocol"},
    # metrics: counters the hot path increments and their Prometheus rendering, below everything
    # that counts (what a scrape reads is assembled by node)
    "metrics": {"protocol"},
    # security decisions (principals, SASL, ACLs, TLS settings), below their callers
    "security": {"protocol", "config"},
    # the data plane and the controller never import each other (nor the coordinators)
    "broker": {"protocol", "storage", "config", "security", "client", "aio", "faults", "metrics"},
    "controller": {
        "protocol",
        "storage",
        "config",
        "security",
        "zk",
        "client",
        "aio",
        "faults",
        "metrics",
    },
    # one package assembles a broker process
    "node": {
        "broker",
        "controller",
        "coordinator",
        "config",
        "zk",
        "protocol",
        "security",
        "storage",
        "client",
        "aio",
        "processes",
        "faults",
        "metrics",
    },
    "client": {"protocol", "aio"},
    "spark": {"client", "protocol", "aio"},
    "proxy": {"client", "protocol", "aio"},
    # the web console reads through the client (admin API); never broker or controller code
    "console": {"client", "protocol", "aio", "config"},
    # production code never imports testing/
    # (controller: its pure replica assignment, for `reassign --generate`)
    "cli": {
        "client",
        "node",
        "controller",
        "config",
        "zk",
        "protocol",
        "proxy",
        "console",
        "spark",
        "security",
        "storage",
        "aio",
    },
}


def imported_packages(package: str) -> dict[str, set[str]]:
    """Each epochlog package `package`'s modules import, with the modules importing it."""
    found: dict[str, set[str]] = {}
    for path in sorted((PACKAGE / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                parts = name.split(".")
                if parts[0] == "epochlog" and len(parts) > 1 and parts[1] != package:
                    found.setdefault(parts[1], set()).add(str(path.relative_to(PACKAGE)))
    return found


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_package_imports_only_what_the_design_allows(package: str) -> None:
    imports = imported_packages(package)
    forbidden = {
        name: sorted(where) for name, where in imports.items() if name not in ALLOWED[package]
    }
    assert not forbidden, f"epochlog/{package} imports {forbidden}"


def test_the_check_sees_a_forbidden_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "client"
    fake.mkdir()
    (fake / "x.py").write_text(
        "from epochlog.broker.server import KafkaServer\nimport epochlog.protocol\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", tmp_path)
    found = imported_packages("client")
    assert found == {"broker": {"client/x.py"}, "protocol": {"client/x.py"}}


def test_the_two_coordinators_do_not_import_each_other() -> None:
    """coordinator/group and coordinator/transaction sit side by side: what they share belongs
    below them (protocol), so either can change or move without the other."""
    for package, other in (("group", "transaction"), ("transaction", "group")):
        for path in sorted((PACKAGE / "coordinator" / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.ImportFrom) and node.module:
                    assert not node.module.startswith(f"epochlog.coordinator.{other}"), path
                elif isinstance(node, ast.Import):
                    for alias in node.names:
                        assert not alias.name.startswith(f"epochlog.coordinator.{other}"), path
