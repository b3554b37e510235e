"""The `staticmq` Python data source: readers for spark.read / spark.readStream and writers for
df.write / df.writeStream, registered by name (and found automatically through the top-level
`pyspark_staticmq` module once the package is installed).

Each side is imported when Spark asks for it: pyspark starts a Python process per streaming query
for the source's driver side (and others to plan reads and writes), and one that plans a stream's
reads never needs the sink's modules (nor the reverse)."""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from staticmq_spark.errors import InvalidOptionError
from staticmq_spark.source.schema import spark_schema


class StaticMQDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "staticmq"

    def schema(self) -> StructType:
        include = str(self.options.get("includeProperties", "true")).strip().lower() != "false"
        return spark_schema(include)

    def reader(self, schema: StructType) -> DataSourceReader:
        from staticmq_spark.source.batch_reader import StaticMQBatchReader
        from staticmq_spark.source.options import parse_source_options

        return StaticMQBatchReader(parse_source_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from staticmq_spark.source.options import parse_source_options

        opts = parse_source_options(self.options, streaming=True)
        if opts.driver_read_max_messages:
            from staticmq_spark.source.driver_read import DriverReadStreamReader

            return DriverReadStreamReader(opts)
        from staticmq_spark.source.stream_reader import StaticMQStreamReader

        return StaticMQStreamReader(opts)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from staticmq_spark.sink.options import check_input_schema, parse_sink_options
        from staticmq_spark.sink.writer import StaticMQBatchWriter

        if overwrite:
            raise InvalidOptionError("the staticmq sink only appends: use mode('append'), not overwrite")
        check_input_schema(schema)
        return StaticMQBatchWriter(parse_sink_options(self.options))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from staticmq_spark.sink.options import check_input_schema, parse_sink_options
        from staticmq_spark.sink.writer import StaticMQStreamWriter

        check_input_schema(schema)
        return StaticMQStreamWriter(parse_sink_options(self.options))  # type: ignore[return-value]
