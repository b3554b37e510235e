"""Mapping items, JSON, offsets conversions and the rules a broker enforces on every write."""

from __future__ import annotations

import pytest

from staticmq_spark.errors import MappingRejectedError
from staticmq_spark.mapping import (
    UNDECIDED,
    MappingItem,
    TopicQueueMapping,
    check_transition,
    locate,
    next_decided,
    next_epoch,
    settle_logic_offset,
    validate_chain,
)


def item(bname: str = "b0", queue: int = 0, gen: int = 0, logic: int = 0, start: int = 0, end: int = -1) -> MappingItem:
    return MappingItem(queue=queue, bname=bname, gen=gen, logic_offset=logic, start_offset=start, end_offset=end)


def mapping(bname: str, epoch: int, hosted: dict, total: int = 4) -> TopicQueueMapping:
    return TopicQueueMapping("t", bname, epoch, total, hosted)


CHAIN = (item("b0", 0, 0, 0, 0, 10), item("b1", 0, 1, 10_000, 0, 5), item("b2", 3, 2, 20_000, 0))


def test_offset_delta_converts_both_ways() -> None:
    it = item("b1", 0, 1, 10_000, 0)
    assert it.offset_delta == 10_000
    assert it.to_logic(3) == 10_003 and it.to_physical(10_003) == 3


def test_undecided_item_never_yields_an_offset() -> None:
    with pytest.raises(MappingRejectedError, match="no logic offset"):
        _ = item(logic=UNDECIDED).to_logic(0)


def test_logic_end_of_fenced_and_open_items() -> None:
    assert CHAIN[0].logic_end() == 10
    assert CHAIN[2].logic_end(physical_max=7) == 20_007
    with pytest.raises(MappingRejectedError, match="still leads"):
        CHAIN[2].logic_end()


def test_mapping_json_round_trip() -> None:
    m = mapping("b2", 1234, {0: CHAIN, 3: (item("b2", 1, 0),)})
    again = TopicQueueMapping.from_json(m.to_json())
    assert again == m
    assert again.led_queues() == [0, 3]


def test_malformed_json_is_refused() -> None:
    with pytest.raises(MappingRejectedError, match="malformed"):
        TopicQueueMapping.from_json('{"topic": "t"}')


def test_locate_finds_the_segment_holding_an_offset() -> None:
    assert locate(CHAIN, 0) == 0
    assert locate(CHAIN, 9) == 0
    assert locate(CHAIN, 5_000) == 0  # the jump after a remap still belongs to the older segment
    assert locate(CHAIN, 10_000) == 1
    assert locate(CHAIN, 25_000) == 2
    assert locate((item("b1", 0, 1, 500),), 10) == -1


def test_locate_skips_an_undecided_leader() -> None:
    chain = (item("b0", 0, 0, 0), item("b1", 0, 1, UNDECIDED))
    assert locate(chain, 10**9) == 0
    assert next_decided(chain, 0) is None


def test_epoch_is_old_plus_1000_or_now() -> None:
    assert next_epoch(5_000, 100) == 6_000
    assert next_epoch(5_000, 1_700_000_000_000) == 1_700_000_000_000


@pytest.mark.parametrize(
    ("end", "expected"),
    [(0, 10_000), (10, 10_000), (4_999, 10_000), (5_000, 20_000), (5_001, 20_000), (15_000, 30_000), (19_999, 30_000)],
)
def test_settle_offset_rounds_up_like_rocketmq_block_seq_round_up(end: int, expected: int) -> None:
    assert settle_logic_offset(end) == expected
    assert settle_logic_offset(end) - end >= 5_000
    num, left = divmod(end, 10_000)  # TopicQueueMappingUtils.blockSeqRoundUp(end, 10000)
    assert settle_logic_offset(end) == (num + 1 if left < 5_000 else num + 2) * 10_000


def test_valid_chain_passes() -> None:
    validate_chain("t", 0, CHAIN)
    validate_chain("t", 0, (*CHAIN, item("b0", 5, 3, UNDECIDED)))


@pytest.mark.parametrize(
    ("chain", "message"),
    [
        ((), "empty"),
        ((item(gen=1), item("b1", gen=1, logic=100)), "gens must strictly increase"),
        ((item(gen=0, logic=UNDECIDED), item("b1", gen=1, logic=100)), "only the last item"),
        ((item(gen=0, logic=100), item("b1", gen=1, logic=50)), "strictly increase"),
        ((item(gen=0, logic=0, end=200), item("b1", gen=1, logic=100)), "overlap"),
        ((item("b0", 0, 0, 0, 0, 5), item("b0", 0, 1, 100)), "two segments"),
        ((item(start=5, end=2),), "ends"),
    ],
)
def test_bad_chains_are_refused(chain: tuple, message: str) -> None:
    with pytest.raises(MappingRejectedError, match=message):
        validate_chain("t", 0, chain)


def test_physical_queue_shared_by_two_logic_queues_is_refused() -> None:
    m = mapping("b0", 1, {0: (item("b0", 1, 0),), 1: (item("b0", 1, 0),)})
    with pytest.raises(MappingRejectedError, match="used by logic queues"):
        check_transition(None, m, "b0")


def test_mapping_naming_another_broker_is_refused() -> None:
    with pytest.raises(MappingRejectedError, match="names broker 'b1'"):
        check_transition(None, mapping("b1", 1, {}), "b0")


def test_logic_queue_outside_total_is_refused() -> None:
    with pytest.raises(MappingRejectedError, match="outside"):
        check_transition(None, mapping("b0", 1, {7: (item(),)}, total=4), "b0")


def test_older_epoch_is_refused() -> None:
    with pytest.raises(MappingRejectedError, match="older than the stored epoch"):
        check_transition(mapping("b0", 10, {}), mapping("b0", 9, {}), "b0")


def test_identical_data_is_accepted_again() -> None:
    m = mapping("b1", 10, {0: CHAIN[:2]})
    check_transition(m, m, "b1")


def test_shrinking_total_is_refused() -> None:
    with pytest.raises(MappingRejectedError, match="cannot shrink"):
        check_transition(mapping("b0", 1, {}, total=8), mapping("b0", 2, {}, total=4), "b0")


def test_decided_logic_offset_never_changes() -> None:
    old = mapping("b1", 1, {0: (item("b0", 0, 0, 0, 0, 10), item("b1", 0, 1, 10_000))})
    new = mapping("b1", 1, {0: (item("b0", 0, 0, 0, 0, 10), item("b1", 0, 1, 20_000))})
    with pytest.raises(MappingRejectedError, match="cannot become"):
        check_transition(old, new, "b1")


def test_undecided_offset_may_be_settled_in_the_same_epoch() -> None:
    old = mapping("b1", 5, {0: (item("b0", 0, 0, 0), item("b1", 0, 1, UNDECIDED))})
    new = mapping("b1", 5, {0: (item("b0", 0, 0, 0, 0, 10), item("b1", 0, 1, 10_000))})
    check_transition(old, new, "b1")


def test_set_end_offset_never_changes() -> None:
    old = mapping("b1", 1, {0: (item("b0", 0, 0, 0, 0, 10), item("b1", 0, 1, 10_000))})
    new = mapping("b1", 2, {0: (item("b0", 0, 0, 0, 0, 12), item("b1", 0, 1, 10_000))})
    with pytest.raises(MappingRejectedError, match="end offset"):
        check_transition(old, new, "b1")


def test_physical_queue_of_a_gen_cannot_change() -> None:
    old = mapping("b0", 1, {0: (item("b0", 0, 0, 0),)})
    new = mapping("b0", 2, {0: (item("b0", 1, 0, 0),)})
    with pytest.raises(MappingRejectedError, match="physical queue"):
        check_transition(old, new, "b0")


def test_items_can_be_appended_and_dropped_from_the_front_but_not_the_middle() -> None:
    old = mapping("b2", 1, {0: CHAIN})
    check_transition(old, mapping("b2", 2, {0: CHAIN[1:]}), "b2")
    with pytest.raises(MappingRejectedError, match="middle"):
        check_transition(old, mapping("b2", 2, {0: (CHAIN[0], CHAIN[2])}), "b2")


def test_a_gen_that_was_never_stored_cannot_appear_below_the_newest() -> None:
    old = mapping("b2", 1, {0: CHAIN[1:]})
    with pytest.raises(MappingRejectedError, match="not in the stored chain"):
        check_transition(old, mapping("b2", 2, {0: (item("b9", 9, 0, 0, 0, 5), *CHAIN[1:])}), "b2")
