"""What both coordinators do alike with their internal topic (`__consumer_offsets`,
`__transaction_state`), outside the partition layer:

- `create_internal_topic` writes the topic into ZooKeeper on first need, as Kafka's brokers do
  (the config before the assignment: the controller reads both), with fewer replicas than
  wanted when fewer brokers are registered, said in the log. Called from a thread.
- `follow_leadership` chains onto the replica manager's leadership hooks, so that a coordinator
  loads a partition's shard when this broker becomes its leader and unloads it when it stops
  leading it.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError

from epochlog.broker.replica_manager import ReplicaManager
from epochlog.controller.assignment import assign_replicas
from epochlog.zk import controller_zk as zkc
from epochlog.zk.znodes import (
    TopicAssignment,
    encode_topic_assignment,
    encode_topic_config,
    topic_config_path,
    topic_path,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class InternalTopic:
    name: str
    partitions: int
    replication_factor: int  # wanted; fewer when fewer brokers are registered
    replication_factor_key: str  # the broker config that asked for it, named in the warning
    # the topic's configs, given the replication factor it gets
    configs: Callable[[int], Mapping[str, str]]


def create_internal_topic(zk: KazooClient, topic: InternalTopic) -> None:
    if zk.exists(topic_path(topic.name)) is not None:
        return
    brokers = sorted(zkc.read_brokers(zk))
    factor = max(min(topic.replication_factor, len(brokers)), 1)
    if factor < topic.replication_factor:
        log.warning(
            "creating %s with replication factor %d: only %d brokers are registered (%s is %d)",
            topic.name,
            factor,
            len(brokers),
            topic.replication_factor_key,
            topic.replication_factor,
        )
    assignment = assign_replicas(brokers, topic.partitions, factor)
    configs = dict(topic.configs(factor))
    with contextlib.suppress(NodeExistsError):
        zk.create(topic_config_path(topic.name), encode_topic_config(configs), makepath=True)
    with contextlib.suppress(NodeExistsError):
        zk.create(
            topic_path(topic.name),
            encode_topic_assignment(TopicAssignment(assignment, uuid.uuid4())),
            makepath=True,
        )
        log.info(
            "created %s: %d partitions, replication factor %d, configs %s",
            topic.name,
            len(assignment),
            factor,
            configs,
        )


def follow_leadership(
    rm: ReplicaManager,
    topic: str,
    elected: Callable[[int, int], None],
    resigned: Callable[[int], None],
) -> None:
    """Call `elected(partition, leader_epoch)` / `resigned(partition)` for `topic`'s partitions,
    after whatever the replica manager's hooks already did."""
    on_leader, on_follower, on_stop = (
        rm.on_become_leader,
        rm.on_become_follower,
        rm.on_stop_replicas,
    )

    def became_leader(partitions: list[Any]) -> None:
        if on_leader is not None:
            on_leader(partitions)
        for p in partitions:
            if p.key[0] == topic:
                elected(p.key[1], p.leader_epoch)

    def became_follower(partitions: list[Any]) -> None:
        if on_follower is not None:
            on_follower(partitions)
        for p in partitions:
            if p.key[0] == topic:
                resigned(p.key[1])

    def stopped(keys: list[tuple[str, int]]) -> None:
        if on_stop is not None:
            on_stop(keys)
        for name, partition in keys:
            if name == topic:
                resigned(partition)

    rm.on_become_leader = became_leader
    rm.on_become_follower = became_follower
    rm.on_stop_replicas = stopped
