"""The active controller: one event queue, ZooKeeper writes, control requests.

How it works. A broker that wins the election builds a `Controller`. `start()` loads the whole
context from ZooKeeper, installs the watches, and runs the failover plan (every live broker gets
full metadata and its partitions' states; offline partitions are elected). From then on every
input — a watch firing, a CreateTopics/DeleteTopics/ControlledShutdown request, a timer — is an
event: a typed value from `events` put on one queue and handled to completion before the next by
the one handler its type maps to (`_handlers`), so the context has a single mutator and no locks
(Kafka's ControllerEventManager).

Each event asks a function of `decisions` for a Plan, writes the plan's partition states with
the `FencedWriter` (each multi checks the `/controller_epoch` version, so a deposed controller
changes nothing and learns it is deposed from the failed check), commits the new states to the
context, and sends the plan's requests, built per broker with each destination's broker epoch.
ZooKeeper calls are blocking (kazoo) and run in a worker thread; the event loop keeps serving.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import replace
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from epochlog.aio import wait_for
from epochlog.client.sasl import login_of
from epochlog.config.broker import SECURITY_PROTOCOLS, BrokerConfig
from epochlog.config.sasl import inter_broker_login
from epochlog.controller import events as ev
from epochlog.controller.broker_change import classify_brokers
from epochlog.controller.channel import ControllerChannel
from epochlog.controller.context import (
    BrokerInfo,
    ControllerContext,
    LeaderIsr,
    TopicPartition,
    shared,
)
from epochlog.controller.decisions import (
    Plan,
    bounced_isr_members,
    imbalanced_partitions,
    on_broker_failure,
    on_broker_startup,
    on_controller_failover,
    on_new_partitions,
    on_preferred_election,
    on_topic_deletion,
    on_unclean_election_enabled,
)
from epochlog.controller.event_metrics import STATE_METRICS
from epochlog.controller.partition_requests import PartitionRequests
from epochlog.controller.reassignment_events import ReassignmentEvents
from epochlog.controller.recent_events import RecentEvents
from epochlog.controller.requests import ControllerRequests
from epochlog.controller.storage_events import StorageEvents
from epochlog.faults import FaultInjector
from epochlog.metrics.process_stats import STATS
from epochlog.security.tls import inter_broker_client_context
from epochlog.zk import controller_zk as zkc
from epochlog.zk.session import WatchHandle, watch_data
from epochlog.zk.watches import watch_broker_ids, watch_topic_deletions, watch_topics
from epochlog.zk.znodes import (
    PREFERRED_REPLICA_ELECTION_PATH,
    PartitionState,
    RegisteredBroker,
    TopicAssignment,
    decode_preferred_replica_election,
)

log = logging.getLogger(__name__)

Handler = Callable[[Any], Awaitable[Any]]


class ControllerMovedError(Exception):
    """This broker is no longer the controller (its fenced write failed)."""


def _broker_info(registered: RegisteredBroker, inter_broker_listener: str) -> BrokerInfo:
    """The controller's view of a registered broker: it connects to the inter-broker listener
    (the first one if the broker registered none by that name), and tells clients of all."""
    registration = registered.registration
    endpoint = next(
        (e for e in registration.endpoints if e.listener == inter_broker_listener),
        registration.endpoints[0],
    )
    return BrokerInfo(
        id=registration.broker_id,
        host=endpoint.host,
        port=endpoint.port,
        epoch=registered.epoch,
        rack=registration.rack,
        listener=endpoint.listener,
        endpoints=tuple(
            (e.listener, e.host, e.port, SECURITY_PROTOCOLS.get(e.security_protocol, 0))
            for e in registration.endpoints
        ),
    )


class Controller(ControllerRequests, StorageEvents, PartitionRequests, ReassignmentEvents):
    def __init__(
        self,
        broker_id: int,
        zk: KazooClient,
        election: zkc.ElectionResult,
        config: BrokerConfig,
        on_resign: Callable[[], None] | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.zk = zk
        self.election = election
        self.config = config
        self.on_resign = on_resign
        self.ctx = ControllerContext(controller_id=broker_id, epoch=election.controller_epoch)
        self.topic_configs: dict[str, dict[str, str]] = {}
        self.writer = zkc.FencedWriter.for_election(zk, election)
        self.faults = FaultInjector.from_config(config)
        self.channel = ControllerChannel(
            broker_id,
            config["request.timeout.ms"],
            self.faults,
            sasl=login_of(inter_broker_login(config)),
            ssl_context=inter_broker_client_context(config),
        )
        # (event, its waiter, when it was queued: for EventQueueTimeMs)
        self._events: asyncio.Queue[
            tuple[ev.ControllerEvent, asyncio.Future[Any] | None, float]
        ] = asyncio.Queue()
        self._handlers = self._handler_table()
        self.recent_events = RecentEvents()  # served to operators (PinController DESCRIBE)
        self._watches: list[WatchHandle] = []
        self._timers: list[asyncio.Task[None]] = []
        self._task: asyncio.Task[None] | None = None
        self._active = False
        # Requests waiting on an event (AlterPartition, CreateTopics, ...): a controller that
        # stops answers them ControllerMovedError at once, so no caller waits out its timeout.
        self._waiting: set[asyncio.Future[Any]] = set()
        self._resends: dict[int, int] = {}
        self._zk_reassignments: dict[TopicPartition, tuple[int, ...]] = {}
        self._zk_reassignments_czxid = 0

    @property
    def is_active(self) -> bool:
        return self._active

    @property
    def epoch(self) -> int:
        return self.ctx.epoch

    @property
    def queued_events(self) -> int:
        """Events waiting (Kafka's EventQueueSize)."""
        return self._events.qsize()

    # ------------------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._active = True
        # The failover is the first event: requests that reach this controller while it loads
        # (its broker names it from the moment /controller does) queue behind it, as in Kafka.
        failover = self._submit(ev.Failover())
        try:
            await self.faults.before_event("CONTROLLER_LOAD")  # tests: a registration lands first
            await self._load()
        except BaseException:
            failover.cancel()
            raise
        self._task = loop.create_task(self._run(), name=f"controller {self.broker_id}")
        await failover
        self._watches = [
            watch_data(
                self.zk,
                PREFERRED_REPLICA_ELECTION_PATH,
                loop,
                lambda data, _stat: (
                    data is not None and self._enqueue(ev.PreferredReplicaElection())
                ),
            ),
            watch_broker_ids(self.zk, loop, lambda _ids: self._enqueue(ev.BrokerChange())),
            watch_topics(self.zk, loop, lambda _topics: self._enqueue(ev.TopicChange())),
            watch_topic_deletions(self.zk, loop, lambda _topics: self._enqueue(ev.TopicDeletion())),
            self._watch_log_dir_events(loop),
            self._watch_zk_reassignments(loop),
        ]
        if self.config["auto.leader.rebalance.enable"]:
            self._timers.append(loop.create_task(self._rebalance_timer()))
        log.info("broker %d is the controller with epoch %d", self.broker_id, self.ctx.epoch)

    async def stop(self) -> None:
        self._active = False
        for handle in self._watches:
            handle.cancel()
        self._watches = []
        for timer in self._timers:
            timer.cancel()
        self._timers = []
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        for future in self._waiting:
            if not future.done():
                future.set_exception(
                    ControllerMovedError(f"broker {self.broker_id} stopped being the controller")
                )
        self._waiting.clear()
        await self.channel.close()

    async def stop_after_current_event(self, timeout_s: float) -> None:
        """Stop, letting the event in progress finish first (up to `timeout_s`), so that a
        controller stepping down (KIP-39's resignation, a broker's shutdown) leaves none half
        done. The caller then deletes /controller (`FencedWriter.resign`)."""
        if self._task is not None and not self._task.done():
            # Only a running event loop can finish an event; one that never started (a start
            # that failed loading from ZooKeeper) would have the caller wait out the timeout.
            with contextlib.suppress(TimeoutError, ControllerMovedError):
                await wait_for(self._enqueue_and_wait(ev.StopTakingEvents()), timeout_s)
        await self.stop()

    def _handler_table(self) -> dict[type, Handler]:
        """Each event type and the one method that handles it."""
        return {
            ev.Failover: self._failover,
            ev.BrokerChange: self._broker_change,
            ev.TopicChange: self._topic_change,
            ev.TopicDeletion: self._topic_deletion,
            ev.PreferredReplicaElection: self._preferred_request,
            ev.AutoLeaderRebalance: self._auto_rebalance,
            ev.LogDirEvents: self._log_dir_events,
            ev.ZkReassignment: self._zk_reassignment_request,
            ev.TopicConfigChanged: self._topic_config_changed,
            ev.BrokerConfigChanged: self._broker_config_changed,
            ev.LeaderAndIsrAnswered: self._on_leader_and_isr_answer,
            ev.LeaderAndIsrResend: self._resend_leader_and_isr,
            ev.ReassignmentIsrChanged: self._reassignment_isr_changed,
            ev.CreateTopics: self._create_topics,
            ev.DeleteTopics: self._delete_topics_request,
            ev.AlterPartition: self._alter_partition,
            ev.ControlledShutdown: self._controlled_shutdown,
            ev.CreatePartitions: self._create_partitions,
            ev.ElectLeaders: self._elect_leaders,
            ev.ElectPreferredLeaders: self._elect_preferred,
            ev.AlterPartitionReassignments: self._alter_partition_reassignments,
            ev.ListPartitionReassignments: self._list_partition_reassignments,
            ev.ExecutePlan: self._execute_plan,
            ev.StopTakingEvents: self._stop_taking_events,
        }

    def _enqueue(self, event: ev.ControllerEvent) -> None:
        if self._active:
            self._events.put_nowait((event, None, time.perf_counter()))

    async def _enqueue_and_wait(self, event: ev.ControllerEvent) -> Any:
        """Queue the event and return what its handler returns (or raise what it raised)."""
        return await self._submit(event)

    def _submit(self, event: ev.ControllerEvent) -> asyncio.Future[Any]:
        """Queue the event now; the future gets what its handler returns (or raised)."""
        if not self._active:
            raise ControllerMovedError(f"broker {self.broker_id} is not the controller")
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._events.put_nowait((event, future, time.perf_counter()))
        self._waiting.add(future)
        future.add_done_callback(self._waiting.discard)
        return future

    async def _handle(self, event: ev.ControllerEvent, future: asyncio.Future[Any] | None) -> None:
        self.recent_events.begin(event, int(time.time() * 1000))
        started = time.perf_counter()
        error: str | None = "stopped"  # what a cancellation leaves
        try:
            await self._handle_event(event, future)
            error = None
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            self.recent_events.end(int((time.perf_counter() - started) * 1e6), error)

    async def _handle_event(
        self, event: ev.ControllerEvent, future: asyncio.Future[Any] | None
    ) -> None:
        handler = self._handlers[type(event)]
        if future is None:
            await handler(event)
            return
        try:
            result = await handler(event)
        except asyncio.CancelledError:  # the controller stopped in the middle of it
            if not future.done():
                future.set_exception(ControllerMovedError("the controller stopped"))
            raise
        except BaseException as exc:
            if not future.done():
                future.set_exception(exc)
            raise
        if not future.done():
            future.set_result(result)

    async def _run(self) -> None:
        while True:
            event, future, queued = await self._events.get()
            started = time.perf_counter()
            try:
                await self._handle(event, future)
            except (zkc.ControllerMovedError, ControllerMovedError):
                log.warning("controller %d was deposed (epoch fence); resigning", self.broker_id)
                self._active = False
                if self.on_resign is not None:
                    self.on_resign()
                return
            except Exception:
                log.exception("controller event %s failed", type(event).__name__)
            finally:
                state = STATE_METRICS.get(type(event))
                if state is not None:
                    took_ms = (time.perf_counter() - started) * 1000
                    STATS.record_controller_event(state, (started - queued) * 1000, took_ms)

    async def _stop_taking_events(self, _event: ev.StopTakingEvents) -> None:
        self._active = False

    async def _execute_plan(self, event: ev.ExecutePlan) -> None:
        await self._execute(event.plan)

    # ------------------------------------------------------------------------- loading

    async def _load(self) -> None:
        def load() -> tuple[
            dict[int, RegisteredBroker],
            dict[str, TopicAssignment],
            dict[TopicPartition, Any],
            list[str],
            dict[str, dict[str, str]],
        ]:
            brokers = zkc.read_brokers(self.zk)
            topics = zkc.read_topics(self.zk)
            states = zkc.read_all_partition_states(self.zk, topics)
            deletions = zkc.read_topic_deletions(self.zk)
            configs = zkc.read_topic_configs(self.zk, topics)
            return brokers, topics, states, deletions, configs

        started = time.monotonic()
        brokers, topics, states, deletions, configs = await asyncio.to_thread(load)
        log.info(
            "loaded %d brokers, %d topics, %d partition states from ZooKeeper in %.2f s",
            len(brokers),
            len(topics),
            len(states),
            time.monotonic() - started,
        )
        for registered in brokers.values():
            info = _broker_info(registered, self.config.inter_broker_listener)
            self.ctx.live_brokers[info.id] = info
            self.channel.add_broker(info)
        for topic, assignment in topics.items():
            await self._add_topic(topic, assignment)
        for tp, versioned in states.items():
            self.ctx.states[tp] = self._leader_isr(versioned.state, versioned.version)
        self.topic_configs = configs
        self.ctx.topics_being_deleted = {t for t in deletions if t in self.ctx.topic_ids}

    async def _add_topic(self, topic: str, assignment: TopicAssignment) -> None:
        topic_id = assignment.topic_id
        if topic_id is None:  # a topic written by a tool that knows no topic ids
            topic_id = uuid.uuid4()
            await asyncio.to_thread(
                self.writer.set_topic_assignment, topic, replace(assignment, topic_id=topic_id)
            )
        self.ctx.add_topic(topic, topic_id, dict(assignment.partitions))
        for partition, adding in assignment.adding_replicas.items():  # reassignments (KIP-455)
            self.ctx.adding_replicas[(topic, partition)] = tuple(adding)
        for partition, removing in assignment.removing_replicas.items():
            self.ctx.removing_replicas[(topic, partition)] = tuple(removing)

    @staticmethod
    def _leader_isr(state: PartitionState, version: int) -> LeaderIsr:
        return LeaderIsr(
            state.leader,
            state.leader_epoch,
            shared(tuple(state.isr)),
            state.controller_epoch,
            version,
            shared(state.isr_broker_epochs),
        )

    def topic_config_changed(self, topic: str, config: dict[str, str]) -> None:
        """A topic's dynamic config changed (ZooKeeper notification, via this broker): the
        cached configs follow, and offline partitions elect if unclean election was enabled."""
        self._enqueue(ev.TopicConfigChanged(topic, dict(config)))

    async def _topic_config_changed(self, event: ev.TopicConfigChanged) -> None:
        was = self._unclean(event.topic)
        if event.topic in self.ctx.topic_ids:
            self.topic_configs[event.topic] = dict(event.config)
        if self._unclean(event.topic) and not was:
            await self._execute(on_unclean_election_enabled(self.ctx, self._unclean))

    def broker_config_changed(self, config: BrokerConfig) -> None:
        """The broker's dynamic configs changed: unclean.leader.election.enable is read from
        the new settings from now on."""
        self._enqueue(ev.BrokerConfigChanged(config))

    async def _broker_config_changed(self, event: ev.BrokerConfigChanged) -> None:
        was = bool(self.config["unclean.leader.election.enable"])
        self.config = event.config
        if event.config["unclean.leader.election.enable"] and not was:
            await self._execute(on_unclean_election_enabled(self.ctx, self._unclean))

    def _unclean(self, topic: str) -> bool:
        value = self.topic_configs.get(topic, {}).get("unclean.leader.election.enable")
        if value is None:
            return bool(self.config["unclean.leader.election.enable"])
        return value.strip().lower() == "true"

    # ------------------------------------------------------------------------- plans

    async def _execute(self, plan: Plan) -> list[asyncio.Future[Any]]:
        """Write the plan's states (fenced), commit them to the context, send its requests."""
        await self._write(plan)
        futures = []
        for request in plan.batch.build(self.ctx):
            futures.append(self.channel.send(request))
            self._watch_answer(request, futures[-1])
            # Let the broker's sender put it on the wire before the next one is built: the new
            # leaders apply their LeaderAndIsr while the UpdateMetadata bodies are being built.
            await asyncio.sleep(0)
        return futures

    async def _write(self, plan: Plan) -> set[TopicPartition]:
        """Write the plan's states (fenced) and commit them; returns the partitions refused."""
        # Every state is written with its ISR members' broker epochs, for the next controller.
        plan.creates = {tp: self.ctx.with_isr_epochs(s) for tp, s in plan.creates.items()}
        plan.updates = {tp: self.ctx.with_isr_epochs(s) for tp, s in plan.updates.items()}

        def write() -> tuple[dict[TopicPartition, int], dict[TopicPartition, Exception]]:
            versions: dict[TopicPartition, int] = {}
            failed: dict[TopicPartition, Exception] = {}
            by_topic: dict[str, dict[int, PartitionState]] = {}
            for (topic, partition), state in plan.creates.items():
                by_topic.setdefault(topic, {})[partition] = _zk_state(state)
            for topic, states in by_topic.items():
                created, errors = self.writer.create_partition_states(topic, states)
                versions.update({(topic, p): v for p, v in created.items()})
                failed.update({(topic, p): e for p, e in errors.items()})
            if plan.updates:
                result = self.writer.update_partition_states(
                    {
                        tp: (_zk_state(state), self.ctx.states[tp].partition_epoch)
                        for tp, state in plan.updates.items()
                    }
                )
                versions.update(result.updated)
                failed.update(result.failed)
            return versions, failed

        versions, failed = await asyncio.to_thread(write)
        states = self.ctx.states
        for tp, version in versions.items():
            state = plan.updates.get(tp) or plan.creates[tp]
            states[tp] = state.with_partition_epoch(version)
        if failed:
            log.warning("partition state writes refused, reloading: %s", sorted(failed))
            reloaded = await asyncio.to_thread(zkc.read_partition_states, self.zk, list(failed))
            for tp, versioned in reloaded.items():
                self.ctx.states[tp] = self._leader_isr(versioned.state, versioned.version)
        return set(failed)

    # ------------------------------------------------------------------------- events

    async def _failover(self, _event: ev.Failover) -> None:
        started = time.monotonic()
        bounced = {}
        if self.config.enabled("epochlog.test.failover.isr.epochs.enabled"):
            bounced = bounced_isr_members(self.ctx)
        if bounced:
            log.info(
                "failover: %d partitions have ISR members registered again since their state "
                "was written (brokers %s); they leave those ISRs",
                len(bounced),
                sorted(set().union(*bounced.values())),
            )
        plan = on_controller_failover(self.ctx, self._unclean, bounced)
        self.recent_events.note(
            f"{len(self.ctx.states)} partitions, live brokers {sorted(self.ctx.live_brokers)}"
        )
        planned = time.monotonic()
        await self._execute(plan)
        log.info(
            "failover plan for %d partitions made in %.2f s, written and handed to the "
            "brokers' senders in %.2f s",
            len(self.ctx.states),
            planned - started,
            time.monotonic() - planned,
        )
        if self.ctx.topics_being_deleted:
            await self._delete_topics(sorted(self.ctx.topics_being_deleted))
        await self._resume_reassignments()

    async def _broker_change(self, _event: ev.BrokerChange) -> None:
        await self.faults.before_event("BROKER_CHANGE")  # tests: a controller busy elsewhere
        registered = await asyncio.to_thread(zkc.read_brokers, self.zk)
        change = classify_brokers(
            self.ctx.broker_epochs(),
            {b: r.epoch for b, r in registered.items()},
            detect_bounces=self.config.enabled("epochlog.test.kip380.enabled"),
        )
        if change.empty:
            return
        log.info(
            "broker change: new %s, dead %s, bounced %s", change.new, change.dead, change.bounced
        )
        self.recent_events.note(
            f"new {sorted(change.new)}, dead {sorted(change.dead)}, "
            f"bounced {sorted(change.bounced)}"
        )
        for broker_id in [*change.new, *change.dead, *change.bounced]:
            self.clear_offline(broker_id)
        for broker_id in change.dead:
            self.ctx.live_brokers.pop(broker_id, None)
            self.ctx.shutting_down.discard(broker_id)
            await self.channel.remove_broker(broker_id)
        for broker_id in change.new:
            info = _broker_info(registered[broker_id], self.config.inter_broker_listener)
            self.ctx.live_brokers[broker_id] = info
            self.channel.add_broker(info)
        if change.new:
            await self._execute(on_broker_startup(self.ctx, change.new, self._unclean))
        if change.dead:
            await self._execute(on_broker_failure(self.ctx, change.dead, self._unclean))
        if change.bounced:
            for broker_id in change.bounced:
                self.ctx.live_brokers.pop(broker_id, None)
                self.ctx.shutting_down.discard(broker_id)
                await self.channel.remove_broker(broker_id)
            await self._execute(on_broker_failure(self.ctx, change.bounced, self._unclean))
            for broker_id in change.bounced:
                info = _broker_info(registered[broker_id], self.config.inter_broker_listener)
                self.ctx.live_brokers[broker_id] = info
                self.channel.add_broker(info)
            await self._execute(on_broker_startup(self.ctx, change.bounced, self._unclean))
        await self._resume_reassignments()

    async def _topic_change(self, _event: ev.TopicChange) -> list[asyncio.Future[Any]]:
        topics = await asyncio.to_thread(zkc.list_topics, self.zk)
        added = sorted(set(topics) - set(self.ctx.topic_ids))
        removed = sorted(set(self.ctx.topic_ids) - set(topics))
        if added or removed:
            self.recent_events.note(f"added {added}, removed {removed}")
        for topic in removed:
            self.ctx.remove_topic(topic)
        if not added:
            return []

        def read() -> tuple[dict[str, TopicAssignment], dict[TopicPartition, Any], dict[str, Any]]:
            assignments = zkc.read_topics(self.zk, added)
            states = zkc.read_all_partition_states(self.zk, assignments)
            configs = {t: zkc.read_topic_config(self.zk, t) for t in assignments}
            return assignments, states, configs

        assignments, states, configs = await asyncio.to_thread(read)
        self.topic_configs.update(configs)
        for topic, assignment in assignments.items():
            await self._add_topic(topic, assignment)
        for tp, versioned in states.items():
            self.ctx.states[tp] = self._leader_isr(versioned.state, versioned.version)
        new_partitions = [
            tp for t in assignments for tp in self.ctx.partitions_of(t) if tp not in self.ctx.states
        ]
        return await self._execute(on_new_partitions(self.ctx, new_partitions))

    async def _topic_deletion(self, _event: ev.TopicDeletion) -> None:
        marked = await asyncio.to_thread(zkc.read_topic_deletions, self.zk)
        if not marked:
            return
        if not self.config["delete.topic.enable"]:
            await asyncio.to_thread(self.writer.delete_topic_deletion_markers, marked)
            return
        unknown = [t for t in marked if t not in self.ctx.topic_ids]
        if unknown:
            await asyncio.to_thread(self.writer.delete_topic_deletion_markers, unknown)
        await self._delete_topics([t for t in marked if t in self.ctx.topic_ids])

    async def _delete_topics(self, topics: list[str]) -> None:
        if not topics:
            return
        self.ctx.topics_being_deleted.update(topics)
        futures = await self._execute(on_topic_deletion(self.ctx, topics))
        await self._wait(futures)

        def delete() -> None:
            for topic in topics:
                self.writer.delete_topic(topic)
            self.writer.delete_topic_deletion_markers(topics)

        await asyncio.to_thread(delete)
        for topic in topics:
            self.ctx.remove_topic(topic)
            self.topic_configs.pop(topic, None)
        log.info("deleted topics %s", topics)

    async def _preferred_request(self, _event: ev.PreferredReplicaElection) -> None:
        """/admin/preferred_replica_election appeared (`epochlog leaders elect --preferred`)."""

        def read() -> list[TopicPartition] | None:
            try:
                data, _ = self.zk.get(PREFERRED_REPLICA_ELECTION_PATH)
            except NoNodeError:
                return None
            return decode_preferred_replica_election(data)

        partitions = await asyncio.to_thread(read)
        if partitions is None:
            return
        known = [tp for tp in partitions if tp in self.ctx.states] if partitions else None
        plan = on_preferred_election(self.ctx, known)
        await self._wait(await self._execute(plan))
        await asyncio.to_thread(self.writer.delete_paths, [PREFERRED_REPLICA_ELECTION_PATH])
        log.info("preferred leader election moved %d partitions", len(plan.updates))

    async def _rebalance_timer(self) -> None:
        interval_s = self.config["leader.imbalance.check.interval.seconds"]
        while True:
            await asyncio.sleep(interval_s)
            self._enqueue(ev.AutoLeaderRebalance())

    async def _auto_rebalance(self, _event: ev.AutoLeaderRebalance) -> None:
        threshold = self.config["leader.imbalance.per.broker.percentage"]
        moves = imbalanced_partitions(self.ctx, threshold)
        if moves:
            plan = on_preferred_election(self.ctx, moves)
            await self._execute(plan)
            log.info("auto leader rebalance moved %d partitions", len(plan.updates))

    async def elect_preferred_leaders(
        self, partitions: Iterable[TopicPartition] | None = None
    ) -> list[TopicPartition]:
        wanted = None if partitions is None else tuple(partitions)
        return await self._enqueue_and_wait(ev.ElectPreferredLeaders(wanted))

    async def _elect_preferred(self, event: ev.ElectPreferredLeaders) -> list[TopicPartition]:
        plan = on_preferred_election(self.ctx, event.partitions)
        await self._wait(await self._execute(plan))
        return sorted(plan.updates)


def _zk_state(state: LeaderIsr) -> PartitionState:
    return PartitionState(
        leader=state.leader,
        leader_epoch=state.leader_epoch,
        isr=tuple(state.isr),
        controller_epoch=state.controller_epoch,
        isr_broker_epochs=state.isr_epochs,
    )
