"""The two reassignment APIs on the wire: a broker that is not the controller answers
NOT_CONTROLLER (at the top, and per partition for an alteration), also when its controller
stops while the request waits; every answer encodes at v0."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from epochlog.broker.collaborators import CollaboratorError, NoController
from epochlog.broker.handlers import HANDLERS
from epochlog.protocol import messages as m
from epochlog.protocol.api import APIS, ApiKey, Request
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.headers import RequestHeader

ALTER = m.AlterPartitionReassignmentsRequest
LIST = m.ListPartitionReassignmentsRequest


def alter_request() -> Any:
    return ALTER(
        topics=[
            ALTER.ReassignableTopic(
                name="t",
                partitions=[
                    ALTER.ReassignablePartition(partition_index=0, replicas=[2, 3, 4]),
                    ALTER.ReassignablePartition(partition_index=1, replicas=None),
                ],
            )
        ]
    )


def answer(api_key: ApiKey, body: Any, controller: Any) -> Any:
    header = RequestHeader(request_api_key=api_key, request_api_version=0, correlation_id=7)
    services = SimpleNamespace(controller=controller)
    response = asyncio.run(HANDLERS[api_key](services, Request(header, body), None))  # type: ignore[arg-type]
    # it encodes at v0 and reads back the same
    response_class = APIS[api_key].response
    assert response_class.decode(response.encode(0), 0) == response
    return response


class StoppingController(NoController):
    """Active, but deposed while the request waits (the gateway's NOT_CONTROLLER)."""

    @property
    def is_active(self) -> bool:
        return True

    async def alter_partition_reassignments(self, request: Any, version: int) -> Any:
        raise CollaboratorError(ErrorCode.NOT_CONTROLLER, "stopped being the controller")

    async def list_partition_reassignments(self, request: Any, version: int) -> Any:
        raise CollaboratorError(ErrorCode.NOT_CONTROLLER, "stopped being the controller")


def test_a_broker_that_is_not_the_controller_answers_not_controller() -> None:
    for controller in (NoController(), StoppingController()):
        altered = answer(ApiKey.ALTER_PARTITION_REASSIGNMENTS, alter_request(), controller)
        assert altered.error_code == ErrorCode.NOT_CONTROLLER
        assert [
            (p.partition_index, p.error_code) for t in altered.responses for p in t.partitions
        ] == [(0, ErrorCode.NOT_CONTROLLER), (1, ErrorCode.NOT_CONTROLLER)]
        listed = answer(ApiKey.LIST_PARTITION_REASSIGNMENTS, LIST(topics=None), controller)
        assert (listed.error_code, listed.topics) == (ErrorCode.NOT_CONTROLLER, [])


def test_the_active_controller_answers_and_its_answer_is_passed_on() -> None:
    class Active(NoController):
        @property
        def is_active(self) -> bool:
            return True

        async def list_partition_reassignments(self, request: Any, version: int) -> Any:
            R = m.ListPartitionReassignmentsResponse
            partition = R.OngoingPartitionReassignment(
                partition_index=0, replicas=[2, 3, 4, 1], adding_replicas=[4], removing_replicas=[1]
            )
            return R(topics=[R.OngoingTopicReassignment(name="t", partitions=[partition])])

    listed = answer(ApiKey.LIST_PARTITION_REASSIGNMENTS, LIST(topics=None), Active())
    assert listed.error_code == ErrorCode.NONE
    (topic,) = listed.topics
    assert (topic.name, topic.partitions[0].adding_replicas) == ("t", [4])
