"""What `epochlog up --secure` puts in place: secrets, broker settings, the client config.

`SecureCluster.create(dir)` writes, under `<dir>/secrets/` (directory 0700, files 0600): a CA
(`ca.pem`, `security.certs.CertificateAuthority`), the brokers' certificate for 127.0.0.1 and
localhost (`broker.pem`: key + chain, Kafka's PEM keystore), generated passwords (`secrets`
module) of the super user `admin` and of the inter-broker user `broker`, and the JAAS file of
the ZooKeeper login (`zookeeper_jaas.conf`, digest scheme, user `broker` with a password of its
own). `SecureCluster.load(dir)` reads them back for `down`, `status`, `broker ...` and the
commands that find the cluster through `--dir`.

The rest is pure: `broker_config()` is the brokers' settings (one SASL_SSL listener, SCRAM-SHA-512
inside and out, the ACL authorizer with `super.users=User:admin;User:broker` and nothing open to
everyone, ZooKeeper locked down), `client_properties()` the admin's `client.properties` in Kafka's
client-config format, `usage()` what `up` prints about it. `write_scram_credentials` puts admin's
and broker's SCRAM credentials in ZooKeeper (`/config/users/<user>`) before any broker starts, as
operators do with `kafka-configs --zookeeper ... --alter --add-config 'SCRAM-SHA-512=[...]'`.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from kazoo.exceptions import NodeExistsError

from epochlog.protocol.scram import MECHANISMS
from epochlog.security.certs import CertificateAuthority
from epochlog.security.scram_credentials import ScramCredential, user_znode_json
from epochlog.zk.security import ZkLogin, zk_jaas_file, zk_login_from_jaas

SECRETS_DIR = "secrets"
CLIENT_PROPERTIES = "client.properties"
LISTENER = "SASL_SSL"
MECHANISM = "SCRAM-SHA-512"
ADMIN_USER = "admin"
BROKER_USER = "broker"
SCRAM_ITERATIONS = 8192
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


def _jaas(user: str, password: str) -> str:
    return f'{SCRAM_LOGIN_MODULE} required username="{user}" password="{password}";'


def _write_secret(path: Path, text: str | bytes) -> None:
    """Create `path` readable by its owner alone, before anything is written to it."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(text.encode() if isinstance(text, str) else text)
    path.chmod(0o600)


@dataclass(frozen=True)
class SecureCluster:
    """The secrets of a secure local cluster and where they are."""

    directory: Path  # the cluster directory
    admin_password: str
    broker_password: str
    zk_login: ZkLogin

    @property
    def secrets_dir(self) -> Path:
        return self.directory / SECRETS_DIR

    @property
    def ca_file(self) -> Path:
        return self.secrets_dir / "ca.pem"

    @property
    def broker_keystore(self) -> Path:
        return self.secrets_dir / "broker.pem"

    @property
    def zk_jaas_file(self) -> Path:
        return self.secrets_dir / "zookeeper_jaas.conf"

    @property
    def client_properties_file(self) -> Path:
        return self.directory / CLIENT_PROPERTIES

    # --------------------------------------------------------------------- files

    @classmethod
    def create(cls, directory: str | os.PathLike[str]) -> SecureCluster:
        directory = Path(directory).resolve()
        secret_dir = directory / SECRETS_DIR
        secret_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        secret_dir.chmod(0o700)
        ca = CertificateAuthority.create(secret_dir)
        issued = ca.issue("broker", hosts=("localhost", "127.0.0.1"))
        cluster = cls(
            directory,
            admin_password=secrets.token_urlsafe(24),
            broker_password=secrets.token_urlsafe(24),
            zk_login=ZkLogin(BROKER_USER, secrets.token_urlsafe(24)),
        )
        for path in (ca.ca_file, issued.keystore, issued.key, issued.certificate):
            path.chmod(0o600)
        _write_secret(secret_dir / f"{ADMIN_USER}.password", cluster.admin_password + "\n")
        _write_secret(secret_dir / f"{BROKER_USER}.password", cluster.broker_password + "\n")
        _write_secret(cluster.zk_jaas_file, zk_jaas_file(cluster.zk_login))
        return cluster

    @classmethod
    def load(cls, directory: str | os.PathLike[str]) -> SecureCluster | None:
        """The secrets `create` wrote in `directory`, None when it is not a secure cluster."""
        directory = Path(directory).resolve()
        secret_dir = directory / SECRETS_DIR
        jaas = secret_dir / "zookeeper_jaas.conf"
        if not jaas.exists():
            return None
        return cls(
            directory,
            admin_password=(secret_dir / f"{ADMIN_USER}.password").read_text().strip(),
            broker_password=(secret_dir / f"{BROKER_USER}.password").read_text().strip(),
            zk_login=zk_login_from_jaas(jaas.read_text(), str(jaas)),
        )

    def write_client_properties(self) -> Path:
        _write_secret(self.client_properties_file, self.client_properties())
        return self.client_properties_file

    # --------------------------------------------------------------------- settings

    def broker_config(self) -> dict[str, str]:
        """Every broker's settings beside its listener, ports and directories."""
        prefix = f"listener.name.{LISTENER.lower()}"
        return {
            "listener.security.protocol.map": f"{LISTENER}:SASL_SSL",
            "inter.broker.listener.name": LISTENER,
            "sasl.enabled.mechanisms": MECHANISM,
            "sasl.mechanism.inter.broker.protocol": MECHANISM,
            f"{prefix}.{MECHANISM.lower()}.sasl.jaas.config": _jaas(
                BROKER_USER, self.broker_password
            ),
            "ssl.keystore.location": str(self.broker_keystore),
            "ssl.truststore.location": str(self.ca_file),
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": f"User:{ADMIN_USER};User:{BROKER_USER}",
            "allow.everyone.if.no.acl.found": "false",
            "zookeeper.set.acl": "true",
            "epochlog.zookeeper.login.config": str(self.zk_jaas_file),
        }

    def client_properties(self) -> str:
        """admin's client config in Kafka's format (Java keys), for `--command-config`; no
        bootstrap.servers, as Kafka's tools take it from `--bootstrap-server`."""
        lines = [
            "# epochlog up --secure: the super user admin over SASL_SSL with SCRAM-SHA-512",
            f"security.protocol={LISTENER}",
            f"sasl.mechanism={MECHANISM}",
            f"sasl.jaas.config={_jaas(ADMIN_USER, self.admin_password)}",
            "ssl.truststore.type=PEM",
            f"ssl.truststore.location={self.ca_file}",
        ]
        return "\n".join(lines) + "\n"

    def usage(self, bootstrap_servers: str) -> list[str]:
        """How to use the cluster with Kafka's tools, librdkafka/kcat and our commands."""
        props = self.client_properties_file
        return [
            f"client config (admin, SASL_SSL, {MECHANISM}): {props}",
            f"  Kafka's tools: kafka-topics.sh --bootstrap-server {bootstrap_servers} "
            f"--command-config {props} --list",
            f"  epochlog: `epochlog topics list --dir {self.directory}` uses it by itself; "
            f"elsewhere --command-config {props}",
            f"  librdkafka / kcat: -X security.protocol={LISTENER} -X sasl.mechanisms={MECHANISM} "
            f"-X sasl.username={ADMIN_USER} -X sasl.password=<{self.secrets_dir}/"
            f"{ADMIN_USER}.password> -X ssl.ca.location={self.ca_file}",
            f"  kafka-python / aiokafka: security_protocol={LISTENER}, "
            f"sasl_mechanism={MECHANISM}, sasl_plain_username={ADMIN_USER}, "
            f"sasl_plain_password=..., ssl_cafile={self.ca_file}",
        ]


def write_scram_credentials(
    zk_connect: str, login: ZkLogin, users: dict[str, str], iterations: int = SCRAM_ITERATIONS
) -> None:
    """`users`' SCRAM-SHA-512 credentials in `/config/users/<user>`, written with `login` and
    Kafka's secure ACLs (the world may not read them)."""
    from epochlog.zk.session import close_client, connect

    mechanism = MECHANISMS[MECHANISM]
    client = connect(zk_connect, login=login, secure_acls=True)
    try:
        client.ensure_path("/config/users")
        for user, password in users.items():
            credential = ScramCredential.from_password(mechanism, password, iterations)
            data = user_znode_json({MECHANISM: credential.to_string()})
            try:
                client.create(f"/config/users/{user}", data)
            except NodeExistsError:
                client.set(f"/config/users/{user}", data)
    finally:
        close_client(client)
