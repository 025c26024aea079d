"""Blocking facades over the asyncio clients: `Producer`, `Consumer`, `Admin`.

Each facade owns one background thread running an asyncio event loop, on which its asyncio
client lives; every method hands its work to that loop (`asyncio.run_coroutine_threadsafe`) and
waits for the result, so the asyncio client is only ever touched from its own loop and needs no
locks. `Producer.send` does not wait: it normalizes and size-checks the record in the caller's
thread (so a record over max.request.size raises at once), hands it to the loop and returns a
`concurrent.futures.Future` (a `DeliveryFuture`); delivery callbacks run on the loop thread, as
Kafka's Java producer runs them on its I/O thread, so they must be quick. When `buffer.memory`
is full, or 4096 records handed over are not yet taken by the loop, `send` blocks for up to
`max.block.ms`, as in Kafka.

The hand-over is a deque the caller extends and the loop empties, with one loop wakeup per
burst of sends (`call_soon_threadsafe` once, not per record) and no lock: the GIL makes each
extend atomic and orders the flag that says a wakeup is pending.

`Consumer`'s rebalance callbacks run in the application's thread, inside `poll()`, `close()`
or `unsubscribe()` (as confluent-kafka serves them from poll), not on the loop thread: a
callback may then call the consumer (`commit()` in `on_revoke` is the classic) without
deadlocking the loop it would wait on. The loop hands each callback over through a queue and
waits; the thread blocked in `poll()` runs it and hands back the result.

`Producer` is defined in `sync_producer` and importable from here as before.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import queue
import threading
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from epochlog.client.admin import AsyncAdmin, ClusterDescription, NewTopic, TopicDescription
from epochlog.client.admin_log_dirs import (
    LogDirDescription,
    ProducerState,
    TopicPartitionReplica,
    TopicPartitionsDescription,
)
from epochlog.client.admin_partitions import DeletedRecords, ElectionType, NewPartitions
from epochlog.client.admin_reassign import PartitionReassignment
from epochlog.client.admin_transactions import TransactionDescription, TransactionListing
from epochlog.client.consumer import AsyncConsumer, OffsetAndTimestamp, RebalanceCallback
from epochlog.client.errors import KafkaError
from epochlog.client.fetch_decoder import ConsumerRecord
from epochlog.client.group_admin_protocol import GroupDescription, GroupListing
from epochlog.client.group_offsets import ConsumerGroupMetadata, OffsetAndMetadata
from epochlog.client.loop_thread import as_coroutine, start_on_loop_thread
from epochlog.client.metadata import TopicPartition
from epochlog.protocol.messages.pin_controller import PinStatus

if TYPE_CHECKING:
    from epochlog.client.sync_producer import Producer

__all__ = ["Admin", "Consumer", "Producer"]

T = TypeVar("T")


def __getattr__(name: str) -> Any:
    # `Producer` lives in `sync_producer`, imported on first use (PEP 562): a process that only
    # consumes (the Spark source's driver side, one process per streaming query) skips the
    # producer's modules, about 40 ms of import.
    if name == "Producer":
        from epochlog.client.sync_producer import Producer

        return Producer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class Consumer:
    """A blocking consumer; see `AsyncConsumer`. Rebalance callbacks get this object and run in
    the thread that calls `poll()` (see the module docstring)."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self._thread, self._consumer = start_on_loop_thread(
            "epochlog-consumer", lambda: AsyncConsumer(config)
        )
        self.config = self._consumer.config
        # callbacks handed over by the loop: (callback, partitions, future) or a wake-up token
        self._handoff: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._consumer.run_callback = self._callback_in_caller
        try:
            self._thread.run(self._consumer.start())
        except BaseException:
            self._thread.stop()
            raise

    @property
    def cluster_id(self) -> str | None:
        """The id of the cluster this client's metadata comes from (None before any)."""
        return self._consumer.cluster_id

    @property
    def rebootstraps(self) -> int:
        """How many times this client went back to bootstrap.servers (KIP-899 / KIP-1102)."""
        return self._consumer.rebootstraps

    @property
    def member_id(self) -> str:
        return self._consumer.member_id

    @property
    def generation_id(self) -> int:
        return self._consumer.generation_id

    def group_metadata(self) -> ConsumerGroupMetadata:
        return self._thread.call(self._consumer.group_metadata)

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def _callback_in_caller(
        self, callback: RebalanceCallback, partitions: list[TopicPartition]
    ) -> None:
        done: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._handoff.put((callback, partitions, done))
        await asyncio.wrap_future(done)

    def _run_serving(self, coro: Awaitable[T]) -> T:
        """Run `coro` on the loop, running rebalance callbacks here meanwhile."""
        if threading.get_ident() == self._thread.ident:
            raise RuntimeError("a blocking Consumer method was called on its own loop thread")
        result = asyncio.run_coroutine_threadsafe(as_coroutine(coro), self._thread.loop)
        token = object()
        result.add_done_callback(lambda _: self._handoff.put(token))
        while True:
            item = self._handoff.get()
            if item is token:
                return result.result()
            if isinstance(item, tuple):
                callback, partitions, done = item
                try:
                    callback(self, partitions)
                except BaseException as exc:
                    done.set_exception(exc)
                else:
                    done.set_result(None)
            # else: the token of an earlier call that returned without it; ignore

    def assign(self, partitions: Iterable[tuple[str, int]]) -> None:
        self._thread.call(self._consumer.assign, list(partitions))

    def assignment(self) -> set[TopicPartition]:
        return self._thread.call(self._consumer.assignment)

    def subscribe(
        self,
        topics: Iterable[str] | None = None,
        *,
        pattern: str | None = None,
        on_assign: RebalanceCallback | None = None,
        on_revoke: RebalanceCallback | None = None,
        on_lost: RebalanceCallback | None = None,
    ) -> None:
        topic_list = (
            None if topics is None else [topics] if isinstance(topics, str) else list(topics)
        )

        def subscribe() -> None:
            self._consumer.subscribe(
                topic_list,
                pattern=pattern,
                on_assign=on_assign,
                on_revoke=on_revoke,
                on_lost=on_lost,
            )

        self._thread.call(subscribe)

    def unsubscribe(self) -> None:
        self._run_serving(self._consumer.unsubscribe())

    def subscription(self) -> set[str]:
        return self._thread.call(self._consumer.subscription)

    def commit(
        self,
        offsets: Mapping[tuple[str, int], int | OffsetAndMetadata] | None = None,
        timeout: float | None = None,
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        return self._thread.run(self._consumer.commit(offsets, timeout))

    def commit_async(
        self, offsets: Mapping[tuple[str, int], int | OffsetAndMetadata] | None = None
    ) -> concurrent.futures.Future[None]:
        """Commit in the background; the future holds the outcome (resolved on the loop)."""
        result: concurrent.futures.Future[None] = concurrent.futures.Future()

        def copy(task: asyncio.Task[None]) -> None:
            if task.cancelled():
                result.cancel()
            elif task.exception() is not None:
                result.set_exception(task.exception())  # type: ignore[arg-type]
            else:
                result.set_result(None)

        def start() -> None:
            self._consumer.commit_async(offsets).add_done_callback(copy)

        self._thread.call(start)
        return result

    def committed(
        self, partitions: Iterable[tuple[str, int]], timeout: float | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        return self._thread.run(self._consumer.committed(list(partitions), timeout))

    def seek(self, tp: tuple[str, int], offset: int) -> None:
        self._thread.call(self._consumer.seek, tp, offset)

    def seek_to_beginning(self, partitions: Iterable[tuple[str, int]] | None = None) -> None:
        parts = None if partitions is None else list(partitions)
        self._thread.call(self._consumer.seek_to_beginning, parts)

    def seek_to_end(self, partitions: Iterable[tuple[str, int]] | None = None) -> None:
        parts = None if partitions is None else list(partitions)
        self._thread.call(self._consumer.seek_to_end, parts)

    def position(self, tp: tuple[str, int], timeout: float | None = None) -> int:
        return self._thread.run(self._consumer.position(tp, timeout))

    def offsets_for_times(
        self, timestamps: Mapping[tuple[str, int], int], timeout: float | None = None
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        return self._thread.run(self._consumer.offsets_for_times(dict(timestamps), timeout))

    def beginning_offsets(
        self, partitions: Iterable[tuple[str, int]], timeout: float | None = None
    ) -> dict[TopicPartition, int]:
        return self._thread.run(self._consumer.beginning_offsets(list(partitions), timeout))

    def end_offsets(
        self, partitions: Iterable[tuple[str, int]], timeout: float | None = None
    ) -> dict[TopicPartition, int]:
        return self._thread.run(self._consumer.end_offsets(list(partitions), timeout))

    def poll(self, timeout: float = 0.0) -> list[ConsumerRecord]:
        """Records, waiting up to `timeout` seconds; rebalance callbacks run here."""
        return self._run_serving(self._consumer.poll(timeout))

    def close(self) -> None:
        if self._thread.loop.is_closed():
            return
        try:
            self._run_serving(self._consumer.close())
        finally:
            self._thread.stop()


class Admin:
    """A blocking admin client; see `AsyncAdmin`."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self._thread, self._admin = start_on_loop_thread(
            "epochlog-admin", lambda: AsyncAdmin(config)
        )
        self.config = self._admin.config

    @property
    def cluster_id(self) -> str | None:
        """The id of the cluster this client's metadata comes from (None before any)."""
        return self._admin.cluster_id

    @property
    def rebootstraps(self) -> int:
        """How many times this client went back to bootstrap.servers (KIP-899 / KIP-1102)."""
        return self._admin.rebootstraps

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def describe_configs(self, resources: Any, **options: Any) -> Any:
        return self._thread.run(self._admin.describe_configs(resources, **options))

    def alter_configs(self, configs: Any, **options: Any) -> None:
        self._thread.run(self._admin.alter_configs(configs, **options))

    def incremental_alter_configs(self, ops: Any, **options: Any) -> None:
        self._thread.run(self._admin.incremental_alter_configs(ops, **options))

    def describe_client_quotas(self, components: Any = (), **options: Any) -> Any:
        return self._thread.run(self._admin.describe_client_quotas(components, **options))

    def alter_client_quotas(self, alterations: Any, **options: Any) -> None:
        self._thread.run(self._admin.alter_client_quotas(alterations, **options))

    def describe_user_scram_credentials(self, users: Any = None) -> Any:
        return self._thread.run(self._admin.describe_user_scram_credentials(users))

    def upsert_scram_credential(
        self, user: str, mechanism: str, password: str, iterations: int = 4096
    ) -> None:
        self._thread.run(self._admin.upsert_scram_credential(user, mechanism, password, iterations))

    def delete_scram_credential(self, user: str, mechanism: str) -> None:
        self._thread.run(self._admin.delete_scram_credential(user, mechanism))

    def create_topic(
        self,
        name: str,
        partitions: int = -1,
        replication_factor: int = -1,
        configs: Mapping[str, str] | None = None,
        *,
        timeout: float | None = None,
    ) -> None:
        self._thread.run(
            self._admin.create_topic(name, partitions, replication_factor, configs, timeout=timeout)
        )

    def create_topics(
        self,
        topics: Iterable[NewTopic],
        *,
        validate_only: bool = False,
        timeout: float | None = None,
    ) -> dict[str, KafkaError | None]:
        return self._thread.run(
            self._admin.create_topics(list(topics), validate_only=validate_only, timeout=timeout)
        )

    def delete_topic(self, name: str, *, timeout: float | None = None) -> None:
        self._thread.run(self._admin.delete_topic(name, timeout=timeout))

    def delete_topics(
        self, names: Iterable[str], *, timeout: float | None = None
    ) -> dict[str, KafkaError | None]:
        return self._thread.run(self._admin.delete_topics(list(names), timeout=timeout))

    def list_topics(
        self, *, include_internal: bool = False, timeout: float | None = None
    ) -> list[str]:
        return self._thread.run(
            self._admin.list_topics(include_internal=include_internal, timeout=timeout)
        )

    def describe_topics(
        self, names: Iterable[str], *, timeout: float | None = None
    ) -> dict[str, TopicDescription]:
        return self._thread.run(self._admin.describe_topics(list(names), timeout=timeout))

    def describe_cluster(self, *, timeout: float | None = None) -> ClusterDescription:
        return self._thread.run(self._admin.describe_cluster(timeout=timeout))

    def pin_controller(
        self,
        broker_id: int | None = None,
        *,
        auto: bool = False,
        allow_absent: bool = False,
        timeout: float | None = None,
    ) -> PinStatus:
        return self._thread.run(
            self._admin.pin_controller(
                broker_id, auto=auto, allow_absent=allow_absent, timeout=timeout
            )
        )

    def unpin_controller(self, *, timeout: float | None = None) -> PinStatus:
        return self._thread.run(self._admin.unpin_controller(timeout=timeout))

    def describe_controller_pin(self, *, timeout: float | None = None) -> PinStatus:
        return self._thread.run(self._admin.describe_controller_pin(timeout=timeout))

    # ---------------------------------------------------------------- reassignments (KIP-455)

    def alter_partition_reassignments(
        self,
        reassignments: Mapping[tuple[str, int], Sequence[int] | None],
        *,
        timeout: float | None = None,
    ) -> dict[TopicPartition, KafkaError | None]:
        return self._thread.run(
            self._admin.alter_partition_reassignments(dict(reassignments), timeout=timeout)
        )

    def list_partition_reassignments(
        self, partitions: Iterable[tuple[str, int]] | None = None, *, timeout: float | None = None
    ) -> dict[TopicPartition, PartitionReassignment]:
        parts = None if partitions is None else list(partitions)
        return self._thread.run(self._admin.list_partition_reassignments(parts, timeout=timeout))

    # ---------------------------------------------------------------- consumer groups

    def list_groups(
        self, states: Iterable[str] | None = None, *, timeout: float | None = None
    ) -> list[GroupListing]:
        parts = None if states is None else list(states)
        return self._thread.run(self._admin.list_groups(parts, timeout=timeout))

    def describe_groups(
        self, group_ids: Iterable[str], *, timeout: float | None = None
    ) -> dict[str, GroupDescription]:
        return self._thread.run(self._admin.describe_groups(list(group_ids), timeout=timeout))

    def delete_groups(
        self, group_ids: Iterable[str], *, timeout: float | None = None
    ) -> dict[str, KafkaError | None]:
        return self._thread.run(self._admin.delete_groups(list(group_ids), timeout=timeout))

    def delete_group(self, group_id: str, *, timeout: float | None = None) -> None:
        self._thread.run(self._admin.delete_group(group_id, timeout=timeout))

    def list_group_offsets(
        self,
        group_id: str,
        partitions: Iterable[tuple[str, int]] | None = None,
        *,
        timeout: float | None = None,
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        parts = None if partitions is None else list(partitions)
        return self._thread.run(self._admin.list_group_offsets(group_id, parts, timeout=timeout))

    def alter_group_offsets(
        self,
        group_id: str,
        offsets: Mapping[tuple[str, int], int | OffsetAndMetadata],
        *,
        timeout: float | None = None,
    ) -> None:
        self._thread.run(self._admin.alter_group_offsets(group_id, dict(offsets), timeout=timeout))

    def delete_group_offsets(
        self,
        group_id: str,
        partitions: Iterable[tuple[str, int]],
        *,
        timeout: float | None = None,
    ) -> None:
        self._thread.run(
            self._admin.delete_group_offsets(group_id, list(partitions), timeout=timeout)
        )

    def list_offsets(
        self, query: Mapping[tuple[str, int], int], *, timeout: float | None = None
    ) -> dict[TopicPartition, OffsetAndTimestamp]:
        return self._thread.run(self._admin.list_offsets(dict(query), timeout=timeout))

    def log_end_offsets(
        self, partitions: Iterable[tuple[str, int]], *, timeout: float | None = None
    ) -> dict[TopicPartition, int]:
        return self._thread.run(self._admin.log_end_offsets(list(partitions), timeout=timeout))

    def log_start_offsets(
        self, partitions: Iterable[tuple[str, int]], *, timeout: float | None = None
    ) -> dict[TopicPartition, int]:
        return self._thread.run(self._admin.log_start_offsets(list(partitions), timeout=timeout))

    # ---------------------------------------------------------------- partitions

    def create_partitions(
        self,
        topics: Mapping[str, int | NewPartitions],
        *,
        validate_only: bool = False,
        timeout: float | None = None,
    ) -> dict[str, KafkaError | None]:
        return self._thread.run(
            self._admin.create_partitions(
                dict(topics), validate_only=validate_only, timeout=timeout
            )
        )

    def delete_records(
        self, offsets: Mapping[tuple[str, int], int], *, timeout: float | None = None
    ) -> dict[TopicPartition, DeletedRecords]:
        return self._thread.run(self._admin.delete_records(dict(offsets), timeout=timeout))

    def elect_leaders(
        self,
        election_type: ElectionType | int,
        partitions: Iterable[tuple[str, int]] | None = None,
        *,
        timeout: float | None = None,
    ) -> dict[TopicPartition, KafkaError | None]:
        parts = None if partitions is None else list(partitions)
        return self._thread.run(self._admin.elect_leaders(election_type, parts, timeout=timeout))

    # Log dirs, producers and paginated topic descriptions (see `admin_log_dirs`).

    def describe_log_dirs(
        self, brokers: Iterable[int] | None = None, *, timeout: float | None = None
    ) -> dict[int, dict[str, LogDirDescription]]:
        return self._thread.run(
            self._admin.describe_log_dirs(
                None if brokers is None else list(brokers), timeout=timeout
            )
        )

    def alter_replica_log_dirs(
        self, assignments: Mapping[TopicPartitionReplica, str], *, timeout: float | None = None
    ) -> dict[TopicPartitionReplica, KafkaError | None]:
        return self._thread.run(
            self._admin.alter_replica_log_dirs(dict(assignments), timeout=timeout)
        )

    def describe_producers(
        self,
        partitions: Iterable[tuple[str, int]],
        *,
        broker_id: int | None = None,
        timeout: float | None = None,
    ) -> dict[TopicPartition, list[ProducerState]]:
        return self._thread.run(
            self._admin.describe_producers(
                [TopicPartition(*tp) for tp in partitions], broker_id=broker_id, timeout=timeout
            )
        )

    # Transactions (KIP-664, see `admin_transactions`).

    def describe_transactions(
        self, transactional_ids: Iterable[str], *, timeout: float | None = None
    ) -> dict[str, TransactionDescription]:
        return self._thread.run(
            self._admin.describe_transactions(list(transactional_ids), timeout=timeout)
        )

    def list_transactions(
        self,
        *,
        states: Iterable[str] = (),
        producer_ids: Iterable[int] = (),
        duration_ms: int = -1,
        timeout: float | None = None,
    ) -> list[TransactionListing]:
        return self._thread.run(
            self._admin.list_transactions(
                states=list(states),
                producer_ids=list(producer_ids),
                duration_ms=duration_ms,
                timeout=timeout,
            )
        )

    def abort_transaction(
        self,
        topic: str,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        *,
        timeout: float | None = None,
    ) -> None:
        self._thread.run(
            self._admin.abort_transaction(
                topic, partition, producer_id, producer_epoch, coordinator_epoch, timeout=timeout
            )
        )

    def describe_topic_partitions(
        self,
        topics: Iterable[str] | None = None,
        *,
        page_size: int = 2000,
        timeout: float | None = None,
    ) -> dict[str, TopicPartitionsDescription]:
        return self._thread.run(
            self._admin.describe_topic_partitions(
                None if topics is None else list(topics), page_size=page_size, timeout=timeout
            )
        )

    def close(self) -> None:
        if self._thread.loop.is_closed():
            return
        try:
            self._thread.run(self._admin.close())
        finally:
            self._thread.stop()
