# ruff: noqa: F811 - pytest fixtures imported from the fixture modules are parameters here
"""format("epochlog") over TLS (issue 21, item 5), with the options a Spark user writes for
Spark's Kafka source: `kafka.security.protocol=SSL` and Java's `kafka.ssl.truststore.*` /
`kafka.ssl.keystore.*` (PEM stores). Spark local mode: the driver and the executors read the
same files. A batch write then a batch read against a listener that requires a client
certificate (so every connection, the executors' fetch connections included, had to present
the keystore), an AvailableNow stream over the SSL listener with the truststore alone, and a
batch read over SASL_SSL with `kafka.sasl.mechanism` and Java's `kafka.sasl.jaas.config`.
"""

from __future__ import annotations

from pathlib import Path

from epochlog.client import Consumer, Producer
from epochlog.security.certs import CertificateAuthority, IssuedCertificate
from epochlog.testing.cluster import LocalCluster
from tests.integration.spark_fixtures import spark  # noqa: F401 - fixture
from tests.integration.tls_fixtures import (  # noqa: F401 - fixtures
    ca,
    client_cert,
    create_topic,
    plain_jaas_login,
    tls_cluster,
)


def truststore_options(cluster: LocalCluster, listener: str, ca: CertificateAuthority) -> dict:
    return {
        "kafka.bootstrap.servers": cluster.listener_bootstrap(listener),
        "kafka.security.protocol": "SSL",
        "kafka.ssl.truststore.location": str(ca.ca_file),
        "kafka.ssl.truststore.type": "PEM",
    }


def keystore_options(cluster: LocalCluster, ca: CertificateAuthority, cert: IssuedCertificate):
    return {
        **truststore_options(cluster, "MTLS", ca),
        "kafka.ssl.keystore.location": str(cert.keystore),
        "kafka.ssl.keystore.type": "PEM",
    }


def test_batch_write_then_read_with_a_client_certificate(
    spark, tls_cluster: LocalCluster, ca: CertificateAuthority, client_cert: IssuedCertificate
) -> None:
    topic = create_topic(tls_cluster, "spark-tls-batch", partitions=2)
    options = keystore_options(tls_cluster, ca, client_cert)
    rows = [(f"k{i}", f"v{i:03d}") for i in range(60)]
    (
        spark.createDataFrame(rows, "key string, value string")
        .write.format("epochlog")
        .options(**options)
        .option("topic", topic)
        .mode("append")
        .save()
    )
    read = (
        spark.read.format("epochlog")
        .options(**options)
        .option("subscribe", topic)
        .load()
        .selectExpr("CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value", "partition")
        .collect()
    )
    assert sorted((r.key, r.value) for r in read) == sorted(rows)
    assert {r.partition for r in read} == {0, 1}


def test_available_now_stream_over_ssl_with_the_truststore(
    spark, tls_cluster: LocalCluster, ca: CertificateAuthority, tmp_path: Path
) -> None:
    topic = create_topic(tls_cluster, "spark-tls-stream", partitions=2)
    sent = [f"s{i:03d}".encode() for i in range(40)]
    with Producer({"bootstrap.servers": tls_cluster.bootstrap_servers}) as producer:
        for future in [producer.send(topic, v, partition=i % 2) for i, v in enumerate(sent)]:
            future.result(60)
    out = create_topic(tls_cluster, "spark-tls-stream-out", partitions=1)
    options = truststore_options(tls_cluster, "SSL", ca)
    query = (
        spark.readStream.format("epochlog")
        .options(**options)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", 15)
        .load()
        .selectExpr("value")
        .writeStream.format("epochlog")
        .options(**options)
        .option("topic", out)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(180)
    assert query.exception() is None
    assert sum(p["numInputRows"] for p in query.recentProgress) == len(sent)
    assert len(query.recentProgress) >= 3  # 40 records at most 15 a batch
    with Consumer(
        {"bootstrap.servers": tls_cluster.bootstrap_servers, "auto.offset.reset": "earliest"}
    ) as consumer:
        consumer.assign([(out, 0)])
        got: list[bytes] = []
        for _ in range(200):
            got.extend(r.value for r in consumer.poll(200))
            if len(got) >= len(sent):
                break
    assert sorted(got) == sorted(sent)


def test_batch_read_over_sasl_ssl_with_a_jaas_config(
    spark, tls_cluster: LocalCluster, ca: CertificateAuthority
) -> None:
    topic = create_topic(tls_cluster, "spark-sasl-read", partitions=2)
    sent = [f"a{i:03d}".encode() for i in range(20)]
    with Producer({"bootstrap.servers": tls_cluster.bootstrap_servers}) as producer:
        for future in [producer.send(topic, v, partition=i % 2) for i, v in enumerate(sent)]:
            future.result(60)
    options = {
        **truststore_options(tls_cluster, "SASL_SSL", ca),
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "PLAIN",
        "kafka.sasl.jaas.config": plain_jaas_login("alice"),
    }
    rows = spark.read.format("epochlog").options(**options).option("subscribe", topic).load()
    assert sorted(r.value for r in rows.select("value").collect()) == sent
