"""The source's Arrow schema is pyspark's own Arrow form of its Spark schema, on whichever pyspark
runs (4.0/4.1 spell the time zone `timestamp_utc=`, 4.2 and later `timezone=`)."""

from __future__ import annotations

import inspect

import pytest
from pyspark.sql.pandas.types import to_arrow_schema

from staticmq_spark.source.schema import arrow_schema, spark_schema


def pysparks_arrow_schema(include_properties: bool) -> object:
    if "timezone" in inspect.signature(to_arrow_schema).parameters:
        return to_arrow_schema(spark_schema(include_properties), timezone="UTC")
    return to_arrow_schema(spark_schema(include_properties), timestamp_utc=True)


@pytest.mark.parametrize("include_properties", [True, False])
def test_the_arrow_schema_is_pysparks_arrow_form_of_the_spark_schema(include_properties: bool) -> None:
    ours = arrow_schema(include_properties)
    theirs = pysparks_arrow_schema(include_properties)
    assert ours.equals(theirs, check_metadata=True), f"{ours}\n!=\n{theirs}"
