"""The consumer group a streaming source commits its progress to (kafka.group.id or
groupIdPrefix), so `epochlog groups describe <group>` shows a query's lag.

Spark's own Kafka source commits nothing; here, after Spark has committed a micro-batch
(`DataSourceStreamReader.commit`), its end offsets are committed to the group with an
OffsetCommit outside any generation (as a consumer that assigns its partitions itself). The
group is progress reporting only: the query restarts from Spark's checkpoint, never from the
group. A failed commit is logged, not raised: it must not fail a query whose batch is done.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from epochlog.client.config import Role
from epochlog.client.sync import Consumer
from epochlog.spark.offsets import TP
from epochlog.spark.options import role_settings

log = logging.getLogger(__name__)

COMMIT_TIMEOUT_S = 30.0


class ProgressGroup:
    """Commits a query's offsets to one group; the consumer is made on first use."""

    def __init__(self, client: Mapping[str, Any], group_id: str) -> None:
        self.group_id = group_id
        self._settings = dict(role_settings(client, Role.CONSUMER))
        self._settings.update({"group.id": group_id, "enable.auto.commit": "false"})
        self._consumer: Consumer | None = None

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_consumer"] = None  # clients stay in the process that made them
        return state

    def commit(self, offsets: Mapping[TP, int]) -> bool:
        """Commit `offsets`; whether it worked (a failure is logged)."""
        if not offsets:
            return True
        try:
            if self._consumer is None:
                self._consumer = Consumer(self._settings)
            self._consumer.commit(dict(offsets), timeout=COMMIT_TIMEOUT_S)
            return True
        except Exception as exc:  # progress reporting must never fail the query
            log.warning("committing progress to group %s failed: %r", self.group_id, exc)
            self.close()
            return False

    def close(self) -> None:
        if self._consumer is not None:
            consumer, self._consumer = self._consumer, None
            try:
                consumer.close()
            except Exception as exc:  # closing a broken client; nothing more to do
                log.debug("closing the progress consumer: %r", exc)
