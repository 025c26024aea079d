"""The `epochlog` command."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from rich.console import Console
from rich.logging import RichHandler


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="epochlog", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the demo and print a summary")
    demo.add_argument("--dir", default=".epochlog", help="working directory (default .epochlog)")
    args = parser.parse_args(argv)
    console = Console()
    logging.basicConfig(
        level=logging.WARNING, format="%(message)s", handlers=[RichHandler(console=console)]
    )
    if args.command == "demo":
        from epochlog.cli.storage_demo import run

        return 0 if run(Path(args.dir), console) else 1
    return 2


if __name__ == "__main__":
    sys.exit(main())
