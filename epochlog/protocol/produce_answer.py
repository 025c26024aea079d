"""A ProduceResponse whose partitions all succeeded, encoded with precomputed layouts; sans-I/O.

Almost every Produce is answered with no error in any partition: then each partition is four
integers (index, base offset, log append time, log start offset) and the response's bytes are
fixed layouts around them. `ProduceAnswer` holds just those and encodes itself with one
`struct.pack` per partition and per topic, instead of building the generic message objects
and running the schema codec over them (ProduceResponse v3-11; the generic codec's bytes,
checked in tests/unit/test_produce_answer.py). Any error in any partition goes the generic way.

Layouts, by version: v3-4 index, error, base offset, log append time; v5-7 add the log start
offset; v8 adds an empty RecordErrors array (int32 0) and a null ErrorMessage (int16 -1); v9+
(flexible) use compact lengths (an empty array is 1, a null string 0) and an empty tagged-field
section (0) after each partition, each topic and the whole body (CurrentLeader and NodeEndpoints
are tagged fields left out at their defaults).
"""

from __future__ import annotations

import struct

from epochlog.protocol.varint import encode_uvarint

FIRST_FLEXIBLE_VERSION = 9

_INT32 = struct.Struct(">i")
_PARTITION_V3 = struct.Struct(">ihqq")  # index, error 0, base offset, log append time
_PARTITION_V5 = struct.Struct(">ihqqq")  # + log start offset
_PARTITION_V8 = struct.Struct(">ihqqqih")  # + RecordErrors [] and ErrorMessage null
_PARTITION_V9 = struct.Struct(">ihqqqBBB")  # compact: [] = 1, null = 0, no tags = 0

# (index, base offset, log append time, log start offset)
PartitionAnswer = tuple[int, int, int, int]


class ProduceAnswer:
    """The successful answer to a Produce: per topic, its partitions' offsets."""

    __slots__ = ("topics", "throttle_time_ms")

    def __init__(self, topics: list[tuple[str, list[PartitionAnswer]]]) -> None:
        self.topics = topics
        self.throttle_time_ms = 0

    def encode_body(self, version: int, out: bytearray) -> None:
        """Append the ProduceResponse body at `version` (3-11) to `out`."""
        if version < 3 or version > 11:
            raise ValueError(f"ProduceResponse has no version {version} (valid 3-11)")
        flexible = version >= FIRST_FLEXIBLE_VERSION
        topics = self.topics
        out += encode_uvarint(len(topics) + 1) if flexible else _INT32.pack(len(topics))
        for name, partitions in topics:
            raw = name.encode()
            if flexible:
                out += encode_uvarint(len(raw) + 1)
                out += raw
                out += encode_uvarint(len(partitions) + 1)
                pack = _PARTITION_V9.pack
                for index, base, append_time, start in partitions:
                    out += pack(index, 0, base, append_time, start, 1, 0, 0)
                out.append(0)  # the topic's tagged fields
            else:
                out += struct.pack(">h", len(raw))
                out += raw
                out += _INT32.pack(len(partitions))
                if version >= 8:
                    pack = _PARTITION_V8.pack
                    for index, base, append_time, start in partitions:
                        out += pack(index, 0, base, append_time, start, 0, -1)
                elif version >= 5:
                    pack = _PARTITION_V5.pack
                    for index, base, append_time, start in partitions:
                        out += pack(index, 0, base, append_time, start)
                else:
                    pack = _PARTITION_V3.pack
                    for index, base, append_time, _ in partitions:
                        out += pack(index, 0, base, append_time)
        out += _INT32.pack(self.throttle_time_ms)
        if flexible:
            out.append(0)  # the body's tagged fields
