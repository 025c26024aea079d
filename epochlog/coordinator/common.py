"""What the group and the transaction coordinators' runtimes share (they never import each
other): the encoded record they append and read, and the error that sends a client to look for
its coordinator again."""

from __future__ import annotations

from epochlog.protocol.errors import ErrorCode

EncodedRecord = tuple[bytes, bytes | None]  # key, value (None: a tombstone)


class CoordinatorError(Exception):
    """The request cannot be served here now (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
    COORDINATOR_NOT_AVAILABLE): the client finds the coordinator again and retries."""

    def __init__(self, error: ErrorCode, message: str = "") -> None:
        super().__init__(message or error.name)
        self.error = error
