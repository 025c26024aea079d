"""Metrics of a broker process, served to Prometheus (issue 22).

The hot path only counts: `RequestStats` (per API: requests and the phases of each request's
time) and `TopicTraffic` (messages and bytes in and out per topic) are plain objects whose
`record_*` methods add to ints and bucket arrays; `ProcessStats` (`STATS`) counts the rarer
events of the process (ISR changes, fenced requests, controller events, ZooKeeper requests, log
flushes). Everything that is a gauge (under-replicated partitions, log sizes, groups, lag) is
computed when Prometheus scrapes, from a `BrokerView` that the node assembles
(`epochlog.node.metrics`), by `collector.BrokerCollector`. `endpoint` serves the text format on
the broker's event loop, so a scrape reads the broker's state between two steps of the loop,
never while it changes. Names follow Kafka's JMX metrics as the Prometheus JMX exporter's
common Kafka rules render them; docs/metrics.md lists them.
"""
