"""Cluster-wide znodes every broker touches, none of them fenced by the controller epoch.

At startup a broker makes sure Kafka's persistent top-level paths exist
(`ensure_top_level_paths`) and reads the cluster id, creating it when it is the first broker
(`get_or_create_cluster_id`: `/cluster/id` = {"version":"1","id":"<22-char uuid>"}; a broker that
loses the creation race reads the winner's).

Producer ids for idempotent producers come in blocks of 1000 from `/latest_producer_id_block`
(Kafka's ZkProducerIdManager): read the last block and its znode version, compute the next one
(pure: `znodes.next_producer_id_block`), and write it with a conditional set at that version. A
concurrent allocator makes the set fail with BADVERSION and we read again, so two brokers never
get overlapping blocks.
"""

from __future__ import annotations

import random
import time

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from epochlog.zk.znodes import (
    CLUSTER_ID_PATH,
    LATEST_PRODUCER_ID_BLOCK_PATH,
    PRODUCER_ID_BLOCK_SIZE,
    TOP_LEVEL_PATHS,
    ProducerIdBlock,
    decode_cluster_id,
    decode_producer_id_block,
    encode_cluster_id,
    encode_producer_id_block,
    kafka_uuid_text,
    new_kafka_uuid,
    next_producer_id_block,
)


def ensure_top_level_paths(client: KazooClient) -> None:
    """Create the persistent paths brokers and the controller list and watch."""
    for path in TOP_LEVEL_PATHS:
        client.ensure_path(path)


def read_cluster_id(client: KazooClient) -> str | None:
    try:
        data, _ = client.get(CLUSTER_ID_PATH)
    except NoNodeError:
        return None
    return decode_cluster_id(data)


def get_or_create_cluster_id(client: KazooClient, proposed: str | None = None) -> str:
    """The cluster id, created from `proposed` (or a fresh Kafka uuid) if there is none yet."""
    while True:
        existing = read_cluster_id(client)
        if existing is not None:
            return existing
        cluster_id = proposed or kafka_uuid_text(new_kafka_uuid())
        try:
            client.create(CLUSTER_ID_PATH, encode_cluster_id(cluster_id), makepath=True)
        except NodeExistsError:
            continue
        return cluster_id


def allocate_producer_id_block(
    client: KazooClient,
    broker_id: int,
    *,
    block_size: int = PRODUCER_ID_BLOCK_SIZE,
    max_attempts: int = 1000,
) -> ProducerIdBlock:
    """Claim the next block of producer ids for `broker_id` (retrying on concurrent claims)."""
    for _ in range(max_attempts):
        try:
            data, stat = client.get(LATEST_PRODUCER_ID_BLOCK_PATH)
        except NoNodeError:
            block = next_producer_id_block(None, broker_id, block_size)
            try:
                client.create(
                    LATEST_PRODUCER_ID_BLOCK_PATH, encode_producer_id_block(block), makepath=True
                )
            except NodeExistsError:
                continue
            return block
        block = next_producer_id_block(decode_producer_id_block(data), broker_id, block_size)
        try:
            client.set(LATEST_PRODUCER_ID_BLOCK_PATH, encode_producer_id_block(block), stat.version)
        except BadVersionError:
            time.sleep(random.uniform(0, 0.01))  # another broker won this round
            continue
        return block
    raise RuntimeError(f"could not allocate a producer id block in {max_attempts} attempts")
