"""The authorizer's one check at dispatch: the server hands every request here (when
`authorizer.class.name` is set) instead of straight to its handler.

`security.api_authorization` says what the request needs and answers None when it may run as
it is: the handler runs on the request unchanged, which is what nearly every request of an
authorized client costs (a few dict lookups per topic). Otherwise, by the `Outcome`: the whole
request is answered with the API's error response (`handlers.errors`); or the handler gets a
copy holding only the permitted topics (groups, resources) and the denied ones are answered
with their error and merged into its answer, per topic as Kafka does; and a response filter
leaves out what the principal may not describe. A Produce or OffsetCommit handler returns a
Future (its answer waits for replication); the merged answer is a Future too, so the server
still defers it. An acks=0 Produce with a denied topic closes the connection, as Kafka does
for any failed acks=0 produce. With no authorizer configured the server never comes here.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from epochlog.broker.fetch_session import FetchSessionCache
from epochlog.broker.handlers.errors import error_response
from epochlog.broker.metadata_cache import MetadataCache
from epochlog.protocol.api import ApiKey, Request
from epochlog.protocol.errors import ErrorCode
from epochlog.security.acls import Authorizer
from epochlog.security.api_authorization import AuthContext, Outcome, authorize_request

if TYPE_CHECKING:
    from epochlog.broker.handlers.context import BrokerServices, ConnectionInfo

# Kafka's kafka.authorizer.logger: one line per refused request, at INFO.
denials = logging.getLogger("epochlog.authorizer")


def client_host(peer: str) -> str:
    """The address an ACL's host is compared with: `peer` is host:port."""
    host, sep, _port = peer.rpartition(":")
    return host if sep else peer


class RequestAuthorization:
    """The dispatch check (module docstring); `authorizer` follows ZooKeeper's ACLs."""

    def __init__(
        self,
        authorizer: Authorizer,
        metadata_cache: MetadataCache,
        *,
        auto_create_topics: bool,
        fetch_sessions: FetchSessionCache | None = None,
    ) -> None:
        self.authorizer = authorizer
        self.metadata_cache = metadata_cache
        self.auto_create_topics = auto_create_topics
        self.fetch_sessions = fetch_sessions

    def context(self, connection: ConnectionInfo) -> AuthContext:
        cache = self.metadata_cache
        return AuthContext(
            self.authorizer,
            str(connection.principal),
            client_host(connection.peer),
            topic_name=cache.topic_name,
            topic_exists=cache.has_topic,
            auto_create_topics=self.auto_create_topics,
            session_topics=self._session_topics,
        )

    def _session_topics(self, session_id: int) -> set[str]:
        session = self.fetch_sessions.get(session_id) if self.fetch_sessions else None
        if session is None:
            return set()
        names = set()
        for topic_id, name, _partition in session.partitions:
            if not name and topic_id is not None:
                name = self.metadata_cache.topic_name(topic_id) or ""
            if name:
                names.add(name)
        return names

    def begin(
        self,
        handler: Callable[[BrokerServices, Request, ConnectionInfo], Awaitable[Any]],
        services: BrokerServices,
        request: Request,
        connection: ConnectionInfo,
    ) -> Awaitable[Any]:
        api_key, version = request.api_key, request.api_version
        outcome = authorize_request(self.context(connection), api_key, version, request.body)
        if outcome is None:
            return handler(services, request, connection)
        refused = outcome.error is not None or bool(outcome.denied or outcome.denied_entries)
        if refused:
            denials.info(
                "Principal = %s is Denied (%s) %s v%d from host = %s",
                connection.principal,
                ErrorCode.of(outcome.error).name
                if outcome.error is not None
                else "some of its resources",
                ApiKey(api_key).name,
                version,
                client_host(connection.peer),
            )
        if refused and api_key == ApiKey.PRODUCE and request.body.acks == 0:
            return _close("acks=0 produce refused by the authorizer")
        if outcome.error is not None:
            body = error_response(api_key, version, request.body, ErrorCode(outcome.error))
            return _answered(_filtered(outcome, body))
        denied_entries = list(outcome.denied_entries)
        for denied_body, code in outcome.denied:
            denied = error_response(api_key, version, denied_body, ErrorCode(code))
            denied_entries.extend(getattr(denied, outcome.response_attr or ""))
        if outcome.body is None:
            body = error_response(api_key, version, None, ErrorCode.NONE)
            return _answered(_merged(outcome, denied_entries, body))
        handling = handler(services, dataclasses.replace(request, body=outcome.body), connection)
        if isinstance(handling, asyncio.Future):
            merged: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

            def finish(done: asyncio.Future[Any]) -> None:
                if merged.done():
                    return
                if done.cancelled():
                    merged.cancel()
                elif (failure := done.exception()) is not None:
                    merged.set_exception(failure)
                else:
                    merged.set_result(_merged(outcome, denied_entries, done.result()))

            handling.add_done_callback(finish)
            return merged
        return _after(handling, outcome, denied_entries)


def _filtered(outcome: Outcome, body: Any) -> Any:
    if body is not None and outcome.response_filter is not None:
        return outcome.response_filter(body)
    return body


def _merged(outcome: Outcome, denied_entries: list[Any], body: Any) -> Any:
    if body is not None and denied_entries and outcome.response_attr is not None:
        entries = getattr(body, outcome.response_attr)
        if entries is None:
            setattr(body, outcome.response_attr, list(denied_entries))
        else:
            entries.extend(denied_entries)
    return _filtered(outcome, body)


async def _answered(body: Any) -> Any:
    return body


async def _after(handling: Awaitable[Any], outcome: Outcome, denied_entries: list[Any]) -> Any:
    return _merged(outcome, denied_entries, await handling)


async def _close(reason: str) -> Any:
    from epochlog.broker.handlers.context import CloseConnection

    raise CloseConnection(reason)
