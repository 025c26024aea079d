"""The few broker metrics the console shows, read from a broker's Prometheus endpoint.

The console does not chart anything (Grafana does, over the same endpoints); beside each broker
it shows a handful of values named as the Prometheus JMX exporter names Kafka's JMX metrics, so
they mean what they mean on a Kafka dashboard. Where a broker's endpoint is comes from the
command line (`--metrics-url ID=URL`, or `--metrics-port` on every broker's host). `summarise`
is pure: exposition text in, the values out (summed over labels; None for a metric not
exported); `metrics_url` decides the address.
"""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client.parser import text_string_to_metric_families

# label shown -> the sample name (counters carry `_total`, as prometheus_client exposes them)
SHOWN: dict[str, str] = {
    "messages in": "kafka_server_brokertopicmetrics_messagesin_total",
    "bytes in": "kafka_server_brokertopicmetrics_bytesin_total",
    "bytes out": "kafka_server_brokertopicmetrics_bytesout_total",
    "under-replicated": "kafka_server_replicamanager_underreplicatedpartitions",
    "active controller": "kafka_controller_kafkacontroller_activecontrollercount",
}


class MetricsTextError(ValueError):
    """The endpoint's answer is not Prometheus exposition text."""


def summarise(text: str) -> dict[str, float | None]:
    """Each shown metric's value summed over its labels; None when the broker exports none."""
    totals: dict[str, float] = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                totals[sample.name] = totals.get(sample.name, 0.0) + float(sample.value)
    except ValueError as exc:
        raise MetricsTextError(f"not Prometheus exposition text: {exc}") from None
    return {label: totals.get(name) for label, name in SHOWN.items()}


def metrics_url(broker_id: int, host: str, urls: Mapping[int, str], port: int | None) -> str | None:
    """The broker's endpoint: given for it, else `port` on its host, else None (unknown)."""
    if broker_id in urls:
        return urls[broker_id]
    if port is not None:
        return f"http://{host}:{port}/metrics"
    return None


def parse_metrics_urls(items: list[str]) -> dict[int, str]:
    """`--metrics-url ID=URL` arguments into a map; a malformed one raises ValueError naming it."""
    urls: dict[int, str] = {}
    for item in items:
        broker, sep, url = item.partition("=")
        if not sep or not broker.strip().isdigit() or not url.startswith(("http://", "https://")):
            raise ValueError(
                f"--metrics-url wants BROKER_ID=http://HOST:PORT/metrics, got {item!r}"
            )
        urls[int(broker)] = url
    return urls
