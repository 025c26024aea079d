"""Topic-level configs: validation names the bad key, overrides reach the log and the ISR rule."""

from __future__ import annotations

import pytest

from epochlog.broker.isr_rules import ReplicationSettings, replication_settings_for
from epochlog.config.topic import (
    TopicConfigError,
    log_config_for,
    validate_topic_configs,
)
from epochlog.storage.config import LogConfig


def test_known_configs_pass_and_apply():
    configs = {
        "segment.bytes": "1048576",
        "retention.ms": "60000",
        "min.insync.replicas": "2",
        "unclean.leader.election.enable": "TRUE",
        "cleanup.policy": "delete",
    }
    validate_topic_configs(configs)
    log_config = log_config_for(LogConfig(), configs)
    assert log_config.segment_bytes == 1048576 and log_config.retention_ms == 60000
    assert replication_settings_for(ReplicationSettings(), configs).min_insync_replicas == 2
    assert log_config_for(LogConfig(), {}) == LogConfig()
    assert replication_settings_for(ReplicationSettings(), {}) == ReplicationSettings()


def test_compaction_configs_reach_the_log_config():
    configs = {
        "cleanup.policy": "delete, compact",
        "min.cleanable.dirty.ratio": "0.1",
        "min.compaction.lag.ms": "1000",
        "max.compaction.lag.ms": "60000",
        "delete.retention.ms": "5000",
    }
    validate_topic_configs(configs)
    config = log_config_for(LogConfig(), configs)
    assert config.compact and config.delete and config.cleanup_policy == "compact,delete"
    assert config.min_cleanable_dirty_ratio == 0.1
    assert (config.min_compaction_lag_ms, config.max_compaction_lag_ms) == (1000, 60000)
    assert config.delete_retention_ms == 5000
    compact_only = log_config_for(LogConfig(), {"cleanup.policy": "compact"})
    assert compact_only.compact and not compact_only.delete
    assert not LogConfig().compact


@pytest.mark.parametrize(
    ("configs", "named"),
    [
        ({"segment.byte": "1"}, "'segment.byte'"),
        ({"retention.ms": "soon"}, "retention.ms"),
        ({"min.insync.replicas": "0"}, "min.insync.replicas"),
        ({"min.insync.replicas": "two"}, "min.insync.replicas"),
        ({"unclean.leader.election.enable": "yes"}, "unclean.leader.election.enable"),
        ({"cleanup.policy": "compacted"}, "cleanup.policy"),
        ({"cleanup.policy": "compact,,delete"}, "cleanup.policy"),
        ({"min.cleanable.dirty.ratio": "1.5"}, "min.cleanable.dirty.ratio"),
        ({"min.cleanable.dirty.ratio": "half"}, "min.cleanable.dirty.ratio"),
        ({"delete.retention.ms": "-1"}, "delete.retention.ms"),
        ({"retention.bytes": None}, "retention.bytes"),
    ],
)
def test_a_bad_config_is_refused_naming_its_key(configs, named):
    with pytest.raises(TopicConfigError, match=named.replace(".", r"\.")):
        validate_topic_configs(configs)
