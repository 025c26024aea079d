"""ApiVersions: the API versions this broker serves, exactly the ranges of `protocol.api.APIS`.

v3+ requests carry the client's software name and version; Kafka refuses values that do not
match `[a-zA-Z0-9](?:[a-zA-Z0-9\\-.]*[a-zA-Z0-9])?` with INVALID_REQUEST. (A request of a version
we do not serve never gets here: the server answers it with a v0 body listing ApiVersions' own
range, see `protocol.api.unsupported_api_versions_response`.)
"""

from __future__ import annotations

import re
from typing import Any

from epochlog.broker.handlers.context import BrokerServices, ConnectionInfo
from epochlog.protocol import messages as m
from epochlog.protocol.api import APIS, Request
from epochlog.protocol.errors import ErrorCode

_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")

_API_KEYS = [
    m.ApiVersionsResponse.ApiVersion(
        api_key=api.key, min_version=api.min_version, max_version=api.max_version
    )
    for api in sorted(APIS.values(), key=lambda a: a.key)
]


def valid_client_software(name: str, version: str) -> bool:
    return bool(_SOFTWARE.fullmatch(name)) and bool(_SOFTWARE.fullmatch(version))


async def handle_api_versions(
    services: BrokerServices, request: Request, connection: ConnectionInfo
) -> Any:
    body = request.body
    if request.api_version >= 3 and not valid_client_software(
        body.client_software_name, body.client_software_version
    ):
        return m.ApiVersionsResponse(error_code=ErrorCode.INVALID_REQUEST)
    return m.ApiVersionsResponse(error_code=ErrorCode.NONE, api_keys=list(_API_KEYS))
