"""Topic and group names: everything that could escape a data directory is refused."""

from __future__ import annotations

import pytest

from staticmq_spark.errors import InvalidArgumentError, InvalidTopicNameError
from staticmq_spark.protocol.topics.names import retry_topic, validate_broker_name, validate_group, validate_topic


@pytest.mark.parametrize("name", ["", "../etc", "a/b", "a.b", "x" * 128, "sp ace", "tab\t", "%RETRY%g_t", "rmq_sys_x"])
def test_bad_topic_names_are_refused(name: str) -> None:
    with pytest.raises(InvalidTopicNameError):
        validate_topic(name)


def test_system_topics_are_allowed_internally() -> None:
    assert validate_topic(retry_topic("g", "t"), allow_system=True) == "%RETRY%g_t"


def test_good_names_pass() -> None:
    assert validate_topic("orders_v2-eu|x") == "orders_v2-eu|x"


def test_bad_group_is_refused() -> None:
    with pytest.raises(InvalidArgumentError):
        validate_group("a/b")


@pytest.mark.parametrize("name", ["orders\n", "orders\r\n", "\norders"])
def test_a_name_with_a_newline_is_refused_even_at_the_end(name: str) -> None:
    with pytest.raises(InvalidTopicNameError):
        validate_topic(name)
    with pytest.raises(InvalidArgumentError):
        validate_group(name)
    with pytest.raises(InvalidArgumentError):
        validate_broker_name(name)


def test_a_huge_name_is_echoed_cut_short() -> None:
    for bad in ("x" * 10_000, "y" * 9_000 + "/"):
        with pytest.raises(InvalidTopicNameError) as info:
            validate_topic(bad)
        assert len(str(info.value)) < 300 and "characters" in str(info.value)
    with pytest.raises(InvalidArgumentError) as group_info:
        validate_group("g" * 10_000)
    assert len(str(group_info.value)) < 300
