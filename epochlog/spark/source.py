"""The PySpark data source `epochlog`: Spark's Kafka source and sink, for an epochlog cluster.

    spark.dataSource.register(EpochlogDataSource)        # or epochlog.spark.register(spark)
    df = (spark.readStream.format("epochlog")
          .option("bootstrap.servers", "host:9092").option("subscribe", "clicks").load())
    df.writeStream.format("epochlog").option("topic", "out")
      .option("checkpointLocation", "/ckpt").start()

Options are parsed on the driver (`options`), so a bad one fails before any task runs. The
readers are in `reader`, the at-least-once writers in `writer` and the exactly-once streaming
writer (`deliveryGuarantee=exactly-once`) in `exactly_once`.
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from epochlog.spark.options import (
    DEFAULT_NETWORK_TIMEOUT_MS,
    EXACTLY_ONCE,
    OptionError,
    SourceOptions,
    parse_bool,
    parse_sink_options,
    parse_source_options,
)
from epochlog.spark.worker_interpreter import require_worker_modules

_SOURCE_SCHEMA = (
    "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
    "timestamp:timestamp,timestampType:int{headers}>"
)
_HEADERS = ",headers:array<struct<key:string,value:binary>>"


def _columns(schema: StructType) -> dict[str, str]:
    return {f.name: f.dataType.simpleString() for f in schema.fields}


def check_source_schema(schema: StructType, include_headers: bool) -> None:
    """Spark's Kafka source has a fixed schema: a user `.schema(...)` other than it is refused
    (pyspark hands the reader the user's schema in place of ours)."""
    expected = _SOURCE_SCHEMA.format(headers=_HEADERS if include_headers else "")
    if schema.simpleString() != expected:
        raise OptionError(
            "schema",
            "the epochlog source has a fixed schema and cannot be set with a custom one "
            f"(given {schema.simpleString()})",
        )


class EpochlogDataSource(DataSource):
    """format("epochlog"): batch and streaming reads and writes of an epochlog cluster."""

    # spark.network.timeout, kafkaConsumer.pollTimeoutMs's default; `register` sets it from
    # the session (a data source sees only its options).
    network_timeout_ms: int = DEFAULT_NETWORK_TIMEOUT_MS

    @classmethod
    def name(cls) -> str:
        return "epochlog"

    def _source_options(self, schema: StructType, *, streaming: bool) -> SourceOptions:
        options = parse_source_options(
            self.options, streaming=streaming, network_timeout_ms=self.network_timeout_ms
        )
        check_source_schema(schema, options.include_headers)
        return options

    def schema(self) -> str:
        require_worker_modules()  # a worker without pyarrow: say what to set
        # Imported here, as the readers and writers are: unpickling this class (in every Python
        # process Spark starts for the source) imports this module, so it stays light.
        from epochlog.spark.rows import source_schema_ddl

        return source_schema_ddl(
            parse_bool("includeHeaders", self.options.get("includeheaders", "false"))
        )

    def reader(self, schema: StructType) -> DataSourceReader:
        require_worker_modules()  # a worker without pyarrow: say what to set
        from epochlog.spark.reader import EpochlogBatchReader

        return EpochlogBatchReader(self._source_options(schema, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        require_worker_modules()  # a worker without pyarrow: say what to set
        from epochlog.spark.reader import EpochlogStreamReader

        return EpochlogStreamReader(self._source_options(schema, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        require_worker_modules()  # a worker without pyarrow: say what to set
        from epochlog.spark.writer import EpochlogBatchWriter

        if overwrite:
            raise OptionError(
                "mode",
                "save mode Overwrite is not allowed for epochlog (as for Kafka); allowed save "
                "modes are Append and ErrorIfExists (the default)",
            )
        return EpochlogBatchWriter(
            parse_sink_options(self.options, _columns(schema), streaming=False)
        )

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        require_worker_modules()  # a worker without pyarrow: say what to set
        options = parse_sink_options(self.options, _columns(schema), streaming=True)
        if options.delivery_guarantee == EXACTLY_ONCE:
            from epochlog.spark.exactly_once_writer import ExactlyOnceStreamWriter

            return ExactlyOnceStreamWriter(options)
        from epochlog.spark.writer import EpochlogStreamWriter

        return EpochlogStreamWriter(options)
