"""configure_spark: Delta Lake's build for the running Spark, Spark's AvailableNow wrapper where needed, and
Unix domain sockets between the JVM and its Python workers."""

from __future__ import annotations

import pyspark
import pytest

from staticmq_spark.session.configure import NoDeltaForThisSpark, delta_package, running_spark_binary


@pytest.mark.parametrize("spark", ["4.0", "4.1", "4.2"])
def test_delta_is_the_build_for_the_spark_it_runs_on(spark: str) -> None:
    assert delta_package(spark) == f"io.delta:delta-spark_{spark}_2.13:4.4.0"


def test_delta_for_a_spark_without_a_delta_release_is_refused_naming_the_ones_that_have_one() -> None:
    with pytest.raises(NoDeltaForThisSpark, match=r"no release for Spark 4\.3.*4\.0, 4\.1, 4\.2"):
        delta_package("4.3")


def test_the_running_spark_binary_is_pysparks_major_and_minor() -> None:
    assert running_spark_binary() == ".".join(pyspark.__version__.split(".")[:2])


def test_configure_spark_turns_on_the_available_now_wrapper_where_sources_have_no_admission_control() -> None:
    from pyspark.sql import SparkSession

    from staticmq_spark import configure_spark
    from staticmq_spark.session.configure import AVAILABLE_NOW_WRAPPER
    from staticmq_spark.session.features import AVAILABLE_NOW_SPLITS

    options = configure_spark(SparkSession.builder)._builder._options
    assert (options.get(AVAILABLE_NOW_WRAPPER) == "true") is (not AVAILABLE_NOW_SPLITS)
    kept = configure_spark(SparkSession.builder.config(AVAILABLE_NOW_WRAPPER, "false"))._builder._options
    assert kept[AVAILABLE_NOW_WRAPPER] == "false", "a setting of the caller's stays"


def test_configure_spark_has_spark_talk_to_its_python_workers_over_unix_domain_sockets() -> None:
    from pyspark.sql import SparkSession

    from staticmq_spark import configure_spark
    from staticmq_spark.session.configure import UNIX_DOMAIN_SOCKETS

    assert configure_spark(SparkSession.builder)._builder._options[UNIX_DOMAIN_SOCKETS] == "true"
    kept = configure_spark(SparkSession.builder.config(UNIX_DOMAIN_SOCKETS, "false"))._builder._options
    assert kept[UNIX_DOMAIN_SOCKETS] == "false", "a setting of the caller's stays"
