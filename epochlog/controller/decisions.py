"""What the controller does for each event, decided without I/O (the etcd-raft style).

Each function reads the context and returns a `Plan`: the partition-state znodes to create or
to update (conditionally, at the partition epoch the context holds) and the control requests to
send once ZooKeeper has accepted the writes. The controller's shell performs the writes, commits
the new states (with their new znode versions) to the context, and only then builds and sends the
requests, so brokers never hear of a state ZooKeeper does not hold.

The rules are Kafka's ZooKeeper controller's (KafkaController, PartitionStateMachine,
ReplicaStateMachine), with KIP-380's bounce handling done by the caller as failure + startup.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from epochlog.controller.context import (
    NO_LEADER,
    ControllerContext,
    LeaderIsr,
    TopicPartition,
)
from epochlog.controller.election import (
    controlled_shutdown_leader,
    initial_leader,
    isr_without,
    offline_leader,
    preferred_leader,
)
from epochlog.controller.request_batch import RequestBatch

UncleanPolicy = Callable[[str], bool]  # topic -> unclean.leader.election.enable


def never_unclean(_topic: str) -> bool:
    return False


@dataclass
class Plan:
    creates: dict[TopicPartition, LeaderIsr] = field(default_factory=dict)
    updates: dict[TopicPartition, LeaderIsr] = field(default_factory=dict)
    batch: RequestBatch = field(default_factory=RequestBatch)
    # partitions whose new leader comes from outside their ISR (counted once written, as
    # Kafka's UncleanLeaderElectionsPerSec)
    unclean_elections: set[TopicPartition] = field(default_factory=set)

    def note_election(self, tp: TopicPartition, leader: int, isr: Sequence[int]) -> None:
        """`leader` was elected for `tp` from the ISR `isr`: unclean when outside it."""
        if leader not in isr:
            self.unclean_elections.add(tp)

    def new_state(self, ctx: ControllerContext, tp: TopicPartition) -> LeaderIsr | None:
        """The partition's state once this plan is applied."""
        return self.updates.get(tp) or self.creates.get(tp) or ctx.states.get(tp)


def _live_replicas(ctx: ControllerContext, tp: TopicPartition) -> list[int]:
    return [r for r in ctx.replicas(tp) if ctx.is_live(r)]


def on_new_partitions(ctx: ControllerContext, partitions: Iterable[TopicPartition]) -> Plan:
    """New partitions: the first live replica leads, every live replica is in the ISR.

    A partition with no live replica gets no state yet; the next broker startup elects it.
    """
    plan = Plan()
    eligible = ctx.eligible_brokers()
    for tp in sorted(partitions):
        election = initial_leader(ctx.replicas(tp), eligible)
        if election is None:
            continue
        leader, isr = election
        plan.creates[tp] = LeaderIsr(leader, 0, isr, ctx.epoch, partition_epoch=-1)
        plan.batch.add_leader_and_isr(_live_replicas(ctx, tp), tp, is_new=True)
    return plan


def on_broker_startup(
    ctx: ControllerContext, new_brokers: Collection[int], unclean: UncleanPolicy = never_unclean
) -> Plan:
    """Brokers that (re)joined; they are already in `ctx.live_brokers` with their new epochs.

    Existing brokers learn the new broker list; each new broker gets full metadata and one
    LeaderAndIsr holding every partition it hosts (KIP-380: the first of its generation).
    Partitions that were offline, or never got a state, are elected now.
    """
    plan = Plan()
    new = set(new_brokers)
    plan.batch.add_update_metadata(set(ctx.live_brokers) - new)
    plan.batch.add_update_metadata(new, ctx.all_partitions())
    for broker in sorted(new):
        plan.batch.mark_full(broker)
        for tp in ctx.partitions_on(broker):
            if tp[0] not in ctx.topics_being_deleted and tp in ctx.states:
                plan.batch.add_leader_and_isr([broker], tp)
    _elect_offline(ctx, plan, unclean)
    return plan


def on_controller_failover(
    ctx: ControllerContext,
    unclean: UncleanPolicy = never_unclean,
    bounced: Mapping[TopicPartition, Collection[int]] | None = None,
) -> Plan:
    """A new controller has loaded the context from ZooKeeper: it tells every live broker the
    full metadata and every live replica its partition's state, then elects what is offline.

    First it handles the bounces no controller saw: ISR members registered again since their
    partition's state was written (`bounced`, from `bounced_isr_members`; None computes it). A
    bounced broker may have lost part of its log in recovery, so it leaves the ISR and, if it
    led, another ISR member leads at a new leader epoch, as the broker-change handler does for
    a bounce it sees. Without this the new controller would keep it leader at the same epoch
    and the followers would truncate to its shorter log (the test-only switch passes {}).

    ISR followers on brokers that are not registered leave the ISR too, as Kafka's controller
    takes replicas on dead brokers offline when it starts (`dead_isr_followers`): a broker
    that died with the old controller would otherwise stay in the ISRs of partitions whose
    leader never drops a caught-up follower (an idle partition), holding up acks=all.
    """
    if bounced is None:
        bounced = bounced_isr_members(ctx)
    gone = {tp: set(b) for tp, b in bounced.items()}
    for tp, dead in dead_isr_followers(ctx).items():
        gone.setdefault(tp, set()).update(dead)
    plan = _on_replicas_gone(ctx, gone, unclean)
    plan.batch.add_update_metadata(ctx.live_brokers, ctx.all_partitions())
    for tp in ctx.all_partitions():
        if tp in ctx.states and tp[0] not in ctx.topics_being_deleted:
            plan.batch.add_leader_and_isr(_live_replicas(ctx, tp), tp)
    _elect_offline(ctx, plan, unclean)
    return plan


def bounced_isr_members(ctx: ControllerContext) -> dict[TopicPartition, set[int]]:
    """Per partition, the live ISR members whose broker epoch is newer than the one recorded
    with the partition's state: they registered again after it was written."""
    bounced: dict[TopicPartition, set[int]] = {}
    for tp, state in ctx.states.items():
        if tp[0] in ctx.topics_being_deleted:
            continue
        for broker, recorded in state.isr_epochs:
            live = ctx.live_brokers.get(broker)
            if live is not None and live.epoch > recorded and broker in state.isr:
                bounced.setdefault(tp, set()).add(broker)
    return bounced


def dead_isr_followers(ctx: ControllerContext) -> dict[TopicPartition, set[int]]:
    """Per partition with a live leader, the ISR members whose broker is not registered.
    (Partitions without a live leader drop them when they elect: `_elect_offline`.)"""
    dead: dict[TopicPartition, set[int]] = {}
    for tp, state in ctx.states.items():
        if tp[0] in ctx.topics_being_deleted or not ctx.is_live(state.leader):
            continue
        gone = {b for b in state.isr if not ctx.is_live(b)}
        if gone:
            dead[tp] = gone
    return dead


def _elect_offline(ctx: ControllerContext, plan: Plan, unclean: UncleanPolicy) -> None:
    eligible = ctx.eligible_brokers()
    states = ctx.states
    unborn = [
        tp for tp in ctx.assignments if tp not in states and tp[0] not in ctx.topics_being_deleted
    ]  # on_new_partitions sorts
    created = on_new_partitions(ctx, unborn)
    plan.creates.update(created.creates)
    for broker, partitions in created.batch.leader_and_isr.items():
        for tp, is_new in partitions.items():
            plan.batch.add_leader_and_isr([broker], tp, is_new)
    for tp in list(ctx.offline_partitions()):
        state = plan.new_state(ctx, tp)
        assert state is not None
        election = offline_leader(
            ctx.replicas(tp), state.isr, ctx.eligible_for(tp, eligible), unclean(tp[0])
        )
        if election is None:
            continue
        leader, isr = election
        plan.updates[tp] = state.with_leader(leader, isr, ctx.epoch)
        plan.note_election(tp, leader, state.isr)
        plan.batch.add_leader_and_isr(_live_replicas(ctx, tp), tp)


def on_unclean_election_enabled(ctx: ControllerContext, unclean: UncleanPolicy) -> Plan:
    """unclean.leader.election.enable became true (a topic or broker config change): offline
    partitions that may now elect a replica outside the ISR do so at once, as Kafka's
    controller does on TopicUncleanLeaderElectionEnable."""
    plan = Plan()
    _elect_offline(ctx, plan, unclean)
    if plan.updates:
        plan.batch.add_update_metadata(ctx.live_brokers)
    return plan


def on_broker_failure(
    ctx: ControllerContext, dead_brokers: Collection[int], unclean: UncleanPolicy = never_unclean
) -> Plan:
    """Brokers that died; they are already gone from `ctx.live_brokers`.

    Partitions they led elect a new leader from the live ISR (or go leaderless); they leave
    every ISR, except that the last member of an ISR stays (it holds the data).
    """
    dead = set(dead_brokers)
    gone = {}
    for tp, replicas in ctx.assignments.items():  # _on_replicas_gone sorts
        if not dead.isdisjoint(replicas):
            gone[tp] = dead.intersection(replicas)
    plan = _on_replicas_gone(ctx, gone, unclean)
    plan.batch.add_update_metadata(ctx.live_brokers)
    return plan


def on_replicas_offline(
    ctx: ControllerContext,
    offline: Mapping[TopicPartition, Collection[int]],
    unclean: UncleanPolicy = never_unclean,
) -> Plan:
    """Replicas a live broker cannot serve (it answered KAFKA_STORAGE_ERROR for them: a damaged
    log, an offline log dir); the caller has recorded them in `ctx.offline_replicas`. Kafka's
    onReplicasBecomeOffline, with on_broker_failure's rules per replica: a partition they led
    elects a leader among the other online ISR members (or goes leaderless), they leave the ISR
    (the last member stays). Their broker still hears the partition's state (as a follower),
    and an answer without error takes the replica back."""
    return _on_replicas_gone(ctx, {tp: set(brokers) for tp, brokers in offline.items()}, unclean)


def on_replicas_online(
    ctx: ControllerContext,
    partitions: Collection[TopicPartition],
    unclean: UncleanPolicy = never_unclean,
) -> Plan:
    """Replicas of `partitions` taken back from `ctx.offline_replicas`: every broker hears
    their new offline-replica lists, and partitions left without a leader may elect now."""
    plan = Plan()
    plan.batch.add_changed_partitions(partitions)
    _elect_offline(ctx, plan, unclean)
    return plan


def _on_replicas_gone(
    ctx: ControllerContext, gone: Mapping[TopicPartition, set[int]], unclean: UncleanPolicy
) -> Plan:
    plan = Plan()
    eligible = ctx.eligible_brokers()
    for tp, removed in sorted(gone.items()):
        if tp[0] in ctx.topics_being_deleted or tp not in ctx.states or not removed:
            continue
        replicas = ctx.replicas(tp)
        state = ctx.states[tp]
        if state.leader in removed or (state.leader != NO_LEADER and not ctx.is_live(state.leader)):
            # The removed replicas lead again only as the last ISR member (a bounced one is
            # live: it must not win over the rest of the ISR).
            remaining_isr = isr_without(state.isr, removed)
            election = offline_leader(
                replicas, remaining_isr, ctx.eligible_for(tp, eligible), unclean(tp[0])
            )
            if election is not None:
                leader, isr = election
                new = state.with_leader(leader, isr, ctx.epoch)
                plan.note_election(tp, leader, remaining_isr)
            else:
                new = state.with_leader(NO_LEADER, isr_without(state.isr, removed), ctx.epoch)
        elif removed & set(state.isr):
            new = state.with_leader(state.leader, isr_without(state.isr, removed), ctx.epoch)
        else:
            plan.batch.add_changed_partitions([tp])  # offline replicas changed
            continue
        plan.updates[tp] = new
        plan.batch.add_leader_and_isr(_live_replicas(ctx, tp), tp)
    return plan


def on_controlled_shutdown(ctx: ControllerContext, broker: int) -> Plan:
    """Move leadership off a broker that asked to shut down (it is in `ctx.shutting_down`).

    Partitions it leads (with other replicas) elect a leader among the remaining ISR; partitions
    it follows drop it from the ISR, and it stops those replicas (without deleting them).
    """
    plan = Plan()
    live = ctx.eligible_brokers()
    for tp in ctx.partitions_on(broker):
        replicas = ctx.replicas(tp)
        state = ctx.states.get(tp)
        if state is None or len(replicas) <= 1 or tp[0] in ctx.topics_being_deleted:
            continue
        if state.leader == broker:
            election = controlled_shutdown_leader(
                replicas, state.isr, ctx.eligible_for(tp, live), ctx.shutting_down
            )
            if election is None:
                continue
            leader, isr = election
            plan.updates[tp] = state.with_leader(leader, isr, ctx.epoch)
            plan.batch.add_leader_and_isr(_live_replicas(ctx, tp), tp)
        else:
            if broker in state.isr and len(state.isr) > 1:
                plan.updates[tp] = state.with_leader(
                    state.leader, isr_without(state.isr, {broker}), ctx.epoch
                )
                others = [r for r in _live_replicas(ctx, tp) if r != broker]
                plan.batch.add_leader_and_isr(others, tp)
            plan.batch.add_stop_replica(broker, tp, delete=False)
    return plan


def remaining_leaderships(ctx: ControllerContext, broker: int) -> list[TopicPartition]:
    """Partitions the broker still leads (the ControlledShutdown answer)."""
    return ctx.partitions_led_by(broker)


def on_topic_deletion(ctx: ControllerContext, topics: Collection[str]) -> Plan:
    """Stop and delete every replica of the topics; brokers drop them from their metadata.

    The caller marks the topics in `ctx.topics_being_deleted` first, so UpdateMetadata carries
    Kafka's leader -2 for them, and removes the znodes and the context entries afterwards.
    """
    plan = Plan()
    for topic in sorted(topics):
        partitions = ctx.partitions_of(topic)
        for tp in partitions:
            for replica in _live_replicas(ctx, tp):
                plan.batch.add_stop_replica(replica, tp, delete=True)
        plan.batch.add_changed_partitions(partitions)
    return plan


def on_preferred_election(
    ctx: ControllerContext, partitions: Iterable[TopicPartition] | None = None
) -> Plan:
    """Move leadership back to each partition's preferred (first assigned) replica."""
    plan = Plan()
    eligible = ctx.eligible_brokers()
    targets = ctx.all_partitions() if partitions is None else sorted(partitions)
    for tp in targets:
        state = ctx.states.get(tp)
        if state is None or tp[0] in ctx.topics_being_deleted:
            continue
        replicas = ctx.replicas(tp)
        if state.leader == replicas[0]:
            continue
        election = preferred_leader(replicas, state.isr, ctx.eligible_for(tp, eligible))
        if election is None:
            continue
        leader, isr = election
        plan.updates[tp] = state.with_leader(leader, isr, ctx.epoch)
        plan.batch.add_leader_and_isr(_live_replicas(ctx, tp), tp)
    return plan


def imbalanced_partitions(ctx: ControllerContext, threshold_percent: int) -> list[TopicPartition]:
    """Partitions to move back to their preferred leader (auto.leader.rebalance.enable).

    For each live broker, the share of the partitions it prefers to lead that someone else
    leads; where that share exceeds `leader.imbalance.per.broker.percentage`, those partitions
    are elected back (Kafka's checkAndTriggerAutoLeaderRebalance)."""
    preferred_by: dict[int, list[TopicPartition]] = {}
    for tp, replicas in ctx.assignments.items():
        if tp in ctx.states and tp[0] not in ctx.topics_being_deleted and replicas:
            preferred_by.setdefault(replicas[0], []).append(tp)
    moves: list[TopicPartition] = []
    for broker, partitions in sorted(preferred_by.items()):
        if not ctx.is_eligible(broker):
            continue
        elsewhere = [tp for tp in partitions if ctx.states[tp].leader != broker]
        if elsewhere and 100 * len(elsewhere) / len(partitions) > threshold_percent:
            moves.extend(elsewhere)
    return sorted(moves)
