"""What every command module shares: the error a command reports, and where its cluster is."""

from __future__ import annotations

import argparse


class CommandError(Exception):
    """A command that cannot do what was asked; the message says why."""


def bootstrap_servers(args: argparse.Namespace) -> str:
    """`--bootstrap-server`, else the local cluster in `--dir` (`epochlog up`)."""
    if args.bootstrap_server:
        return args.bootstrap_server
    from epochlog.node.local_cluster import ClusterError, LocalCluster

    try:
        return LocalCluster.attach(args.dir).bootstrap_servers
    except ClusterError as exc:
        raise CommandError(f"{exc}, or pass --bootstrap-server") from None
