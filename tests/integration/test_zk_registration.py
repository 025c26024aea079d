"""KIP-380 registration against a real ZooKeeper: the czxid epoch, re-registration after a
session expiry, stale and foreign nodes."""

from __future__ import annotations

import threading

import pytest

from epochlog.zk import znodes
from epochlog.zk.registration import BrokerIdInUseError, BrokerRegistrar, register_broker
from epochlog.zk.session import force_session_expiry, session_id
from epochlog.zk.znodes import BrokerRegistration, Endpoint


def _registration(broker_id: int = 1, port: int = 9092) -> BrokerRegistration:
    return BrokerRegistration(broker_id, (Endpoint("PLAINTEXT", "127.0.0.1", port),))


def _node(client, broker_id: int = 1):
    data, stat = client.get(znodes.broker_path(broker_id))
    return znodes.decode_broker_registration(broker_id, data, "x"), stat


def test_registration_returns_the_czxid_and_writes_kafkas_json(zk_client):
    zk_client.ensure_path(znodes.BROKER_IDS_PATH)
    epoch = register_broker(zk_client, _registration(1))
    registration, stat = _node(zk_client)
    assert epoch == stat.czxid
    assert stat.ephemeralOwner == session_id(zk_client)
    assert stat.version == 1  # created empty, then set at version 0 in the same multi
    assert registration.endpoints == (Endpoint("PLAINTEXT", "127.0.0.1", 9092),)
    # Registering again in the same session reuses the node and its epoch.
    assert register_broker(zk_client, _registration(1)) == epoch


def test_epoch_increases_across_re_registration(zk_client_factory):
    first = zk_client_factory()
    first.ensure_path(znodes.BROKER_IDS_PATH)
    epoch1 = register_broker(first, _registration(1))
    first.stop()  # a clean close removes the ephemeral at once
    second = zk_client_factory()
    epoch2 = register_broker(second, _registration(1))
    assert epoch2 > epoch1


def test_registrar_re_registers_with_a_larger_epoch_after_session_expiry(zk_client):
    zk_client.ensure_path(znodes.BROKER_IDS_PATH)
    seen: list[int] = []
    registrar = BrokerRegistrar(zk_client, _registration(7), on_new_epoch=seen.append)
    try:
        epoch1 = registrar.register()
        old_session = session_id(zk_client)
        assert registrar.session_id == old_session
        force_session_expiry(zk_client)
        epoch2 = registrar.wait_for_epoch_above(epoch1, timeout_s=10)
        assert epoch2 > epoch1
        assert registrar.previous_session_id == old_session
        assert registrar.session_id == session_id(zk_client) != old_session
        _, stat = _node(zk_client, 7)
        assert stat.czxid == epoch2 and stat.ephemeralOwner == registrar.session_id
        assert seen == [epoch2]
    finally:
        registrar.close()


def test_stale_node_of_our_previous_session_is_replaced(zk_client_factory):
    old = zk_client_factory()
    old.ensure_path(znodes.BROKER_IDS_PATH)
    stale_epoch = register_broker(old, _registration(2))
    stale_session = session_id(old)
    # A new session of the same broker finds the node still there (ZOOKEEPER-2985).
    new = zk_client_factory()
    epoch = register_broker(new, _registration(2, port=9999), previous_session_id=stale_session)
    registration, stat = _node(new, 2)
    assert epoch == stat.czxid > stale_epoch
    assert stat.ephemeralOwner == session_id(new)
    assert registration.port == 9999


def test_another_live_sessions_node_is_refused_and_left_alone(zk_client_factory):
    owner = zk_client_factory()
    owner.ensure_path(znodes.BROKER_IDS_PATH)
    epoch = register_broker(owner, _registration(3))
    intruder = zk_client_factory()
    with pytest.raises(BrokerIdInUseError, match="broker id 3 is already registered by another"):
        register_broker(intruder, _registration(3, port=1), previous_session_id=12345)
    registrar = BrokerRegistrar(intruder, _registration(3), wait_for_foreign_s=0)
    with pytest.raises(BrokerIdInUseError):
        registrar.register()
    registrar.close()
    registration, stat = _node(owner, 3)
    assert stat.czxid == epoch and stat.ephemeralOwner == session_id(owner)
    assert registration.port == 9092


def test_registrar_waits_for_a_previous_process_node_to_go(zk_client_factory):
    previous_process = zk_client_factory()
    previous_process.ensure_path(znodes.BROKER_IDS_PATH)
    old_epoch = register_broker(previous_process, _registration(4))
    restarted = zk_client_factory()
    registrar = BrokerRegistrar(restarted, _registration(4), wait_for_foreign_s=5)
    timer = threading.Timer(0.5, previous_process.stop)
    timer.start()
    try:
        epoch = registrar.register()
    finally:
        timer.join()
        registrar.close(deregister=True)
    assert epoch > old_epoch
    assert restarted.exists(znodes.broker_path(4)) is None  # deregistered on close
