"""Test-only: the transaction APIs in `protocol.api.APIS` on the client side, until the
coordinator's handlers register them (issue 17, the `coord` and `grouptxn` pieces).

The epochlog client speaks only the APIs in `APIS` (versions, header versions and response
decoding all come from it), and the broker asserts at import that each has a handler, so they
cannot be registered there before the handlers exist. `register()` adds the client's view of
AddPartitionsToTxn, AddOffsetsToTxn, EndTxn and TxnOffsetCommit after the broker modules were
imported; once main registers them it changes nothing. The Spark tests' Python workers import
it through `spark_fixtures`, so the sink can talk to librdkafka's mock cluster (which serves
transactions) today."""

from __future__ import annotations

from epochlog.protocol import api
from epochlog.protocol import messages as m

_MESSAGES = {
    24: (m.AddPartitionsToTxnRequest, m.AddPartitionsToTxnResponse),
    25: (m.AddOffsetsToTxnRequest, m.AddOffsetsToTxnResponse),
    26: (m.EndTxnRequest, m.EndTxnResponse),
    28: (m.TxnOffsetCommitRequest, m.TxnOffsetCommitResponse),
}


def register() -> list[int]:
    """Add the missing transaction APIs to APIS; the keys added."""
    added = []
    for key, (request, response) in _MESSAGES.items():
        if key not in api.APIS:
            valid = request.SCHEMA.valid
            api.APIS[key] = api.Api(key, valid.low, valid.high, request, response)  # type: ignore[arg-type]
            added.append(key)
    return added
