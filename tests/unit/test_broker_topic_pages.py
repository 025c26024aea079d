"""DescribeTopicPartitions paging (Kafka 3.9's rules) and its nullable cursor on the wire."""

from __future__ import annotations

import pytest

from epochlog.broker.topic_pages import (
    InvalidPageRequest,
    Page,
    TopicSlice,
    page_limit,
    plan_page,
)
from epochlog.protocol import messages as m
from epochlog.protocol.errors import ErrorCode

COUNTS = {"a": 3, "b": 2, "c": 4}


def count(name: str) -> int | None:
    return COUNTS.get(name)


def plan(requested, cursor=None, limit=2000, name_error=lambda name: None) -> Page:
    return plan_page(requested, COUNTS, count, cursor, limit, name_error)


def test_all_topics_in_name_order_within_the_limit_need_no_cursor():
    page = plan([])
    assert page == Page([TopicSlice("a", 0, 3), TopicSlice("b", 0, 2), TopicSlice("c", 0, 4)], None)


def test_a_topic_cut_by_the_limit_ends_the_page_with_a_cursor_at_its_first_left_out_partition():
    page = plan([], limit=4)
    assert page == Page([TopicSlice("a", 0, 3), TopicSlice("b", 0, 1)], ("b", 1))


def test_following_the_cursor_returns_every_partition_once():
    seen: list[tuple[str, int]] = []
    cursor = None
    pages = 0
    while True:
        page = plan([], cursor, limit=2)
        pages += 1
        seen += [(t.name, i) for t in page.topics for i in range(t.first, t.end)]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert seen == [(name, i) for name in sorted(COUNTS) for i in range(COUNTS[name])]
    assert pages == 5  # 9 partitions, 2 a page


def test_a_limit_used_up_exactly_points_the_cursor_at_the_next_topic_partition_0():
    assert plan([], limit=3) == Page([TopicSlice("a", 0, 3)], ("b", 0))
    assert plan(["a"], limit=3) == Page([TopicSlice("a", 0, 3)], None)  # nothing left


def test_the_cursor_topic_starts_at_the_cursor_partition_and_earlier_names_are_skipped():
    page = plan([], cursor=("b", 1))
    assert page == Page([TopicSlice("b", 1, 2), TopicSlice("c", 0, 4)], None)


def test_named_unknown_topics_are_errors_that_take_no_room_and_all_topics_has_none():
    def illegal(name: str) -> ErrorCode | None:
        return ErrorCode.INVALID_TOPIC_EXCEPTION if "!" in name else None

    page = plan(["zz", "a", "bad!"], limit=4, name_error=illegal)
    assert page == Page(
        [
            TopicSlice("a", 0, 3),
            TopicSlice("bad!", error=ErrorCode.INVALID_TOPIC_EXCEPTION),
            TopicSlice("zz", error=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ],
        None,
    )
    # Once the limit is used up, the next name (existing or not) is the cursor.
    assert plan(["zz", "a", "bad!"], limit=3, name_error=illegal).next_cursor == ("bad!", 0)
    assert plan(["zz"]).topics == [TopicSlice("zz", error=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    assert plan([], cursor=("d", 0)).topics == []


def test_a_cursor_outside_the_named_topics_or_negative_is_an_invalid_request():
    with pytest.raises(InvalidPageRequest, match="cursor topic 'c'"):
        plan(["a", "b"], cursor=("c", 0))
    with pytest.raises(InvalidPageRequest, match="partition must be valid"):
        plan([], cursor=("a", -1))


def test_the_page_limit_is_the_smaller_of_the_request_and_server_limit_and_at_least_one():
    assert page_limit(2000) == 2000
    assert page_limit(5000) == 2000
    assert page_limit(0) == 1
    assert page_limit(-3) == 1
    assert page_limit(10, server_limit=4) == 4


def test_the_nullable_cursor_encodes_as_kafka_does():
    R = m.DescribeTopicPartitionsRequest
    with_cursor = R(
        topics=[R.TopicRequest(name="a")],
        cursor=R.Cursor(topic_name="a", partition_index=3),
    )
    # The bytes kafka-python 3.0.12 writes for the same request.
    assert with_cursor.encode(0).hex() == "02026100000007d0010261000000030000"
    assert R(topics=[]).encode(0).hex() == "01000007d0ff00"
    assert R.decode(bytes.fromhex("01000007d0ff00"), 0).cursor is None
    decoded = R.decode(with_cursor.encode(0), 0)
    assert (decoded.cursor.topic_name, decoded.cursor.partition_index) == ("a", 3)
