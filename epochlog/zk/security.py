"""ZooKeeper locked down (Kafka's `zookeeper.set.acl`): which ACL each znode gets, and how a
broker or tool logs in to ZooKeeper.

Kafka's rule (`ZkData.defaultAcls`): with `zookeeper.set.acl=true` every znode a broker creates
gets CREATOR_ALL (the identities its creator logged in with may do anything) and, unless the
path is sensitive, READ for the world; the old consumers' path `/consumers` stays open. Sensitive
paths (`ZkData.SensitiveRootPaths`, matched with `startsWith`) are `/config/users` (SCRAM
credentials), `/config/brokers` (broker configs, which may hold passwords) and
`/delegation_token/tokens`. ACLs under `/kafka-acl` are not sensitive in Kafka: the world may read
them, as here.

The login: Kafka brokers log in to ZooKeeper with SASL (a JAAS `Client` section) or a TLS client
certificate, both needing server-side configuration. Here the broker logs in with ZooKeeper's
built-in `digest` scheme (`addauth digest user:password`), which every ensemble accepts with no
server configuration; the username and password come from a JAAS file in Kafka's format, its
`Client` section (ZooKeeper's default `zookeeper.sasl.clientconfig`) holding
`org.apache.zookeeper.server.auth.DigestLoginModule required username="..." password="...";`
(the same file a Kafka broker would name with `-Djava.security.auth.login.config`).
Pure: paths in, ACL lists out.
"""

from __future__ import annotations

from dataclasses import dataclass

from kazoo.security import ACL, CREATOR_ALL_ACL, OPEN_ACL_UNSAFE, READ_ACL_UNSAFE

from epochlog.protocol.jaas import parse_jaas_sections

SENSITIVE_ROOT_PATHS = ("/config/users", "/config/brokers", "/delegation_token/tokens")
OLD_CONSUMERS_PATH = "/consumers"  # kept open: old consumers wrote under it
DIGEST_LOGIN_MODULE = "org.apache.zookeeper.server.auth.DigestLoginModule"
CLIENT_SECTION = "Client"


def is_sensitive_path(path: str) -> bool:
    """Kafka's `ZkData.sensitivePath`: a prefix match, so `/config/users` itself counts too."""
    return any(path.startswith(root) for root in SENSITIVE_ROOT_PATHS)


_OPEN = list(OPEN_ACL_UNSAFE)
_CREATOR_ONLY = list(CREATOR_ALL_ACL)
_CREATOR_WORLD_READ = list(CREATOR_ALL_ACL) + list(READ_ACL_UNSAFE)


def znode_acls(path: str, secure: bool) -> list[ACL]:
    """The ACL a znode at `path` (relative to the chroot) is created with (shared lists: a
    topic creation asks once per partition; nobody mutates them)."""
    if not secure or path == OLD_CONSUMERS_PATH:
        return _OPEN
    if is_sensitive_path(path):
        return _CREATOR_ONLY
    return _CREATOR_WORLD_READ


@dataclass(frozen=True)
class ZkLogin:
    """A digest-scheme identity for ZooKeeper."""

    username: str
    password: str

    @property
    def auth_data(self) -> list[tuple[str, str]]:
        """kazoo's `auth_data` (sent as `addauth` on every (re)connection)."""
        return [("digest", f"{self.username}:{self.password}")]

    def __repr__(self) -> str:  # never print the password
        return f"ZkLogin(username={self.username!r})"


def zk_login_from_jaas(text: str, source: str, section: str = CLIENT_SECTION) -> ZkLogin:
    """The digest login in section `section` of the JAAS file `text`; ValueError naming the
    file (`source`) and what is missing."""
    try:
        sections = parse_jaas_sections(text)
    except ValueError as exc:
        raise ValueError(f"{source}: {exc}") from None
    entries = sections.get(section)
    if not entries:
        raise ValueError(f"{source}: no {section} section (the broker's ZooKeeper login)")
    entry = entries[0]
    if entry.login_module != DIGEST_LOGIN_MODULE:
        raise ValueError(
            f"{source}: the {section} section's login module is {entry.login_module}, "
            f"expected {DIGEST_LOGIN_MODULE} (ZooKeeper's digest scheme)"
        )
    missing = [k for k in ("username", "password") if not entry.options.get(k)]
    if missing:
        raise ValueError(f"{source}: the {section} section has no {' or '.join(missing)}")
    return ZkLogin(entry.options["username"], entry.options["password"])


def zk_jaas_file(login: ZkLogin) -> str:
    """A JAAS file whose Client section is `login` (what `up --secure` writes)."""

    def quoted(value: str) -> str:
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'

    return (
        f"{CLIENT_SECTION} {{\n  {DIGEST_LOGIN_MODULE} required\n"
        f"  username={quoted(login.username)}\n  password={quoted(login.password)};\n}};\n"
    )
