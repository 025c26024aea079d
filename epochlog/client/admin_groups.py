"""The admin client's consumer-group operations: list, describe, delete groups; list, alter and
delete their committed offsets. Mixed into `AsyncAdmin`.

How it works. Every operation but listing goes to the group's coordinator, found with
FindCoordinator: batched (v4+, KIP-699: one request for many groups) when the broker serves it,
one request per group before that. Coordinators are remembered for the duration of a call.
What to do with an error is decided by `group_admin_protocol.coordinator_error_action`, as
Kafka's admin client decides it (`CoordinatorStrategy` and each group handler):

| error                                         | action                                      |
|-----------------------------------------------|---------------------------------------------|
| NONE                                          | done                                        |
| COORDINATOR_LOAD_IN_PROGRESS                  | retry at the same coordinator after backoff |
| COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR,   | find the coordinator again, retry after     |
| REQUEST_TIMED_OUT, or a lost connection       | backoff                                     |
| anything else                                 | fail that group with a `KafkaError`         |

Backoff grows from `retry.backoff.ms` to `retry.backoff.max.ms` (KIP-580); everything is bounded
by the call's timeout (`default.api.timeout.ms` unless given), after which the group fails with
REQUEST_TIMED_OUT and the last retriable error.

Listing asks every broker (ListGroups), since each knows only the groups it coordinates, and
retries a broker whose coordinator is loading. Offsets are altered the way Kafka's
AlterConsumerGroupOffsets does it: an OffsetCommit with generation -1 and an empty member id,
which the coordinator accepts only while the group has no members (UNKNOWN_MEMBER_ID
otherwise). Members' assignments are decoded from the consumer protocol
(`protocol.consumer_protocol`) for groups of protocol type "consumer".

Errors raise `KafkaError` naming the operation and the group (and the partition where the error
is a partition's); `delete_groups` returns one result per group, like `delete_topics`. Requests
are built and answers read in `group_admin_protocol` (no I/O); this module sends them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from epochlog.client import group_admin_protocol as gp
from epochlog.client.admin_base import AdminBase
from epochlog.client.connection import BrokerConnection
from epochlog.client.connection_state import ExponentialBackoff
from epochlog.client.errors import ClientError, KafkaError
from epochlog.client.group_admin_protocol import (
    CoordinatorAction,
    GroupDescription,
    GroupListing,
    GroupReply,
    coordinator_error_action,
)
from epochlog.client.group_offsets import OffsetAndMetadata
from epochlog.client.list_offsets import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    OffsetAndTimestamp,
    list_offsets,
)
from epochlog.client.metadata import TopicPartition
from epochlog.protocol.api import ApiKey
from epochlog.protocol.errors import ErrorCode


@dataclass
class _Call:
    """The state of one group operation across retries."""

    what: str
    coordinators: dict[str, int] = field(default_factory=dict)
    last_error: dict[str, str] = field(default_factory=dict)
    results: dict[str, Any] = field(default_factory=dict)


SendToCoordinator = Callable[[BrokerConnection, list[str]], Awaitable[dict[str, GroupReply]]]


class GroupAdminOperations(AdminBase):
    """`AsyncAdmin`'s group operations (see the module docstring); expects `_net`, `config`,
    `_retry_backoff_ms`, `start()` and `_timeout_ms()` from the class it is mixed into."""

    # ---------------------------------------------------------------- listing

    async def list_groups(
        self, states: Iterable[str] | None = None, *, timeout: float | None = None
    ) -> list[GroupListing]:
        """Every group of every broker, sorted by id; with `states` (Kafka's state names, any
        case) only groups in one of them (needs ListGroups v4 on every broker)."""
        await self.start()
        wanted = [s for s in (states or []) if s]
        timeout_ms = self._timeout_ms(timeout)
        deadline = self._net.now_ms() + timeout_ms
        cluster = self._net.cluster
        if not cluster.brokers:
            cluster = await self._net.update_metadata(timeout_ms)
        todo = sorted(cluster.brokers)
        found: dict[str, GroupListing] = {}
        backoff = self._backoff()
        attempts = 0
        last_error = ""
        while todo:
            outcomes = await asyncio.gather(
                *(self._list_groups_on(node, wanted) for node in todo), return_exceptions=True
            )
            retry = []
            for node, outcome in zip(todo, outcomes, strict=True):
                if isinstance(outcome, ClientError) and outcome.retriable:
                    retry.append(node)
                    last_error = f"broker {node}: {outcome}"
                elif isinstance(outcome, BaseException):
                    raise outcome
                else:
                    for listing in outcome:
                        found.setdefault(listing.group_id, listing)
            todo = retry
            remaining = deadline - self._net.now_ms()
            if todo and remaining <= 0:
                raise KafkaError(
                    ErrorCode.REQUEST_TIMED_OUT,
                    f"ListGroups on brokers {', '.join(map(str, todo))}",
                    last_error or None,
                )
            if todo:
                attempts += 1
                await asyncio.sleep(min(backoff.backoff(attempts), remaining) / 1000)
        return [found[g] for g in sorted(found)]

    async def _list_groups_on(self, node: int, states: list[str]) -> list[GroupListing]:
        conn = await self._net.ready(node)
        version = conn.version_for(ApiKey.LIST_GROUPS)
        if states and version < gp.FIRST_STATES_FILTER_LIST_GROUPS:
            raise KafkaError(
                ErrorCode.UNSUPPORTED_VERSION,
                "ListGroups with a state filter",
                f"broker {node} serves ListGroups up to v{version}; the filter needs v4",
            )
        response = await conn.send(
            gp.list_groups_request(states), api_key=ApiKey.LIST_GROUPS, version=version
        )
        code, listed = gp.read_list_groups(response, version)
        if code is not ErrorCode.NONE:
            raise KafkaError(code, f"ListGroups on broker {node}")
        return listed

    # ---------------------------------------------------------------- describe, delete

    async def describe_groups(
        self, group_ids: Iterable[str], *, timeout: float | None = None
    ) -> dict[str, GroupDescription]:
        """State, assignor, members and their assignments. A group that does not exist is
        described as Dead with no members (as Kafka answers); errors raise KafkaError naming
        the first group that failed."""
        ids = list(dict.fromkeys(group_ids))

        async def send(conn: BrokerConnection, groups: list[str]) -> dict[str, GroupReply]:
            response = await conn.send(
                gp.describe_groups_request(groups), api_key=ApiKey.DESCRIBE_GROUPS
            )
            node = -1 if conn.node_id is None else conn.node_id
            return gp.read_describe_groups(response, self._net.cluster.brokers.get(node))

        results = await self._to_coordinators("DescribeGroups", ids, send, timeout)
        return {g: _raise_or(results[g]) for g in ids}

    async def delete_groups(
        self, group_ids: Iterable[str], *, timeout: float | None = None
    ) -> dict[str, KafkaError | None]:
        """Delete groups with their offsets; per group None or the KafkaError
        (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP while it has members, ...)."""
        ids = list(dict.fromkeys(group_ids))

        async def send(conn: BrokerConnection, groups: list[str]) -> dict[str, GroupReply]:
            response = await conn.send(
                gp.delete_groups_request(groups), api_key=ApiKey.DELETE_GROUPS
            )
            return gp.read_delete_groups(response)

        results = await self._to_coordinators("DeleteGroups", ids, send, timeout)
        return {g: results[g] if isinstance(results[g], KafkaError) else None for g in ids}

    async def delete_group(self, group_id: str, *, timeout: float | None = None) -> None:
        error = (await self.delete_groups([group_id], timeout=timeout))[group_id]
        if error is not None:
            raise error

    # ---------------------------------------------------------------- offsets

    async def list_group_offsets(
        self,
        group_id: str,
        partitions: Iterable[tuple[str, int]] | None = None,
        *,
        timeout: float | None = None,
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offsets: all of them, or those of `partitions` (None for a
        partition without one, as Kafka's admin answers)."""
        wanted = None if partitions is None else [TopicPartition(*tp) for tp in partitions]

        async def send(conn: BrokerConnection, groups: list[str]) -> dict[str, GroupReply]:
            version = conn.version_for(ApiKey.OFFSET_FETCH)
            request = gp.offset_fetch_request(group_id, wanted, version)
            response = await conn.send(request, api_key=ApiKey.OFFSET_FETCH, version=version)
            return {group_id: gp.read_offset_fetch(response, wanted, version)}

        result = await self._to_coordinators("OffsetFetch", [group_id], send, timeout)
        return _raise_or(result[group_id])

    async def alter_group_offsets(
        self,
        group_id: str,
        offsets: Mapping[tuple[str, int], int | OffsetAndMetadata],
        *,
        timeout: float | None = None,
    ) -> None:
        """Commit `offsets` for the group as an admin does (generation -1, no member id):
        refused with UNKNOWN_MEMBER_ID unless the group has no members; a group that does not
        exist is created, as in Kafka."""
        commits = {
            TopicPartition(*tp): o if isinstance(o, OffsetAndMetadata) else OffsetAndMetadata(o)
            for tp, o in offsets.items()
        }
        for tp, o in commits.items():
            if o.offset < 0:
                raise ValueError(f"alter offsets of group {group_id!r}: {tp} offset {o.offset}")
        if not commits:
            return

        async def send(conn: BrokerConnection, groups: list[str]) -> dict[str, GroupReply]:
            version = conn.version_for(ApiKey.OFFSET_COMMIT)
            request = gp.offset_commit_request(group_id, commits, version)
            response = await conn.send(request, api_key=ApiKey.OFFSET_COMMIT, version=version)
            return {group_id: gp.read_offset_commit(response)}

        result = await self._to_coordinators("OffsetCommit", [group_id], send, timeout)
        _raise_or(result[group_id])

    async def delete_group_offsets(
        self,
        group_id: str,
        partitions: Iterable[tuple[str, int]],
        *,
        timeout: float | None = None,
    ) -> None:
        """Delete the group's committed offsets of `partitions` (OffsetDelete); refused with
        GROUP_SUBSCRIBED_TO_TOPIC for a topic a live member subscribes to."""
        wanted = [TopicPartition(*tp) for tp in dict.fromkeys(partitions)]
        if not wanted:
            return

        async def send(conn: BrokerConnection, groups: list[str]) -> dict[str, GroupReply]:
            request = gp.offset_delete_request(group_id, wanted)
            response = await conn.send(request, api_key=ApiKey.OFFSET_DELETE)
            return {group_id: gp.read_offset_delete(response)}

        result = await self._to_coordinators("OffsetDelete", [group_id], send, timeout)
        _raise_or(result[group_id])

    # ---------------------------------------------------------------- log offsets

    async def list_offsets(
        self, query: Mapping[tuple[str, int], int], *, timeout: float | None = None
    ) -> dict[TopicPartition, OffsetAndTimestamp]:
        """ListOffsets: per partition the offset at a timestamp (ms), or at EARLIEST_TIMESTAMP
        (-2, the log start) or LATEST_TIMESTAMP (-1, the log end); offset -1 when no record
        is at or after the timestamp."""
        await self.start()
        return await list_offsets(
            self._net,
            {TopicPartition(*tp): ts for tp, ts in query.items()},
            self._timeout_ms(timeout),
            self._retry_backoff_ms,
        )

    async def log_end_offsets(
        self, partitions: Iterable[tuple[str, int]], *, timeout: float | None = None
    ) -> dict[TopicPartition, int]:
        query = dict.fromkeys(partitions, LATEST_TIMESTAMP)
        found = await self.list_offsets(query, timeout=timeout)
        return {tp: r.offset for tp, r in found.items()}

    async def log_start_offsets(
        self, partitions: Iterable[tuple[str, int]], *, timeout: float | None = None
    ) -> dict[TopicPartition, int]:
        query = dict.fromkeys(partitions, EARLIEST_TIMESTAMP)
        found = await self.list_offsets(query, timeout=timeout)
        return {tp: r.offset for tp, r in found.items()}

    # ---------------------------------------------------------------- coordinators

    def _backoff(self) -> ExponentialBackoff:
        return ExponentialBackoff(self._retry_backoff_ms, self.config["retry.backoff.max.ms"])

    async def _to_coordinators(
        self,
        what: str,
        group_ids: list[str],
        send: SendToCoordinator,
        timeout: float | None,
    ) -> dict[str, Any]:
        """Run `send` at each group's coordinator, batched per coordinator, retrying as the
        module docstring's table says; per group its value or a KafkaError."""
        await self.start()
        deadline = self._net.now_ms() + self._timeout_ms(timeout)
        call = _Call(what)
        backoff = self._backoff()
        attempts = 0
        todo = list(group_ids)
        while todo:
            remaining = deadline - self._net.now_ms()
            if remaining <= 0:
                for g in todo:
                    call.results[g] = KafkaError(
                        ErrorCode.REQUEST_TIMED_OUT,
                        f"{what} for group {g!r}",
                        call.last_error.get(g),
                    )
                break
            unknown = [g for g in todo if g not in call.coordinators]
            if unknown:
                await self._find_coordinators(call, unknown, remaining)
            by_node: dict[int, list[str]] = {}
            for g in todo:
                if g in call.coordinators:
                    by_node.setdefault(call.coordinators[g], []).append(g)
            outcomes = await asyncio.gather(
                *(self._at_coordinator(node, groups, send) for node, groups in by_node.items()),
                return_exceptions=True,
            )
            for (node, groups), outcome in zip(by_node.items(), outcomes, strict=True):
                _apply(call, node, groups, outcome)
            todo = [g for g in todo if g not in call.results]
            if todo:
                attempts += 1
                remaining = deadline - self._net.now_ms()
                await asyncio.sleep(max(min(backoff.backoff(attempts), remaining), 0) / 1000)
        return call.results

    async def _at_coordinator(
        self, node: int, groups: list[str], send: SendToCoordinator
    ) -> dict[str, GroupReply]:
        if node not in self._net.cluster.brokers:  # a broker newer than our metadata
            await self._net.update_metadata(self.config["request.timeout.ms"])
        return await send(await self._net.ready(node), groups)

    async def _find_coordinators(self, call: _Call, groups: list[str], timeout_ms: float) -> None:
        """FindCoordinator for `groups`: batched from v4, else one request per group."""
        try:
            conn = await self._net.least_loaded_connection(timeout_ms)
            version = conn.version_for(ApiKey.FIND_COORDINATOR)
            responses = await asyncio.gather(
                *(
                    conn.send(request, api_key=ApiKey.FIND_COORDINATOR, version=version)
                    for request in gp.find_coordinator_requests(groups, version)
                )
            )
        except ClientError as exc:
            if not exc.retriable:
                raise
            for g in groups:
                call.last_error[g] = f"FindCoordinator: {exc}"
            return
        for answer in gp.read_find_coordinator(groups, responses, version):
            g = answer.group_id
            error = KafkaError(answer.code, f"FindCoordinator for group {g!r}", answer.message)
            if answer.code is ErrorCode.NONE:
                call.coordinators[g] = answer.node_id
            elif coordinator_error_action(answer.code) is CoordinatorAction.FAIL:
                call.results[g] = error
            else:
                call.last_error[g] = str(error)


def _apply(call: _Call, node: int, groups: list[str], outcome: Any) -> None:
    """Fold one coordinator's answer (or failure) into the call's state."""
    if isinstance(outcome, KafkaError) and not outcome.retriable:
        for g in groups:
            call.results[g] = outcome
        return
    if isinstance(outcome, ClientError) and outcome.retriable:  # connection lost, timed out
        for g in groups:
            call.coordinators.pop(g, None)
            call.last_error[g] = f"coordinator {node}: {outcome}"
        return
    if isinstance(outcome, BaseException):  # IncompatibleBrokerError, a bad answer, a bug
        raise outcome
    for g in groups:
        reply = outcome.get(g)
        if reply is None:
            call.results[g] = KafkaError(
                ErrorCode.UNKNOWN_SERVER_ERROR, f"{call.what} for group {g!r}", "no answer"
            )
            continue
        action = coordinator_error_action(reply.code)
        where = f"{call.what} for group {g!r}" + (f" at {reply.where}" if reply.where else "")
        if action is CoordinatorAction.DONE:
            call.results[g] = reply.value
        elif action is CoordinatorAction.FAIL:
            call.results[g] = KafkaError(reply.code, where, reply.message)
        else:
            if action is CoordinatorAction.FIND_AGAIN:
                call.coordinators.pop(g, None)
            call.last_error[g] = str(KafkaError(reply.code, f"{where} (coordinator {node})"))


def _raise_or(result: Any) -> Any:
    if isinstance(result, KafkaError):
        raise result
    return result
