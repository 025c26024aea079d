"""What a transaction coordinator writes to its `__transaction_state` partition, as typed values.

The shard returns these; `record_codec.py` writes them in Kafka's TransactionLogKey/Value format.
A tombstone removes an expired transactional id.
"""

from __future__ import annotations

from dataclasses import dataclass

from epochlog.coordinator.transaction.state import TxnMetadata


@dataclass(frozen=True)
class TxnRecord:
    metadata: TxnMetadata


@dataclass(frozen=True)
class TxnTombstone:
    transactional_id: str


TransactionRecord = TxnRecord | TxnTombstone
