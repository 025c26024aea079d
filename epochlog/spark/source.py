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
    EXACTLY_ONCE,
    parse_bool,
    parse_sink_options,
    parse_source_options,
)
from epochlog.spark.worker_interpreter import require_worker_modules


def _columns(schema: StructType) -> dict[str, str]:
    return {f.name: f.dataType.simpleString() for f in schema.fields}


class EpochlogDataSource(DataSource):
    """format("epochlog"): batch and streaming reads and writes of an epochlog cluster."""

    @classmethod
    def name(cls) -> str:
        return "epochlog"

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

        return EpochlogBatchReader(parse_source_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        require_worker_modules()  # a worker without pyarrow: say what to set
        from epochlog.spark.reader import EpochlogStreamReader

        return EpochlogStreamReader(parse_source_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        require_worker_modules()  # a worker without pyarrow: say what to set
        from epochlog.spark.writer import EpochlogBatchWriter

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
