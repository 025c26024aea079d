"""Client quotas' pure parts: which quota applies (Kafka's precedence), the windowed rate and
the throttle time (Kafka's ClientQuotaManager figures), and the AlterClientQuotas /
DescribeClientQuotas decisions (entities, keys, values, filters, ZooKeeper paths)."""

from __future__ import annotations

import pytest

from epochlog.broker.client_quotas import (
    ClientQuotaManager,
    ClientQuotas,
    QuotaType,
    SampledRate,
    client_throttles_itself,
    throttle_time_ms,
)
from epochlog.config.client_quotas import (
    MATCH_ANY,
    MATCH_DEFAULT,
    MATCH_EXACT,
    FilterComponent,
    QuotaOp,
    QuotaRequestError,
    alter_quota_config,
    client_entity,
    desanitize,
    describe_quotas,
    entity_from_znode,
    entity_znode,
    parse_entity,
    parse_filter,
    sanitize,
    user_client_entity,
    user_entity,
)
from epochlog.protocol.errors import ErrorCode

U, C = "alice", "app"


def manager_with(levels: dict[str, float]) -> ClientQuotaManager:
    entities = {
        "users/u/clients/c": user_client_entity(U, C),
        "users/u/clients/<default>": user_client_entity(U, None),
        "users/u": user_entity(U),
        "users/<default>/clients/c": user_client_entity(None, C),
        "users/<default>/clients/<default>": user_client_entity(None, None),
        "users/<default>": user_entity(None),
        "clients/c": client_entity(C),
        "clients/<default>": client_entity(None),
    }
    manager = ClientQuotaManager(QuotaType.PRODUCE)
    for level, bound in levels.items():
        manager.update(entities[level], bound)
    return manager


PRECEDENCE = [
    "users/u/clients/c",
    "users/u/clients/<default>",
    "users/u",
    "users/<default>/clients/c",
    "users/<default>/clients/<default>",
    "users/<default>",
    "clients/c",
    "clients/<default>",
]


def test_the_most_specific_entity_wins_in_kafkas_order() -> None:
    levels = {level: float(1000 * (i + 1)) for i, level in enumerate(PRECEDENCE)}
    for i, level in enumerate(PRECEDENCE):
        manager = manager_with({k: v for k, v in levels.items() if k in PRECEDENCE[i:]})
        assert manager.quota(U, C) == levels[level], level


def test_quotas_for_other_users_and_client_ids_do_not_apply() -> None:
    manager = ClientQuotaManager(QuotaType.PRODUCE)
    manager.update(user_client_entity("bob", C), 1.0)
    manager.update(user_entity("bob"), 2.0)
    manager.update(client_entity("other"), 3.0)
    assert manager.quota(U, C) is None
    manager.update(client_entity(None), 4.0)
    assert manager.quota(U, C) == 4.0
    assert manager.quota("bob", "x") == 2.0


def test_metric_tags_share_a_rate_as_kafka_does() -> None:
    # A client-id quota: one rate per client id whatever the user.
    manager = manager_with({"clients/c": 10.0})
    assert manager.metric_tags(U, C) == ("", C)
    assert manager.metric_tags("bob", C) == ("", C)
    # A user quota: one rate for all of the user's client ids.
    manager = manager_with({"users/u": 10.0})
    assert manager.metric_tags(U, C) == (U, "")
    assert manager.metric_tags(U, "other") == (U, "")
    # The default user/client: a rate per (user, client id).
    manager = manager_with({"users/<default>/clients/<default>": 10.0})
    assert manager.metric_tags(U, C) == (U, C)
    assert manager.metric_tags(U, "other") == (U, "other")


def test_removing_a_quota_falls_back_to_the_next_level() -> None:
    manager = manager_with({"clients/c": 100.0, "clients/<default>": 50.0})
    assert manager.quota(U, C) == 100.0
    manager.update(client_entity(C), None)
    assert manager.quota(U, C) == 50.0
    manager.update(client_entity(None), None)
    assert manager.quota(U, C) is None
    assert not manager.enabled


def test_a_first_burst_is_measured_over_the_whole_window() -> None:
    rate = SampledRate()
    rate.record(1000, now_ms=5_000)
    assert rate.window_size_ms(5_000) == 10_000  # (samples - 1) windows at least
    assert rate.measure(5_000) == pytest.approx(100.0)


def test_throttle_time_is_kafkas_formula() -> None:
    assert throttle_time_ms(rate=600, bound=500, window_ms=10_500) == 2100
    assert throttle_time_ms(rate=100, bound=50, window_ms=10_000) == 10_000
    assert throttle_time_ms(rate=100.0001, bound=100, window_ms=10_000) == 0


def test_kafkas_quota_violation_scenario() -> None:
    """ClientQuotaManagerTest.testQuotaViolation: 400 B/s for 10 s under a 500 B/s quota is
    never throttled; a 2300 B spike half a second later is 6300 B over 10.5 s = 600 B/s, throttled
    (600 - 500) / 500 x 10.5 s = 2100 ms; after ten more seconds of 400 B/s the spike has rolled
    out of the window."""
    manager = ClientQuotaManager(QuotaType.PRODUCE)
    manager.update(client_entity(None), 500.0)
    now = 1_700_000_000_000
    for _ in range(10):
        assert manager.record("ANONYMOUS", "unknown", 400, now) == 0
        now += 1000
    now += 500
    assert manager.record("ANONYMOUS", "unknown", 2300, now) == 2100
    now += 2100
    for _ in range(10):
        manager.record("ANONYMOUS", "unknown", 400, now)
        now += 1000
    assert manager.record("ANONYMOUS", "unknown", 0, now) == 0


def test_unrecord_takes_a_throttled_fetch_back() -> None:
    manager = ClientQuotaManager(QuotaType.FETCH)
    manager.update(client_entity(C), 100.0)
    assert manager.record(U, C, 5000, 0) > 0
    manager.unrecord(U, C, 5000, 0)
    assert manager.record(U, C, 500, 0) == 0  # 500 B over 10 s: 50 B/s


def test_other_clients_keep_their_own_rate() -> None:
    manager = ClientQuotaManager(QuotaType.PRODUCE)
    manager.update(client_entity(None), 100.0)
    assert manager.record(U, "greedy", 10_000, 0) > 0
    assert manager.record(U, "modest", 500, 0) == 0


def test_no_quota_records_nothing() -> None:
    manager = ClientQuotaManager(QuotaType.PRODUCE)
    assert manager.record(U, C, 10**9, 0) == 0
    assert manager.rates == {}
    assert manager.max_value_in_window(U, C) is None


def test_rates_idle_for_an_hour_are_forgotten() -> None:
    manager = ClientQuotaManager(QuotaType.PRODUCE)
    manager.update(client_entity(None), 100.0)
    manager.record(U, "gone", 10, 0)
    manager.record(U, "active", 10, 3_000_000)
    assert set(manager.rates) == {("", "gone"), ("", "active")}
    manager.record(U, "active", 10, 3_600_000)  # the next look, a minute or more later
    assert set(manager.rates) == {("", "active")}


def test_max_fetch_bytes_is_the_quota_window() -> None:
    manager = ClientQuotaManager(QuotaType.FETCH)
    manager.update(client_entity(C), 51200.0)
    assert manager.max_value_in_window(U, C) == 512_000.0


def test_stored_configs_feed_each_quota_type() -> None:
    quotas = ClientQuotas()
    entity = client_entity(C)
    quotas.apply_entity_config(entity, {"producer_byte_rate": "1024", "consumer_byte_rate": "2048"})
    assert quotas.produce.quota(U, C) == 1024.0
    assert quotas.fetch.quota(U, C) == 2048.0
    quotas.apply_entity_config(entity, {"consumer_byte_rate": "2048"})
    assert quotas.produce.quota(U, C) is None
    assert quotas.managers[QuotaType.REQUEST].quota(U, C) is None


def test_which_versions_throttle_themselves() -> None:
    assert [client_throttles_itself(0, v) for v in (5, 6)] == [False, True]
    assert [client_throttles_itself(1, v) for v in (7, 8)] == [False, True]


# ---------------------------------------------------------------- the admin decisions


def test_sanitize_is_javas_url_encoding() -> None:
    assert sanitize("user 1*@x~.y-z_") == "user%201%2A%40x%7E.y-z_"
    assert desanitize("user%201%2A%40x%7E.y-z_") == "user 1*@x~.y-z_"
    assert sanitize("<default>") == "%3Cdefault%3E"  # a user so named is not the default


@pytest.mark.parametrize(
    ("entity", "path"),
    [
        (user_entity("alice"), ("users", "alice")),
        (user_entity(None), ("users", "<default>")),
        (client_entity("a b"), ("clients", "a%20b")),
        (user_client_entity("CN=x,O=y", None), ("users", "CN%3Dx%2CO%3Dy/clients/<default>")),
        (user_client_entity(None, "app"), ("users", "<default>/clients/app")),
    ],
)
def test_entities_are_stored_where_kafka_stores_them(entity, path) -> None:  # type: ignore[no-untyped-def]
    assert entity_znode(entity) == path
    assert entity_from_znode(*path) == entity


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ([], "Invalid empty client quota entity"),
        ([("topic", "t")], "Unhandled client quota entity type: topic"),
        ([("user", "")], "Empty user not supported"),
        ([("user", "a"), ("user", "b")], "Duplicate user"),
        ([("ip", "1.2.3.4"), ("user", "a")], "IP entity should not be used with user"),
    ],
)
def test_bad_entities_are_invalid_request(entries, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(QuotaRequestError) as err:
        parse_entity(entries)
    assert err.value.error == ErrorCode.INVALID_REQUEST
    assert message in str(err.value)


def test_alter_sets_removes_and_keeps_other_keys() -> None:
    stored = {"consumer_byte_rate": "100", "SCRAM-SHA-256": "salt=..."}
    config = alter_quota_config(
        stored,
        [
            QuotaOp("producer_byte_rate", 1024.0, False),
            QuotaOp("request_percentage", 12.5, False),
            QuotaOp("consumer_byte_rate", 0.0, True),
        ],
    )
    assert config == {
        "producer_byte_rate": "1024",
        "request_percentage": "12.5",
        "SCRAM-SHA-256": "salt=...",
    }
    assert stored == {"consumer_byte_rate": "100", "SCRAM-SHA-256": "salt=..."}


@pytest.mark.parametrize(
    ("op", "message"),
    [
        (
            QuotaOp("producer_bytes_rate", 10.0, False),
            "Invalid configuration key producer_bytes_rate",
        ),
        (QuotaOp("producer_byte_rate", 10.5, False), "producer_byte_rate must be a LONG value"),
        (QuotaOp("consumer_byte_rate", -1.0, False), "consumer_byte_rate: must be positive"),
        (QuotaOp("request_percentage", float("nan"), False), "request_percentage"),
    ],
)
def test_bad_keys_and_values_are_invalid_request_naming_them(op, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(QuotaRequestError) as err:
        alter_quota_config({}, [QuotaOp("producer_byte_rate", 5.0, False), op])
    assert err.value.error == ErrorCode.INVALID_REQUEST
    assert message in str(err.value)


STORED = [
    (user_entity("alice"), {"producer_byte_rate": "1"}),
    (user_entity(None), {"producer_byte_rate": "2"}),
    (client_entity("app"), {"consumer_byte_rate": "3"}),
    (client_entity(None), {"consumer_byte_rate": "4"}),
    (user_client_entity("alice", "app"), {"producer_byte_rate": "5"}),
    (user_client_entity("alice", None), {"producer_byte_rate": "6"}),
    (user_entity("scram-only"), {"SCRAM-SHA-256": "x"}),
]


def described(components: list[FilterComponent], strict: bool) -> list[str]:
    return sorted(
        str(entity) for entity, _ in describe_quotas(parse_filter(components, strict), STORED)
    )


def test_describe_filters_as_kafka_does() -> None:
    everything = described([], strict=False)
    assert len(everything) == 6  # the SCRAM-only user holds no quota
    assert described([], strict=True) == []
    assert described([FilterComponent("user", MATCH_EXACT, "alice")], strict=True) == ["user=alice"]
    assert described([FilterComponent("user", MATCH_EXACT, "alice")], strict=False) == [
        "user=alice",
        "user=alice, client-id=<default>",
        "user=alice, client-id=app",
    ]
    assert described([FilterComponent("user", MATCH_DEFAULT)], strict=True) == ["user=<default>"]
    assert described([FilterComponent("client-id", MATCH_ANY)], strict=True) == [
        "client-id=<default>",
        "client-id=app",
    ]
    assert described(
        [FilterComponent("user", MATCH_ANY), FilterComponent("client-id", MATCH_DEFAULT)],
        strict=True,
    ) == ["user=alice, client-id=<default>"]


@pytest.mark.parametrize(
    ("components", "error", "message"),
    [
        ([FilterComponent("user", 7)], ErrorCode.INVALID_REQUEST, "Unexpected match type: 7"),
        ([FilterComponent("", MATCH_ANY)], ErrorCode.INVALID_REQUEST, "empty filter component"),
        (
            [FilterComponent("user", MATCH_ANY), FilterComponent("user", MATCH_DEFAULT)],
            ErrorCode.INVALID_REQUEST,
            "Duplicate user filter component",
        ),
        (
            [FilterComponent("group", MATCH_ANY)],
            ErrorCode.UNSUPPORTED_VERSION,
            "Custom entity type 'group' not supported",
        ),
        (
            [FilterComponent("ip", MATCH_ANY), FilterComponent("client-id", MATCH_ANY)],
            ErrorCode.INVALID_REQUEST,
            "IP filter component should not be used",
        ),
    ],
)
def test_bad_filters_are_refused(components, error, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(QuotaRequestError) as err:
        parse_filter(components, strict=False)
    assert err.value.error == error
    assert message in str(err.value)
