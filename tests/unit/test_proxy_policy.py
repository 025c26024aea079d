"""The proxy's sans-I/O decisions: what happens to each request on a current or stale
connection, which connections close at a switch, and how responses are rewritten."""

from __future__ import annotations

import pytest

from epochlog.client.metadata import ClusterMetadata, apply_metadata_response
from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey, decode_response, encode_request, encode_response
from epochlog.protocol.errors import ErrorCode
from epochlog.proxy.policy import (
    Action,
    ConnectionView,
    close_at_switch,
    decide_request,
    find_coordinator_nodes,
    rebootstrap_required_response,
    rewrite_describe_cluster,
    rewrite_find_coordinator,
    rewrite_metadata,
)
from epochlog.proxy.server import ProxyError, parse_servers, produce_expects_response


@pytest.mark.parametrize(("api_key", "version"), [(ApiKey.METADATA, 4), (ApiKey.PRODUCE, 9)])
def test_a_current_connection_forwards_everything(api_key: int, version: int) -> None:
    assert decide_request(ConnectionView(3), 3, api_key, version) is Action.FORWARD


def test_a_stale_connection_answers_metadata_v13_with_rebootstrap_required() -> None:
    assert decide_request(ConnectionView(1), 2, ApiKey.METADATA, 13) is Action.ANSWER_REBOOTSTRAP


@pytest.mark.parametrize(
    ("api_key", "version"),
    [(ApiKey.METADATA, 12), (ApiKey.METADATA, 4), (ApiKey.PRODUCE, 9), (ApiKey.FETCH, 16)],
)
def test_a_stale_connection_is_closed_for_anything_else(api_key: int, version: int) -> None:
    assert decide_request(ConnectionView(1), 2, api_key, version) is Action.CLOSE


@pytest.mark.parametrize(
    ("api_key", "version"),
    [(ApiKey.METADATA, 14), (ApiKey.DESCRIBE_CLUSTER, 2), (ApiKey.FIND_COORDINATOR, 7)],
)
@pytest.mark.parametrize("generation", [2, 1], ids=["current", "stale"])
def test_a_rewritten_api_at_a_version_we_do_not_serve_is_refused(
    api_key: int, version: int, generation: int
) -> None:
    assert decide_request(ConnectionView(generation), 2, api_key, version) is Action.REFUSE


@pytest.mark.parametrize(("api_key", "version"), [(ApiKey.PRODUCE, 2), (57, 0)])
def test_other_requests_we_do_not_serve_are_left_to_the_upstream(
    api_key: int, version: int
) -> None:
    assert decide_request(ConnectionView(2), 2, api_key, version) is Action.FORWARD


def test_only_connections_known_to_speak_old_metadata_close_at_the_switch() -> None:
    never_asked = ConnectionView(1)
    new_client = ConnectionView(1)
    old_client = ConnectionView(1)
    decide_request(new_client, 1, ApiKey.METADATA, 13)
    decide_request(old_client, 1, ApiKey.METADATA, 4)
    decide_request(old_client, 1, ApiKey.PRODUCE, 7)
    assert old_client.max_metadata_version == 4
    assert not close_at_switch(never_asked)
    assert not close_at_switch(new_client)
    assert close_at_switch(old_client)


def test_the_rebootstrap_answer_is_what_our_client_reads_as_rebootstrap_required() -> None:
    frame = encode_response(ApiKey.METADATA, 13, 42, rebootstrap_required_response())
    correlation_id, body = decode_response(ApiKey.METADATA, 13, frame[4:])
    assert correlation_id == 42
    update = apply_metadata_response(ClusterMetadata(), body, 13, None)
    assert update.error is ErrorCode.REBOOTSTRAP_REQUIRED and update.brokers_seen == 0


def test_metadata_and_describe_cluster_are_pointed_at_the_proxy() -> None:
    R = m.MetadataResponse
    metadata = R(
        brokers=[
            R.MetadataResponseBroker(node_id=1, host="10.0.0.1", port=9092),
            R.MetadataResponseBroker(node_id=2, host="10.0.0.2", port=9093),
        ],
        topics=[],
    )
    ports = {1: 7001, 2: 7002}
    upstream = rewrite_metadata(metadata, lambda n: ("proxy", ports[n]))
    assert upstream == {1: ("10.0.0.1", 9092), 2: ("10.0.0.2", 9093)}
    assert [(b.host, b.port) for b in metadata.brokers] == [("proxy", 7001), ("proxy", 7002)]
    D = m.DescribeClusterResponse
    described = D(brokers=[D.DescribeClusterBroker(broker_id=2, host="10.0.0.2", port=9093)])
    assert rewrite_describe_cluster(described, lambda n: ("proxy", ports[n])) == {
        2: ("10.0.0.2", 9093)
    }
    assert (described.brokers[0].host, described.brokers[0].port) == ("proxy", 7002)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_a_single_find_coordinator_answer_is_pointed_at_the_proxy(version: int) -> None:
    R = m.FindCoordinatorResponse
    found = R(error_code=0, node_id=2, host="10.0.0.2", port=9093)
    assert find_coordinator_nodes(found, version) == [2]
    assert rewrite_find_coordinator(found, version, lambda n: ("proxy", 7000 + n)) == {
        2: ("10.0.0.2", 9093)
    }
    _, decoded = decode_response(
        ApiKey.FIND_COORDINATOR,
        version,
        encode_response(ApiKey.FIND_COORDINATOR, version, 7, found)[4:],
    )
    assert (decoded.node_id, decoded.host, decoded.port) == (2, "proxy", 7002)
    failed = R(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, node_id=-1, host="", port=-1)
    assert find_coordinator_nodes(failed, version) == []
    assert rewrite_find_coordinator(failed, version, lambda n: ("proxy", 7000 + n)) == {}
    assert (failed.host, failed.port) == ("", -1)


@pytest.mark.parametrize("version", [4, 5, 6])
def test_batched_find_coordinator_answers_are_pointed_at_the_proxy_key_by_key(
    version: int,
) -> None:
    R = m.FindCoordinatorResponse
    found = R(
        coordinators=[
            R.Coordinator(key="a", node_id=1, host="10.0.0.1", port=9092, error_code=0),
            R.Coordinator(
                key="b",
                node_id=-1,
                host="",
                port=-1,
                error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
            ),
            R.Coordinator(key="c", node_id=3, host="10.0.0.3", port=9094, error_code=0),
        ]
    )
    assert find_coordinator_nodes(found, version) == [1, 3]
    upstream = rewrite_find_coordinator(found, version, lambda n: ("proxy", 7000 + n))
    assert upstream == {1: ("10.0.0.1", 9092), 3: ("10.0.0.3", 9094)}
    assert [(c.key, c.host, c.port) for c in found.coordinators] == [
        ("a", "proxy", 7001),
        ("b", "", -1),
        ("c", "proxy", 7003),
    ]


@pytest.mark.parametrize("version", [3, 8, 9, 11])
@pytest.mark.parametrize("acks", [0, 1, -1])
@pytest.mark.parametrize("transactional_id", [None, "tx-1"])
def test_acks_zero_produce_is_recognised_in_every_header_layout(
    version: int, acks: int, transactional_id: str | None
) -> None:
    request = m.ProduceRequest(
        transactional_id=transactional_id, acks=acks, timeout_ms=100, topic_data=[]
    )
    frame = encode_request(ApiKey.PRODUCE, version, 7, "client-x", request)[4:]
    assert produce_expects_response(frame, version) is (acks != 0)


def test_upstream_lists_are_checked() -> None:
    assert parse_servers("a:1, b:2") == [("a", 1), ("b", 2)]
    with pytest.raises(ProxyError, match="no servers"):
        parse_servers(" , ")
    with pytest.raises(ProxyError, match="not host:port"):
        parse_servers("a:1,nohost")
