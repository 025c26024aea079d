"""The replica fetchers of a broker: `num.replica.fetchers` per source broker (Kafka's
ReplicaFetcherManager / AbstractFetcherManager).

A partition followed from leader L goes to fetcher (L, id), id = Kafka's getFetcherId:
Utils.abs(31 * topic.hashCode + partition) % num.replica.fetchers (`protocol.java_hash`).
The replica manager's hooks drive it. `add_partitions` (LeaderAndIsr made this broker a follower)
moves each partition to its fetcher, starting at its log end offset with its latest leader
epoch (a fresh fetch state, so answers to requests made for the old state are ignored),
creating and starting that fetcher when needed. `remove_partitions` (became leader, StopReplica)
takes partitions out. A fetcher left without partitions is stopped. `shutdown` stops them all.

`resize` (num.replica.fetchers changed at runtime, Kafka's resizeThreadPool) moves every
partition whose fetcher id changes to its new fetcher with its fetch state as it is (offset,
epochs, back-off), and stops the fetchers left empty.

A leader is reached at the endpoint the metadata cache lists for it on this broker's listener,
else at the one the last LeaderAndIsr named among its live leaders.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Iterable

from epochlog.broker.collaborators import BrokerEpochHolder
from epochlog.broker.metadata_cache import MetadataCache
from epochlog.broker.partition import Partition
from epochlog.broker.replica_fetcher import MAX_FETCH_VERSION, ReplicaFetcher
from epochlog.broker.replica_manager import ReplicaManager, TopicPartition
from epochlog.config.broker import BrokerConfig
from epochlog.faults import NO_FAULTS, FaultInjector
from epochlog.protocol.java_hash import fetcher_id

log = logging.getLogger(__name__)

FetcherKey = tuple[int, int]  # (source broker, fetcher id)


class ReplicaFetcherManager:
    def __init__(
        self,
        *,
        broker_id: int,
        replica_manager: ReplicaManager,
        metadata_cache: MetadataCache,
        config: BrokerConfig,
        epoch_holder: BrokerEpochHolder,
        faults: FaultInjector = NO_FAULTS,
        listener: str = "PLAINTEXT",
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.ssl_context = ssl_context  # the inter-broker listener is TLS
        self.rm = replica_manager
        self.metadata_cache = metadata_cache
        self.config = config
        self.epoch_holder = epoch_holder
        self.faults = faults
        self.listener = listener
        self.max_fetch_version = MAX_FETCH_VERSION  # tests lower it to exercise older leaders
        self.num_fetchers: int = config["num.replica.fetchers"]
        self.fetchers: dict[FetcherKey, ReplicaFetcher] = {}
        self._stopping: set[asyncio.Task[None]] = set()
        self._closed = False

    def endpoint(self, broker_id: int) -> tuple[str, int] | None:
        broker = self.metadata_cache.broker(broker_id)
        if broker is not None:
            endpoint = broker.endpoint_for(self.listener)
            if endpoint is not None:
                return endpoint.host, endpoint.port
        return self.rm.live_leaders.get(broker_id)

    def fetcher_of(self, key: TopicPartition) -> ReplicaFetcher | None:
        for fetcher in self.fetchers.values():
            if key in fetcher.partitions:
                return fetcher
        return None

    def fetcher_key(self, source_id: int, key: TopicPartition) -> FetcherKey:
        return source_id, fetcher_id(key[0], key[1], self.num_fetchers)

    def _fetcher(self, key: FetcherKey) -> ReplicaFetcher:
        fetcher = self.fetchers.get(key)
        if fetcher is None:
            source, index = key
            fetcher = self.fetchers[key] = ReplicaFetcher(
                source_id=source,
                broker_id=self.broker_id,
                fetcher_id=index,
                replica_manager=self.rm,
                config=self.config,
                epoch_holder=self.epoch_holder,
                resolve_endpoint=self.endpoint,
                faults=self.faults,
                max_fetch_version=self.max_fetch_version,
                ssl_context=self.ssl_context,
            )
            fetcher.start()
            log.info("replica fetcher %d from broker %d started", index, source)
        return fetcher

    def add_partitions(self, partitions: Iterable[Partition]) -> None:
        """Follow each partition from its current leader (hook: on_become_follower)."""
        for partition in partitions:
            self._remove(partition.key)
            leader = partition.leader_id
            if self._closed or leader < 0 or leader == self.broker_id:
                continue
            state = self._fetcher(self.fetcher_key(leader, partition.key)).add_partition(partition)
            log.info(
                "%s: fetching from broker %d at offset %d (last epoch %d, leader epoch %d)",
                partition.name,
                leader,
                state.fetch_offset,
                state.last_fetched_epoch,
                state.current_leader_epoch,
            )
        self._stop_idle()

    def resize(self, num_fetchers: int) -> int:
        """num.replica.fetchers is now `num_fetchers`: move the partitions whose fetcher id
        changes, keeping their fetch states. Returns the partitions moved."""
        if num_fetchers < 1:
            raise ValueError(f"num.replica.fetchers must be at least 1, not {num_fetchers}")
        if num_fetchers == self.num_fetchers or self._closed:
            self.num_fetchers = num_fetchers
            return 0
        old = self.num_fetchers
        self.num_fetchers = num_fetchers
        moves = []
        for (source, index), fetcher in list(self.fetchers.items()):
            for key, state in list(fetcher.partitions.items()):
                target = self.fetcher_key(source, key)
                if target != (source, index):
                    fetcher.remove_partition(key)
                    moves.append((target, state))
        for target, state in moves:
            self._fetcher(target).adopt_state(state)
        self._stop_idle()
        log.info(
            "num.replica.fetchers %d -> %d: %d partitions moved, %d fetchers now",
            old,
            num_fetchers,
            len(moves),
            len(self.fetchers),
        )
        return len(moves)

    def remove_partitions(self, keys: Iterable[TopicPartition]) -> None:
        """Stop fetching these partitions (hooks: on_become_leader, on_stop_replicas)."""
        for key in keys:
            self._remove(key)
        self._stop_idle()

    def _remove(self, key: TopicPartition) -> None:
        for fetcher in self.fetchers.values():
            fetcher.remove_partition(key)

    def _stop_idle(self) -> None:
        for key, fetcher in list(self.fetchers.items()):
            if not fetcher.partitions:
                del self.fetchers[key]
                log.info("replica fetcher %d from broker %d stopped (no partitions)", *key[::-1])
                task = asyncio.get_running_loop().create_task(fetcher.stop())
                self._stopping.add(task)
                task.add_done_callback(self._stopping.discard)

    async def shutdown(self) -> None:
        self._closed = True
        fetchers, self.fetchers = list(self.fetchers.values()), {}
        for fetcher in fetchers:
            await fetcher.stop()
        for task in list(self._stopping):
            with contextlib.suppress(asyncio.CancelledError):
                await task
