"""`epochlog users scram set|delete|describe`: users' SCRAM credentials, with kafka-configs'
vocabulary (its `--alter --add-config 'SCRAM-SHA-256=[iterations=8192,password=...]'`).

    epochlog users scram set --user alice --mechanism SCRAM-SHA-256 [--iterations 8192]
        [--password PW]            (prompted for when not given)
    epochlog users scram delete --user alice --mechanism SCRAM-SHA-512
    epochlog users scram describe [--user alice ...]

`--command-config FILE` is a properties file of client settings (security.protocol,
sasl.mechanism, sasl.username, ...) for a cluster that wants clients to log in, as with Kafka's
tools. The credential goes through AlterUserScramCredentials: the password is salted here and
never leaves this process.
"""

from __future__ import annotations

import argparse
import getpass
from collections.abc import Callable

from rich.console import Console
from rich.table import Table

MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


def add_parser(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    add_bootstrap: Callable[[argparse.ArgumentParser], None],
) -> None:
    users = sub.add_parser("users", help="users' SASL/SCRAM credentials")
    kinds = users.add_subparsers(dest="users_kind", required=True)
    scram = kinds.add_parser("scram", help="SCRAM credentials (KIP-554)")
    commands = scram.add_subparsers(dest="scram_command", required=True)
    set_cmd = commands.add_parser("set", help="create or replace a user's credential")
    set_cmd.add_argument("--user", required=True)
    set_cmd.add_argument("--mechanism", required=True, type=str.upper, choices=MECHANISMS)
    set_cmd.add_argument("--iterations", type=int, default=4096, help="4096 (Kafka's minimum)")
    set_cmd.add_argument("--password", help="prompted for when not given")
    delete = commands.add_parser("delete", help="remove a user's credential for a mechanism")
    delete.add_argument("--user", required=True)
    delete.add_argument("--mechanism", required=True, type=str.upper, choices=MECHANISMS)
    describe = commands.add_parser("describe", help="mechanisms and iterations of users")
    describe.add_argument("--user", action="append", dest="users", help="repeatable; all if none")
    for command in (set_cmd, delete, describe):
        add_bootstrap(command)  # --bootstrap-server, --command-config, --dir


def run(args: argparse.Namespace, console: Console) -> int:
    from epochlog.cli.common import CommandError, client_config
    from epochlog.client import Admin, ClientError
    from epochlog.client.config import Role

    try:
        with Admin(client_config(args, Role.ADMIN)) as admin:
            if args.scram_command == "set":
                password = args.password
                if password is None:
                    password = getpass.getpass(f"password for {args.user}: ")
                if not password:
                    raise CommandError("the password must not be empty")
                admin.upsert_scram_credential(args.user, args.mechanism, password, args.iterations)
                console.print(f"set {args.mechanism} credential of user {args.user}")
            elif args.scram_command == "delete":
                admin.delete_scram_credential(args.user, args.mechanism)
                console.print(f"deleted {args.mechanism} credential of user {args.user}")
            else:
                found = admin.describe_user_scram_credentials(args.users)
                table = Table(title="SCRAM credentials")
                for column in ("user", "mechanism", "iterations"):
                    table.add_column(column)
                for user, infos in sorted(found.items()):
                    for info in infos:
                        table.add_row(user, info.mechanism, str(info.iterations))
                console.print(table)
    except ClientError as exc:
        raise CommandError(str(exc)) from None
    return 0
