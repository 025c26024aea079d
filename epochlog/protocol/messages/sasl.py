"""SaslHandshake (API key 17) and SaslAuthenticate (36).

Transcribed from Kafka's `common/message/Sasl{Handshake,Authenticate}{Request,Response}.json`:
SaslHandshake 0-1, never flexible (v1 only says that SaslAuthenticate requests carry the tokens;
after v0 the tokens go as bare size-prefixed frames); SaslAuthenticate 0-2, v1 adds the
response's SessionLifetimeMs (KIP-368), v2 the first flexible version.
"""

from epochlog.protocol.schema import F, message

HANDSHAKE_REQUEST = message(
    "SaslHandshakeRequest",
    api_key=17,
    valid="0-1",
    flexible="none",
    fields=[F("Mechanism", "string", "0+")],
)

HANDSHAKE_RESPONSE = message(
    "SaslHandshakeResponse",
    api_key=17,
    valid="0-1",
    flexible="none",
    fields=[F("ErrorCode", "int16", "0+"), F("Mechanisms", "[]string", "0+")],
)

AUTHENTICATE_REQUEST = message(
    "SaslAuthenticateRequest",
    api_key=36,
    valid="0-2",
    flexible="2+",
    fields=[F("AuthBytes", "bytes", "0+")],
)

AUTHENTICATE_RESPONSE = message(
    "SaslAuthenticateResponse",
    api_key=36,
    valid="0-2",
    flexible="2+",
    fields=[
        F("ErrorCode", "int16", "0+"),
        F("ErrorMessage", "string", "0+", nullable="0+", default=None),
        F("AuthBytes", "bytes", "0+"),
        F("SessionLifetimeMs", "int64", "1+", default=0),
    ],
)
