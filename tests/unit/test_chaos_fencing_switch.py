"""The test-only switch the chaos harness's zombie schedule turns off
(`epochlog.test.txn.fencing.enabled`): with it off the coordinator accepts an older producer
epoch, which is the damage the harness must be able to see."""

from __future__ import annotations

from epochlog.config.broker import BrokerConfig
from epochlog.coordinator.transaction.operations import ErrorReply, TxnConfig
from epochlog.node.transactions import txn_config_from
from epochlog.protocol.errors import ErrorCode as E
from tests.unit.test_txn_coordinator_shard import Coordinator


def test_with_fencing_off_a_zombie_epoch_adds_partitions_and_commits() -> None:
    c = Coordinator()
    c.shard.config = TxnConfig(fence_producer_epochs=False)
    c.init("tx")
    c.init("tx")  # epoch 1: the producer at epoch 0 is a zombie
    assert c.add("tx", 1000, 0, ("t", 0)).errors == {("t", 0): E.NONE}
    assert c.reply(c.end("tx", 1000, 0, True)) == ErrorReply(E.NONE)


def test_the_switch_is_on_unless_a_test_turns_it_off() -> None:
    base = {"broker.id": 1, "zookeeper.connect": "127.0.0.1:2181"}
    assert txn_config_from(BrokerConfig.from_dict(base)).fence_producer_epochs
    off = {**base, "epochlog.test.txn.fencing.enabled": "false"}
    assert not txn_config_from(BrokerConfig.from_dict(off)).fence_producer_epochs
