"""`epochlog up --secure`'s pieces without processes: ZooKeeper's per-path ACLs and login, the
secrets on disk, the brokers' settings, client.properties, and the local cluster's main listener."""

from __future__ import annotations

import argparse
import json
import stat
from pathlib import Path

import pytest
from kazoo.security import CREATOR_ALL_ACL, OPEN_ACL_UNSAFE, READ_ACL_UNSAFE

from epochlog.cli.common import client_config, command_config_path
from epochlog.client.config import Role, load_config
from epochlog.config.broker import BrokerConfig, ConfigError
from epochlog.node.local_cluster import STATE_FILE, LocalCluster
from epochlog.node.process import zookeeper_login
from epochlog.node.secure_cluster import CLIENT_PROPERTIES, SecureCluster
from epochlog.protocol.jaas import parse_jaas_sections
from epochlog.zk.security import (
    ZkLogin,
    is_sensitive_path,
    zk_jaas_file,
    zk_login_from_jaas,
    znode_acls,
)
from epochlog.zk.session import make_client

CREATOR_WORLD_READ = list(CREATOR_ALL_ACL) + list(READ_ACL_UNSAFE)


# ----------------------------------------------------------------------------- ZooKeeper ACLs


@pytest.mark.parametrize(
    "path",
    [
        "/config/users",
        "/config/users/admin",
        "/config/brokers",
        "/config/brokers/<default>",
        "/delegation_token/tokens/t1",
    ],
)
def test_sensitive_paths_are_not_world_readable(path: str) -> None:
    assert is_sensitive_path(path)
    assert znode_acls(path, True) == list(CREATOR_ALL_ACL)


@pytest.mark.parametrize(
    "path",
    [
        "/brokers/ids/1",
        "/config",
        "/config/topics/t",
        "/config/changes/config_change_0000000001",
        "/kafka-acl/Topic/t",  # Kafka's ACL znodes are not sensitive
        "/controller",
    ],
)
def test_other_paths_give_the_world_read_only(path: str) -> None:
    assert not is_sensitive_path(path)
    assert znode_acls(path, True) == CREATOR_WORLD_READ


def test_without_set_acl_and_on_the_old_consumers_path_znodes_are_open() -> None:
    assert znode_acls("/config/users/admin", False) == list(OPEN_ACL_UNSAFE)
    assert znode_acls("/consumers", True) == list(OPEN_ACL_UNSAFE)


def test_secure_client_creates_with_the_path_acl_also_in_transactions() -> None:
    client = make_client("127.0.0.1:1", secure_acls=True, login=ZkLogin("broker", "pw"))
    assert list(client.auth_data) == [("digest", "broker:pw")]
    tx = client.transaction()
    tx.create("/config/users/bob", b"{}")
    tx.create("/brokers/topics/t", b"{}")
    assert [op.acl for op in tx.operations] == [list(CREATOR_ALL_ACL), CREATOR_WORLD_READ]
    plain = make_client("127.0.0.1:1").transaction()
    plain.create("/config/users/bob", b"{}")
    assert plain.operations[0].acl == list(OPEN_ACL_UNSAFE)


# ----------------------------------------------------------------------------- ZooKeeper login


def test_jaas_file_round_trip_gives_the_digest_login() -> None:
    login = ZkLogin("broker", 'p"w;}x')
    assert zk_login_from_jaas(zk_jaas_file(login), "f") == login
    assert "p\\" not in repr(login) and "pw" not in repr(login)


def test_jaas_file_with_several_sections_and_comments() -> None:
    text = """// a Kafka broker's JAAS file
KafkaServer {
  org.apache.kafka.common.security.plain.PlainLoginModule required
  username="admin" password="a";
};
Client {
  org.apache.zookeeper.server.auth.DigestLoginModule required
  username="kafka" password="secret";
};
"""
    assert set(parse_jaas_sections(text)) == {"KafkaServer", "Client"}
    assert zk_login_from_jaas(text, "jaas.conf") == ZkLogin("kafka", "secret")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("KafkaServer { x required; };", "no Client section"),
        (
            "Client { org.apache.kafka.common.security.plain.PlainLoginModule required "
            'username="a" password="b"; };',
            "expected org.apache.zookeeper.server.auth.DigestLoginModule",
        ),
        (
            'Client { org.apache.zookeeper.server.auth.DigestLoginModule required username="a"; };',
            "no password",
        ),
        ("Client { oops", "invalid JAAS file"),
    ],
)
def test_bad_jaas_file_is_an_error_naming_the_file(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as raised:
        zk_login_from_jaas(text, "/etc/zk_jaas.conf")
    assert "/etc/zk_jaas.conf" in str(raised.value)


def test_broker_zookeeper_login_from_its_config(tmp_path: Path) -> None:
    base = {"broker.id": 1, "zookeeper.connect": "x:1"}
    assert zookeeper_login(BrokerConfig.from_dict(base)) is None
    with pytest.raises(ConfigError, match="zookeeper.set.acl=true needs a ZooKeeper login"):
        zookeeper_login(BrokerConfig.from_dict({**base, "zookeeper.set.acl": "true"}))
    missing = {**base, "epochlog.zookeeper.login.config": str(tmp_path / "none.conf")}
    with pytest.raises(ConfigError, match="cannot read"):
        zookeeper_login(BrokerConfig.from_dict(missing))
    jaas = tmp_path / "jaas.conf"
    jaas.write_text(zk_jaas_file(ZkLogin("broker", "pw")))
    config = {**base, "zookeeper.set.acl": "true", "epochlog.zookeeper.login.config": str(jaas)}
    assert zookeeper_login(BrokerConfig.from_dict(config)) == ZkLogin("broker", "pw")


# ----------------------------------------------------------------------------- secrets, settings


def test_secrets_are_private_and_load_back(tmp_path: Path) -> None:
    secure = SecureCluster.create(tmp_path)
    assert stat.S_IMODE(secure.secrets_dir.stat().st_mode) == 0o700
    files = list(secure.secrets_dir.iterdir())
    assert {"ca.pem", "broker.pem", "admin.password", "zookeeper_jaas.conf"} <= {
        f.name for f in files
    }
    assert all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in files)
    assert secure.admin_password != secure.broker_password and len(secure.admin_password) >= 24
    assert SecureCluster.load(tmp_path) == secure
    assert SecureCluster.load(tmp_path / "elsewhere") is None


def test_broker_settings_are_valid_and_lock_everything(tmp_path: Path) -> None:
    secure = SecureCluster.create(tmp_path)
    values = secure.broker_config()
    config = BrokerConfig.from_dict(
        {
            "broker.id": 1,
            "zookeeper.connect": "x:1",
            "listeners": "SASL_SSL://127.0.0.1:9093",
            **values,
        }
    )
    assert config.security_protocol("SASL_SSL") == "SASL_SSL"
    assert config["sasl.enabled.mechanisms"] == ["SCRAM-SHA-512"]
    assert config["super.users"] == "User:admin;User:broker"
    assert config["allow.everyone.if.no.acl.found"] is False
    assert config["zookeeper.set.acl"] is True
    assert zookeeper_login(config) == secure.zk_login
    assert secure.broker_password in values["listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config"]


def test_client_properties_are_kafkas_keys_our_client_takes(tmp_path: Path) -> None:
    secure = SecureCluster.create(tmp_path)
    path = secure.write_client_properties()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    text = path.read_text()
    assert "security.protocol=SASL_SSL\n" in text
    assert "ssl.truststore.type=PEM\n" in text
    assert (
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="admin" password="{secure.admin_password}";' in text
    )
    (tmp_path / STATE_FILE).write_text("{}")
    args = argparse.Namespace(command_config=None, bootstrap_server="127.0.0.1:9", dir=tmp_path)
    assert command_config_path(args) is None  # --bootstrap-server: not the local cluster
    args.bootstrap_server = None
    assert command_config_path(args) == str(tmp_path / CLIENT_PROPERTIES)
    args.command_config = "/other.properties"
    assert command_config_path(args) == "/other.properties"
    args.bootstrap_server = "127.0.0.1:9"
    args.command_config = str(path)
    config = load_config(Role.ADMIN, client_config(args, Role.ADMIN))
    assert config["security.protocol"].upper() == "SASL_SSL"
    assert config["ssl.truststore.location"] == str(secure.ca_file)


def test_local_cluster_main_listener_is_kept_in_config_and_state(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path, 1, listener="SASL_SSL", extra_listeners=("PLAINTEXT",))
    cluster.zk_connect = "127.0.0.1:1"
    broker = cluster._configure(1)
    cluster.brokers[1] = broker
    listeners = broker.config_path.read_text().split("listeners=", 1)[1].splitlines()[0]
    assert listeners.startswith(f"SASL_SSL://127.0.0.1:{broker.port},PLAINTEXT://")
    assert stat.S_IMODE(broker.config_path.stat().st_mode) == 0o600
    again = cluster._configure(1)  # a restart keeps every port
    assert (again.port, again.extra_ports) == (broker.port, broker.extra_ports)
    cluster._save()
    assert json.loads((tmp_path / STATE_FILE).read_text())["listener"] == "SASL_SSL"
    attached = LocalCluster.attach(tmp_path)
    assert attached.listener == "SASL_SSL"
    assert attached.bootstrap_servers == f"127.0.0.1:{broker.port}"
    assert attached.listener_bootstrap("PLAINTEXT") == (
        f"127.0.0.1:{broker.extra_ports['PLAINTEXT']}"
    )


def test_up_keeps_a_directory_to_its_kind_and_starts_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from epochlog.cli.main import main

    secure_dir, plain_dir = tmp_path / "secure", tmp_path / "plain"
    SecureCluster.create(secure_dir)
    assert main(["up", "--dir", str(secure_dir)]) == 2
    assert "holds a secure cluster" in " ".join(capsys.readouterr().err.split())  # rich wraps
    (plain_dir / "broker-1").mkdir(parents=True)
    (plain_dir / "broker-1" / "server.properties").write_text("listeners=PLAINTEXT://x:1\n")
    assert main(["up", "--secure", "--dir", str(plain_dir)]) == 2
    assert "holds a plaintext cluster" in " ".join(capsys.readouterr().err.split())
    assert not (secure_dir / STATE_FILE).exists() and not (plain_dir / "secrets").exists()
    assert main(["up", "--secure", "--brokers", "0", "--dir", str(tmp_path / "n")]) == 2
    assert "--brokers must be at least 1" in " ".join(capsys.readouterr().err.split())
