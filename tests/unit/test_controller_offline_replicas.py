"""Offline replicas (issue 14): what the controller decides from LeaderAndIsr answers, without
ZooKeeper or sockets. A replica its broker answered KAFKA_STORAGE_ERROR for may not lead or stay
in the ISR (Kafka's onReplicasBecomeOffline, on_broker_failure's rules per replica), comes back
with an answer without error, and a failed request is resent with backoff unless KIP-380 says
never."""

from __future__ import annotations

import uuid

from epochlog.controller.context import NO_LEADER, LeaderIsr
from epochlog.controller.decisions import (
    on_broker_failure,
    on_preferred_election,
    on_replicas_offline,
    on_replicas_online,
)
from epochlog.controller.leader_and_isr_answers import (
    LeaderAndIsrAnswer,
    read_answer,
    record_answer,
    retry_delay_ms,
)
from epochlog.protocol import messages as m
from epochlog.protocol.errors import ErrorCode
from tests.unit.test_controller_decisions import commit, context, with_topic

T0, T1, T2 = ("t", 0), ("t", 1), ("t", 2)


def offline(ctx, broker, *tps):
    ctx.offline_replicas.setdefault(broker, set()).update(tps)
    return on_replicas_offline(ctx, {tp: {broker} for tp in tps})


def test_an_offline_leader_replica_moves_leadership_and_leaves_the_isr_on_that_partition_only():
    ctx = with_topic(context())  # t-0 led by 1, t-2 has 1 as follower
    plan = offline(ctx, 1, T0)
    assert set(plan.updates) == {T0}
    assert plan.updates[T0].leader == 2
    assert plan.updates[T0].isr == (2, 3)
    assert plan.updates[T0].leader_epoch == 1
    # every live replica hears it, the offline one too (its answer can take it back)
    assert {b for b, tps in plan.batch.leader_and_isr.items() if T0 in tps} == {1, 2, 3}


def test_an_offline_follower_replica_leaves_the_isr_and_the_leader_stays():
    ctx = with_topic(context())
    plan = offline(ctx, 1, T1)  # t-1: replicas (2, 3, 1), led by 2
    assert plan.updates[T1].leader == 2
    assert plan.updates[T1].isr == (2, 3)


def test_the_rules_are_on_broker_failures_for_one_replica():
    dead = with_topic(context())
    del dead.live_brokers[1]
    by_failure = on_broker_failure(dead, {1})
    ctx = with_topic(context())
    by_replicas = offline(ctx, 1, T0, T1, T2)
    assert {tp: (s.leader, s.isr) for tp, s in by_replicas.updates.items()} == {
        tp: (s.leader, s.isr) for tp, s in by_failure.updates.items()
    }


def test_the_last_isr_member_offline_leaves_the_partition_leaderless_with_its_data_owner():
    ctx = with_topic(context(), assignment={0: (1, 2, 3)})
    ctx.states[T0] = LeaderIsr(1, 4, (1,), ctx.epoch, 7)
    plan = offline(ctx, 1, T0)
    assert plan.updates[T0].leader == NO_LEADER and plan.updates[T0].isr == (1,)
    commit(ctx, plan)
    # its broker answers without error later: back online, and elected (it holds the data)
    newly, back = record_answer(ctx, 1, LeaderAndIsrAnswer(ErrorCode.NONE, served=frozenset({T0})))
    assert (newly, back) == (set(), {T0}) and not ctx.offline_replicas
    plan = on_replicas_online(ctx, back)
    assert plan.updates[T0].leader == 1
    assert T0 in plan.batch.changed_partitions


def test_offline_replicas_are_not_elected_even_unclean_or_preferred():
    ctx = with_topic(context(), assignment={0: (1, 2, 3)})
    ctx.states[T0] = LeaderIsr(2, 1, (1, 2), ctx.epoch, 3)
    ctx.offline_replicas[1] = {T0}
    assert on_preferred_election(ctx, [T0]).updates == {}
    ctx.states[T0] = LeaderIsr(2, 1, (2,), ctx.epoch, 3)
    ctx.offline_replicas[3] = {T0}
    ctx.offline_replicas[2] = {T0}
    plan = on_replicas_offline(ctx, {T0: {2}}, unclean=lambda _t: True)
    assert plan.updates[T0].leader == NO_LEADER
    assert ctx.eligible_for(T0) == set()
    assert ctx.eligible_for(T1) == {1, 2, 3}


def answer_v6(ctx, codes):
    names = {name: topic_id for name, topic_id in ctx.topic_ids.items()}
    response = m.LeaderAndIsrResponse(error_code=0)
    by_topic = {}
    for (topic, p), code in codes.items():
        entry = by_topic.get(topic)
        if entry is None:
            entry = by_topic[topic] = m.LeaderAndIsrResponse.LeaderAndIsrTopicError(
                topic_id=names[topic]
            )
            response.topics.append(entry)
        entry.partition_errors.append(
            m.LeaderAndIsrResponse.LeaderAndIsrPartitionError(partition_index=p, error_code=code)
        )
    return read_answer(response, {v: k for k, v in names.items()})


def test_answers_take_replicas_offline_once_and_back_online():
    ctx = with_topic(context())
    codes = {
        T0: ErrorCode.KAFKA_STORAGE_ERROR,
        T1: ErrorCode.NONE,
        T2: ErrorCode.STALE_CONTROLLER_EPOCH,
    }
    answer = answer_v6(ctx, codes)
    assert not answer.retry
    assert record_answer(ctx, 1, answer) == ({T0}, set())
    assert ctx.offline_replicas == {1: {T0}}
    assert not ctx.is_replica_online(1, T0) and ctx.is_replica_online(1, T1)
    # the same error again (an offline dir answering each resend) changes nothing
    assert record_answer(ctx, 1, answer) == (set(), set())
    # a stale-epoch answer for it is neither
    assert record_answer(ctx, 1, answer_v6(ctx, {T0: ErrorCode.STALE_CONTROLLER_EPOCH})) == (
        set(),
        set(),
    )
    assert record_answer(ctx, 1, answer_v6(ctx, {T0: ErrorCode.NONE})) == (set(), {T0})
    assert ctx.offline_replicas == {}


def test_v2_answers_name_topics_and_unknown_topic_ids_are_left_out():
    R = m.LeaderAndIsrResponse
    response = R(
        error_code=0,
        partition_errors=[
            R.LeaderAndIsrPartitionError(topic_name="t", partition_index=2, error_code=56)
        ],
        topics=[R.LeaderAndIsrTopicError(topic_id=uuid.uuid4())],
    )
    answer = read_answer(response, {})
    assert answer.offline == {T2} and answer.served == frozenset()
    assert read_answer(None, {}) is None


def test_failed_requests_are_resent_with_backoff_but_never_stale_epochs():
    assert read_answer(m.LeaderAndIsrResponse(error_code=-1), {}).retry  # UNKNOWN_SERVER_ERROR
    assert read_answer(m.LeaderAndIsrResponse(error_code=56), {}).retry
    for stale in (ErrorCode.STALE_BROKER_EPOCH, ErrorCode.STALE_CONTROLLER_EPOCH):
        assert not read_answer(m.LeaderAndIsrResponse(error_code=stale), {}).retry
    assert [retry_delay_ms(a) for a in (1, 2, 3, 4, 10)] == [100, 200, 400, 800, 5000]
