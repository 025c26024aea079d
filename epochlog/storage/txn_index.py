"""The aborted-transaction index of a segment, `<base>.txnindex`, in Kafka's format.

Kafka's `TransactionIndex`: one 34-byte entry per aborted transaction whose ABORT marker sits in
the segment (`AbortedTxn`: version int16 = 0, producer id int64, first offset int64, last offset
int64 = the marker's offset, last stable offset int64 = the LSO when the marker was written),
big-endian, in marker order. A read_committed fetch lists the aborted transactions that overlap
the range it returns (`collect`), so the index of each segment from the one holding the fetch
offset is searched. The file is created with its first entry (a segment without aborts has none,
as in Kafka), truncated with the log, deleted with its segment.

Entries are mirrored in memory; the file is appended to and fsynced with its segment. A file
whose length is not a whole number of entries, or an entry of another version, is corrupt:
`sanity_check` reports it and the loader rebuilds the index by replaying the log.
"""

from __future__ import annotations

import contextlib
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from epochlog.storage.errors import CorruptIndexError

ABORTED_TXN_VERSION = 0
_ENTRY = struct.Struct(">hqqqq")
ABORTED_TXN_SIZE = _ENTRY.size  # 34


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """One entry of the aborted-transaction index (Kafka's `AbortedTxn`)."""

    producer_id: int
    first_offset: int
    last_offset: int  # the abort marker's offset
    last_stable_offset: int


def encode_aborted_txn(txn: AbortedTxn) -> bytes:
    return _ENTRY.pack(
        ABORTED_TXN_VERSION,
        txn.producer_id,
        txn.first_offset,
        txn.last_offset,
        txn.last_stable_offset,
    )


def decode_txn_index(data: bytes, name: str = "txnindex") -> list[AbortedTxn]:
    """The entries of a `.txnindex` file's bytes; CorruptIndexError names what is wrong."""
    if len(data) % ABORTED_TXN_SIZE:
        raise CorruptIndexError(
            f"{name}: {len(data)} bytes is not a whole number of {ABORTED_TXN_SIZE}-byte "
            "aborted-transaction entries"
        )
    entries: list[AbortedTxn] = []
    for position in range(0, len(data), ABORTED_TXN_SIZE):
        version, pid, first, last, lso = _ENTRY.unpack_from(data, position)
        if version != ABORTED_TXN_VERSION:
            raise CorruptIndexError(
                f"{name}: entry at byte {position} has version {version}, "
                f"expected {ABORTED_TXN_VERSION}"
            )
        entries.append(AbortedTxn(pid, first, last, lso))
    return entries


def collect_aborted(
    entries: list[AbortedTxn], start_offset: int, upper_bound: int
) -> list[AbortedTxn]:
    """The entries overlapping [start_offset, upper_bound): marker at or after the start,
    first offset below the bound (Kafka's `TransactionIndex.collectAbortedTxns`)."""
    return [t for t in entries if t.last_offset >= start_offset and t.first_offset < upper_bound]


class TransactionIndex:
    """`<base>.txnindex` (with the segment's file suffix while the cleaner builds one)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: list[AbortedTxn] = []
        self._unwritten = bytearray()  # appended, not yet in the file
        self._dirty = False
        self._load_problem: str | None = None
        if path.exists():
            try:
                self._entries = decode_txn_index(path.read_bytes(), str(path))
            except CorruptIndexError as exc:
                self._load_problem = str(exc)

    @property
    def entries(self) -> list[AbortedTxn]:
        return list(self._entries)

    def sanity_check(self) -> None:
        """Raise CorruptIndexError if the file did not parse when it was opened."""
        if self._load_problem is not None:
            raise CorruptIndexError(self._load_problem)

    @property
    def is_corrupt(self) -> bool:
        return self._load_problem is not None

    def append(self, txn: AbortedTxn) -> None:
        """Add an abort; markers come in offset order, so an older one is a caller's bug."""
        if self._entries and txn.last_offset <= self._entries[-1].last_offset:
            raise ValueError(
                f"{self.path}: aborted transaction with marker at {txn.last_offset} is not after "
                f"the last one, at {self._entries[-1].last_offset}"
            )
        self._entries.append(txn)
        self._unwritten += encode_aborted_txn(txn)
        self._dirty = True
        self.write_pending()  # aborts are rare: one write each, fsynced with the segment

    def collect(self, start_offset: int, upper_bound: int) -> list[AbortedTxn]:
        return collect_aborted(self._entries, start_offset, upper_bound)

    def truncate_to(self, offset: int) -> int:
        """Drop the entries whose marker is at or after `offset`; how many went. A corrupt
        index stays as it is, for the replay that rebuilds it (`reset`)."""
        if self._load_problem is not None:
            return 0
        kept = [t for t in self._entries if t.last_offset < offset]
        removed = len(self._entries) - len(kept)
        if removed:
            self._rewrite(kept)
        return removed

    def reset(self) -> None:
        """Forget every entry and remove the file (a rebuild follows)."""
        self._entries = []
        self._unwritten.clear()
        self._load_problem = None
        self._dirty = False
        self.path.unlink(missing_ok=True)

    def _rewrite(self, entries: list[AbortedTxn]) -> None:
        self._entries = list(entries)
        self._unwritten.clear()
        self._load_problem = None
        if not entries:
            self.path.unlink(missing_ok=True)
            self._dirty = False
            return
        self.path.write_bytes(b"".join(encode_aborted_txn(t) for t in entries))
        self._dirty = True

    def flush(self) -> None:
        """Write what was appended and fsync the file."""
        if not self._dirty:
            return
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            if self._unwritten:
                os.write(fd, bytes(self._unwritten))
                self._unwritten.clear()
            os.fsync(fd)
        finally:
            os.close(fd)
        self._dirty = False

    def write_pending(self) -> None:
        """Write what was appended without an fsync (a reader of the file sees it)."""
        if not self._unwritten:
            return
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, bytes(self._unwritten))
            self._unwritten.clear()
        finally:
            os.close(fd)

    def delete(self) -> None:
        self._entries = []
        self._unwritten.clear()
        self._dirty = False
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
