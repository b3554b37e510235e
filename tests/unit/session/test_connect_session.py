"""`staticmq_spark.session.connect` and `activate_in_thread`: which builders make a Spark Connect
session (the way pyspark's `Builder.getOrCreate` decides), `configure_spark(delta=True)` refused on
a running Connect server, registration over Connect, and the thread fix doing nothing there.
No session is started: pyspark's builders only collect options until `getOrCreate`."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import SparkSession

from staticmq_spark import activate_in_thread
from staticmq_spark.data_source import StaticMQDataSource
from staticmq_spark.errors import UnsupportedOperationError
from staticmq_spark.session import configure as spark_session
from staticmq_spark.session.connect import (
    LOCAL,
    check_connect_builder,
    connect_target,
    is_connect_session,
    register_over_connect,
)


class ConnectBuilder:
    """Stands for pyspark.sql.connect.session.SparkSession.Builder (its class lives there)."""

    __module__ = "pyspark.sql.connect.session"

    def __init__(self, **options: str) -> None:
        self._options = dict(options)


class ConnectSession:
    __module__ = "pyspark.sql.connect.session"

    def __init__(self) -> None:
        self.registered: list[Any] = []
        self.dataSource = self

    def register(self, data_source: Any) -> None:
        self.registered.append(data_source)

    def __getattr__(self, name: str) -> Any:  # as pyspark's Connect session: no JVM attributes
        raise AttributeError(f"[JVM_ATTRIBUTE_NOT_SUPPORTED] Attribute `{name}` is not supported in Spark Connect")


def test_a_classic_builder_makes_no_connect_session() -> None:
    assert connect_target(SparkSession.builder.master("local[2]"), {}) is None
    assert connect_target(SparkSession.builder.master("local[2]").config("spark.api.mode", "classic"), {}) is None


def test_a_remote_address_is_a_running_server_and_a_local_remote_a_server_started_here() -> None:
    assert connect_target(SparkSession.builder.remote("sc://10.0.0.7:15002"), {}) == "sc://10.0.0.7:15002"
    assert connect_target(SparkSession.builder.remote("local[2]"), {}) == LOCAL
    assert connect_target(SparkSession.builder.master("local[2]"), {"SPARK_REMOTE": "sc://h:1"}) == "sc://h:1"
    assert connect_target(SparkSession.builder.config("spark.api.mode", "connect").master("local[1]"), {}) == LOCAL
    assert connect_target(SparkSession.builder.master("local[1]"), {"SPARK_API_MODE": "connect"}) == LOCAL


def test_a_connect_session_made_earlier_in_the_process_makes_the_next_one_connect_too() -> None:
    assert connect_target(SparkSession.builder, {"SPARK_CONNECT_MODE_ENABLED": "1"}) == "sc://localhost"
    local_started = {"SPARK_CONNECT_MODE_ENABLED": "1", "SPARK_LOCAL_REMOTE": "1"}
    assert connect_target(SparkSession.builder.remote("local[2]"), local_started) == "sc://localhost"


def test_a_connect_builder_is_connect_whatever_its_options() -> None:
    assert connect_target(ConnectBuilder(), {}) == "sc://localhost"
    assert connect_target(ConnectBuilder(**{"spark.remote": "sc://h:2"}), {}) == "sc://h:2"
    assert connect_target(ConnectBuilder(), {"SPARK_REMOTE": "sc://h:3"}) == "sc://h:3"


def test_delta_is_refused_on_a_running_connect_server_with_what_to_do_instead() -> None:
    with pytest.raises(UnsupportedOperationError) as refused:
        check_connect_builder(SparkSession.builder.remote("sc://10.0.0.7:15002"), delta=True)
    message = str(refused.value)
    assert "sc://10.0.0.7:15002" in message
    assert "Start the Connect server with Delta Lake" in message
    assert "without delta=True" in message
    for fine in (SparkSession.builder.remote("local[2]"), SparkSession.builder.master("local[2]")):
        check_connect_builder(fine, delta=True)
    check_connect_builder(SparkSession.builder.remote("sc://10.0.0.7:15002"), delta=False)


def test_sessions_are_told_apart_by_their_class() -> None:
    assert is_connect_session(ConnectSession())
    assert not is_connect_session(object())


def test_registration_over_connect_sends_the_data_source_class_and_nothing_of_the_jvm() -> None:
    session = ConnectSession()
    assert register_over_connect(session) is session
    assert session.registered == [StaticMQDataSource]


def test_activate_in_thread_does_nothing_on_a_connect_session() -> None:
    activate_in_thread(ConnectSession())  # would raise on any JVM attribute


def test_activate_in_thread_sets_the_jvm_threads_active_session_of_a_classic_session() -> None:
    calls: list[tuple[str, Any]] = []

    class JvmSessionClass:
        @staticmethod
        def setActiveSession(session: Any) -> None:
            calls.append(("classic", session))

    class Jvm:
        SparkSession = JvmSessionClass

    class Classic:
        _jvm = Jvm()
        _jsparkSession = "the JVM session"

        @staticmethod
        def _get_j_spark_session_class(jvm: Any) -> Any:
            assert isinstance(jvm, Jvm)
            return JvmSessionClass

    class ClassicWithoutAccessor:  # a pyspark without pyspark 4's accessor
        _jvm = Jvm()
        _jsparkSession = "another JVM session"

    activate_in_thread(Classic())
    activate_in_thread(ClassicWithoutAccessor())
    assert calls == [("classic", "the JVM session"), ("classic", "another JVM session")]


def test_configure_spark_refuses_delta_on_a_running_connect_server_before_fetching_any_jar(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_fetch(*args: object, **kwargs: object) -> None:
        raise AssertionError("configure_spark fetched Delta's jars for a Connect server")

    monkeypatch.setattr(spark_session, "delta_jars", no_fetch)
    with pytest.raises(UnsupportedOperationError, match="without delta=True"):
        spark_session.configure_spark(SparkSession.builder.remote("sc://10.0.0.7:15002"), delta=True)


def test_registration_over_connect_keeps_the_servers_own_where_spark_refuses_to_replace_it() -> None:
    class Refusing(ConnectSession):
        def register(self, data_source: Any) -> None:
            raise RuntimeError("[DATA_SOURCE_ALREADY_EXISTS] Data source 'staticmq' already exists.")

    class Broken(ConnectSession):
        def register(self, data_source: Any) -> None:
            raise RuntimeError("[CONNECT] the server went away")

    session = Refusing()
    assert register_over_connect(session) is session
    with pytest.raises(RuntimeError, match="went away"):
        register_over_connect(Broken())
