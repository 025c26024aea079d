"""Kafka's BrokerTopicMetrics per topic: messages and bytes in, bytes out.

As in Kafka: MessagesIn and BytesIn count what leaders append from producers (a duplicate
batch of an idempotent producer is not counted), BytesOut what consumers' fetches return and
ReplicationBytesOut what followers' fetches return. Bytes out are the record bytes of the
answer (the file slices sent), not the response's framing. A plain dict of small lists, so a
produce or fetch costs a dict lookup and a few additions per partition.
"""

from __future__ import annotations

MESSAGES_IN = 0
BYTES_IN = 1
BYTES_OUT = 2
REPLICATION_BYTES_OUT = 3


class TopicTraffic:
    """Counts per topic: [messages in, bytes in, bytes out, replication bytes out]."""

    def __init__(self) -> None:
        self.topics: dict[str, list[int]] = {}

    def _of(self, topic: str) -> list[int]:
        counts = self.topics.get(topic)
        if counts is None:
            counts = self.topics[topic] = [0, 0, 0, 0]
        return counts

    def record_in(self, topic: str, messages: int, size: int) -> None:
        counts = self._of(topic)
        counts[MESSAGES_IN] += messages
        counts[BYTES_IN] += size

    def record_out(self, topic: str, size: int, replication: bool) -> None:
        self._of(topic)[REPLICATION_BYTES_OUT if replication else BYTES_OUT] += size
