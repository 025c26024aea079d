"""README's Spark parity table is `epochlog.spark.parity.render()`, and its rows are exactly the
options the data source reads (scanned from options.py), each naming a test that exists."""

from __future__ import annotations

import re
from pathlib import Path

from epochlog.spark import options as options_module
from epochlog.spark.parity import BEHAVIOURS, OPTIONS, render

ROOT = Path(__file__).resolve().parents[2]


def options_read_by_the_parser() -> set[str]:
    """Option keys options.py reads: opts.get("k"), opts["k"], _positive(opts, "K"), the
    subscribe/subscribePattern/assign choice and the starting/ending families built from a
    prefix."""
    src = Path(options_module.__file__).read_text()
    keys = set(re.findall(r'opts\.get\(\s*"([a-z.]+)"', src))
    keys |= set(re.findall(r'opts\["([a-z.]+)"\]', src))
    keys |= {k.lower() for k in re.findall(r'_positive\(opts, "([A-Za-z.]+)"\)', src)}
    for group in re.findall(r"for k in \(([^)]*)\)", src):
        keys |= set(re.findall(r'"([a-z.]+)"', group))
    for suffix in re.findall(r'f"\{prefix\}([a-z]+)"', src):
        keys |= {"starting" + suffix, "ending" + suffix}
    return keys


def test_the_table_rows_are_the_options_the_parser_reads() -> None:
    tabled = {row.option.lower() for row in OPTIONS if row.option != "kafka.*"}
    assert tabled == options_read_by_the_parser()


def test_every_row_names_a_test_that_exists() -> None:
    for row in OPTIONS + BEHAVIOURS:
        path, _, func = row.test.partition("::")
        text = (ROOT / path).read_text()
        assert re.search(rf"^def {re.escape(func)}\(", text, re.M), row.test


def test_the_readme_holds_the_generated_table() -> None:
    readme = (ROOT / "README.md").read_text()
    assert render() in readme, "regenerate it: python -m epochlog.spark.parity --update README.md"
