"""Request and response headers (Kafka's RequestHeader.json / ResponseHeader.json).

Request header v0 = key, version, correlation id (only ControlledShutdown v0 uses it); v1 adds the
client id, a nullable classic-length string even in v2; v2 adds a tagged section. Response header
v0 = correlation id; v1 adds a tagged section.
"""

from __future__ import annotations

from epochlog.protocol.codec import message_class
from epochlog.protocol.schema import F, message

REQUEST_HEADER = message(
    "RequestHeader",
    api_key=None,
    kind="header",
    valid="0-2",
    flexible="2+",
    fields=[
        F("RequestApiKey", "int16"),
        F("RequestApiVersion", "int16"),
        F("CorrelationId", "int32"),
        F("ClientId", "string", "1+", nullable="1+", flexible="none", ignorable=True),
    ],
)

RESPONSE_HEADER = message(
    "ResponseHeader",
    api_key=None,
    kind="header",
    valid="0-1",
    flexible="1+",
    fields=[F("CorrelationId", "int32")],
)

RequestHeader = message_class(REQUEST_HEADER)
ResponseHeader = message_class(RESPONSE_HEADER)
