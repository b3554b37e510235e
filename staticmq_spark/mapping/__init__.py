"""The pure static-topic math shared by broker, admin and the Spark driver: mapping items and
their JSON form, the mapping rules, planning of creates and remaps, the global consistency
check, resolution of logic offset ranges to physical segments, and views of brokers' states."""

from staticmq_spark.mapping.consistency import ConsistencyReport, check_consistency
from staticmq_spark.mapping.items import UNDECIDED, Chain, MappingItem, TopicQueueMapping
from staticmq_spark.mapping.planning import (
    RemapSteps,
    copies_for,
    drop_expired,
    leaders_of,
    new_items,
    plan_allocation,
    plan_remap,
    plan_remap_steps,
    settled_chain,
)
from staticmq_spark.mapping.rules import (
    check_transition,
    first_decided,
    leader,
    locate,
    next_decided,
    next_epoch,
    second_leader,
    settle_logic_offset,
    validate_chain,
    validate_mapping,
)
from staticmq_spark.mapping.segments import ResolvedRanges, Segment, SegmentTable
from staticmq_spark.mapping.views import (
    BrokerState,
    PhysicalBounds,
    chain_lag,
    check_states,
    is_static_anywhere,
    logic_bounds,
    segment_rows,
)

__all__ = [
    "UNDECIDED",
    "BrokerState",
    "Chain",
    "ConsistencyReport",
    "MappingItem",
    "PhysicalBounds",
    "RemapSteps",
    "ResolvedRanges",
    "Segment",
    "SegmentTable",
    "TopicQueueMapping",
    "chain_lag",
    "check_consistency",
    "check_states",
    "check_transition",
    "copies_for",
    "drop_expired",
    "first_decided",
    "is_static_anywhere",
    "leader",
    "leaders_of",
    "locate",
    "logic_bounds",
    "new_items",
    "next_decided",
    "next_epoch",
    "plan_allocation",
    "plan_remap",
    "plan_remap_steps",
    "second_leader",
    "segment_rows",
    "settle_logic_offset",
    "settled_chain",
    "validate_chain",
    "validate_mapping",
]
