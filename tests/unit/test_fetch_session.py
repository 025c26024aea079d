"""KIP-227 fetch sessions: the broker's cache and contexts, and the fetching side's builder."""

from __future__ import annotations

import random
import uuid

import pytest

from epochlog.broker.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    ContextKind,
    FetchContext,
    FetchSessionBuilder,
    FetchSessionCache,
    PartitionAnswer,
    PartitionParams,
    SessionKey,
    next_epoch,
)
from epochlog.protocol.errors import ErrorCode

A0: SessionKey = (None, "a", 0)
A1: SessionKey = (None, "a", 1)
B0: SessionKey = (None, "b", 0)


def params(offset: int) -> PartitionParams:
    return PartitionParams(fetch_offset=offset, max_bytes=1 << 20)


def quiet(hw: int = 10) -> PartitionAnswer:
    return PartitionAnswer(ErrorCode.NONE, hw, hw, 0, 0)


def context(
    cache: FetchSessionCache,
    session_id: int,
    epoch: int,
    partitions: list[tuple[SessionKey, PartitionParams]],
    forgotten: list[SessionKey] | None = None,
    *,
    privileged: bool = True,
    now: int = 0,
    topic_ids: bool = False,
) -> FetchContext:
    return cache.new_context(
        session_id=session_id,
        epoch=epoch,
        partitions=partitions,
        forgotten=forgotten or [],
        privileged=privileged,
        uses_topic_ids=topic_ids,
        now_ms=now,
    )


def open_session(
    cache: FetchSessionCache, keys: list[SessionKey], *, privileged: bool = True, now: int = 0
) -> int:
    full = context(cache, 0, INITIAL_EPOCH, [(k, params(0)) for k in keys], privileged=privileged)
    session_id, carried = cache.answer(full, [quiet() for _ in keys], now)
    assert carried == list(range(len(keys)))
    return session_id


def test_a_full_fetch_with_epoch_0_opens_a_session_answering_every_partition() -> None:
    cache = FetchSessionCache(rng=random.Random(1))
    session_id = open_session(cache, [A0, A1])
    assert session_id != INVALID_SESSION_ID
    session = cache.get(session_id)
    assert session is not None and session.epoch == 1 and list(session.partitions) == [A0, A1]


def test_epoch_minus_1_is_sessionless_and_closes_the_named_session() -> None:
    cache = FetchSessionCache()
    session_id = open_session(cache, [A0])
    ctx = context(cache, session_id, FINAL_EPOCH, [(A0, params(0))])
    assert ctx.kind is ContextKind.SESSIONLESS
    assert cache.answer(ctx, [quiet()], 0) == (INVALID_SESSION_ID, [0])
    assert cache.get(session_id) is None


def test_an_incremental_fetch_answers_only_partitions_with_something_new() -> None:
    cache = FetchSessionCache()
    session_id = open_session(cache, [A0, A1, B0])
    ctx = context(cache, session_id, 1, [])  # nothing changed on the fetching side
    assert ctx.kind is ContextKind.INCREMENTAL
    assert [k for k, _ in ctx.partitions] == [A0, A1, B0]  # the session's partitions are read
    with_records = PartitionAnswer(ErrorCode.NONE, 10, 10, 0, 100)
    assert cache.answer(ctx, [quiet(), with_records, quiet(11)], 0) == (session_id, [1, 2])
    # A1 carried records: it goes to the end, so the others are read first next time.
    ctx = context(cache, session_id, 2, [(A1, params(5))])
    assert ctx.partitions[-1] == (A1, params(5))
    assert cache.answer(ctx, [quiet(10), quiet(11), quiet(10)], 0) == (session_id, [])


def test_errors_and_diverging_epochs_are_always_answered() -> None:
    cache = FetchSessionCache()
    session_id = open_session(cache, [A0, A1])
    ctx = context(cache, session_id, 1, [])
    answers = [
        PartitionAnswer(ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, -1, -1, 0),
        PartitionAnswer(ErrorCode.NONE, 10, 10, 0, 0, diverging=True),
    ]
    assert cache.answer(ctx, answers, 0) == (session_id, [0, 1])


def test_forgotten_partitions_leave_the_session_and_an_emptied_session_is_dropped() -> None:
    cache = FetchSessionCache()
    session_id = open_session(cache, [A0, A1])
    ctx = context(cache, session_id, 1, [], forgotten=[A0])
    assert [k for k, _ in ctx.partitions] == [A1]
    cache.answer(ctx, [quiet()], 0)
    ctx = context(cache, session_id, 2, [], forgotten=[A1])
    assert ctx.kind is ContextKind.SESSIONLESS
    assert cache.get(session_id) is None


@pytest.mark.parametrize(
    ("session_offset", "epoch", "error"),
    [
        (0, 1, ErrorCode.INVALID_FETCH_SESSION_EPOCH),  # epoch 2 expected after one answer
        (0, 3, ErrorCode.INVALID_FETCH_SESSION_EPOCH),
        (7, 2, ErrorCode.FETCH_SESSION_ID_NOT_FOUND),
    ],
)
def test_a_wrong_session_or_epoch_is_an_error_and_changes_nothing(
    session_offset: int, epoch: int, error: ErrorCode
) -> None:
    cache = FetchSessionCache()
    session_id = open_session(cache, [A0])
    cache.answer(context(cache, session_id, 1, []), [quiet()], 0)
    ctx = context(cache, session_id + session_offset, epoch, [(B0, params(0))])
    assert (ctx.kind, ctx.error) == (ContextKind.ERROR, error)
    session = cache.get(session_id)
    assert session is not None and session.epoch == 2 and list(session.partitions) == [A0]


def test_an_incremental_fetch_with_session_id_0_is_session_not_found() -> None:
    ctx = context(FetchSessionCache(), 0, 1, [(A0, params(0))])
    assert (ctx.kind, ctx.error) == (ContextKind.ERROR, ErrorCode.FETCH_SESSION_ID_NOT_FOUND)


def test_switching_between_topic_names_and_ids_is_a_topic_id_error() -> None:
    cache = FetchSessionCache()
    session_id = open_session(cache, [A0])
    ctx = context(cache, session_id, 1, [((uuid.uuid4(), "a", 0), params(0))], topic_ids=True)
    assert ctx.error is ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR


def test_zero_slots_means_no_sessions() -> None:
    cache = FetchSessionCache(max_slots=0)
    assert open_session(cache, [A0]) == INVALID_SESSION_ID
    with pytest.raises(ValueError, match="max.incremental.fetch.session.cache.slots"):
        FetchSessionCache(max_slots=-1)


def test_a_full_cache_evicts_a_session_idle_longer_than_the_eviction_time() -> None:
    cache = FetchSessionCache(max_slots=1, eviction_ms=100)
    first = open_session(cache, [A0], now=0)
    assert open_session(cache, [A0], now=50, privileged=True) == INVALID_SESSION_ID
    second = open_session(cache, [A0], now=101, privileged=False)
    assert second != INVALID_SESSION_ID and cache.get(first) is None and cache.evictions == 1


def test_a_follower_evicts_a_consumers_session_but_not_the_reverse() -> None:
    cache = FetchSessionCache(max_slots=1, eviction_ms=1000)
    consumer = open_session(cache, [A0], privileged=False, now=0)
    follower = open_session(cache, [A0], privileged=True, now=1)
    assert follower != INVALID_SESSION_ID and cache.get(consumer) is None
    assert open_session(cache, [A0, A1], privileged=False, now=2) == INVALID_SESSION_ID
    assert cache.get(follower) is not None


def test_an_old_session_is_evicted_by_a_bigger_newcomer_only() -> None:
    cache = FetchSessionCache(max_slots=1, eviction_ms=100)
    old = open_session(cache, [A0, A1], privileged=False, now=0)
    cache.answer(context(cache, old, 1, [], privileged=False, now=90), [quiet(), quiet()], 90)
    assert open_session(cache, [A0], privileged=False, now=150) == INVALID_SESSION_ID
    assert open_session(cache, [A0, A1, B0], privileged=False, now=150) != INVALID_SESSION_ID
    assert cache.get(old) is None


def test_next_epoch_wraps_to_1_and_keeps_final() -> None:
    assert next_epoch(1) == 2
    assert next_epoch(2**31 - 1) == 1
    assert next_epoch(FINAL_EPOCH) == FINAL_EPOCH


def test_builder_sends_everything_first_then_only_what_changed() -> None:
    builder = FetchSessionBuilder()
    wanted = {A0: params(0), A1: params(0)}
    assert builder.build(wanted, False) == ([A0, A1], [])
    assert (builder.session_id, builder.epoch) == (INVALID_SESSION_ID, INITIAL_EPOCH)
    assert builder.on_response(ErrorCode.NONE, 42)
    assert (builder.session_id, builder.epoch) == (42, 1)
    assert builder.build(wanted, False) == ([], [])
    assert builder.on_response(ErrorCode.NONE, 42) and builder.epoch == 2
    assert builder.build({A1: params(7), B0: params(0)}, False) == ([A1, B0], [A0])


def test_builder_restarts_after_session_errors_and_sessionless_answers() -> None:
    builder = FetchSessionBuilder()
    builder.build({A0: params(0)}, False)
    builder.on_response(ErrorCode.NONE, 42)
    builder.build({A0: params(0)}, False)
    assert not builder.on_response(ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0)
    assert (builder.session_id, builder.epoch) == (42, INITIAL_EPOCH)  # closes 42, opens anew
    assert builder.build({A0: params(0)}, False) == ([A0], [])
    assert not builder.on_response(ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0)
    assert (builder.session_id, builder.epoch) == (INVALID_SESSION_ID, INITIAL_EPOCH)
    builder.build({A0: params(0)}, False)
    assert builder.on_response(ErrorCode.NONE, INVALID_SESSION_ID)  # the broker has no slot
    assert builder.is_full
    builder.build({A0: params(0)}, False)
    builder.on_response(ErrorCode.NONE, 9)
    assert builder.build({A0: params(0)}, True) == ([A0], [])  # names -> ids: a new session
    assert builder.epoch == INITIAL_EPOCH
