"""The rules a mapping must follow, checked by the broker on every write, and item lookups.

Rules of a chain (one logic queue): gens strictly increase; only the last item may be
undecided; decided logic offsets strictly increase and segments never overlap; a physical queue
is never used for two segments. Rules of a transition (old copy -> new copy on one broker): an
older epoch is refused; totalQueues never shrinks; a decided logic offset or a set end offset
never changes; items may only be appended (new gens) or dropped from the front (clean-up).
Writing identical data again is accepted.
"""

from __future__ import annotations

import itertools

from staticmq_spark.errors import MappingRejectedError
from staticmq_spark.mapping.items import Chain, MappingItem, TopicQueueMapping

EPOCH_STEP = 1000
REMAP_BLOCK = 10_000
REMAP_HEADROOM = 5_000


def next_epoch(old_epoch: int, now_ms: int) -> int:
    """Epoch of a new or updated mapping: max(old epoch + 1000, now in ms)."""
    return max(old_epoch + EPOCH_STEP, now_ms)


def settle_logic_offset(old_logic_end: int) -> int:
    """A new leader's logic offset: the smallest multiple of 10000 above the old leader's end plus
    5000 (so 0..4999 continues at 10000, 5000 at 20000): RocketMQ's
    `TopicQueueMappingUtils.blockSeqRoundUp(end, 10000)`, so both tools settle a remap alike."""
    return (old_logic_end + REMAP_HEADROOM) // REMAP_BLOCK * REMAP_BLOCK + REMAP_BLOCK


def leader(chain: Chain) -> MappingItem:
    return chain[-1]


def second_leader(chain: Chain) -> MappingItem | None:
    return chain[-2] if len(chain) > 1 else None


def locate(chain: Chain, logic_offset: int) -> int:
    """Index of the item holding `logic_offset`: the last decided item starting at or before it;
    -1 when the offset is before the first decided item."""
    found = -1
    for i, item in enumerate(chain):
        if item.decided and item.logic_offset <= logic_offset:
            found = i
        elif item.decided:
            break
    return found


def next_decided(chain: Chain, index: int) -> int | None:
    for j in range(index + 1, len(chain)):
        if chain[j].decided:
            return j
    return None


def first_decided(chain: Chain) -> int | None:
    return next_decided(chain, -1)


def validate_chain(topic: str, queue: int, chain: Chain) -> None:
    where = f"topic {topic!r} logic queue {queue}"
    if not chain:
        raise MappingRejectedError(f"{where}: an empty item list")
    for i, item in enumerate(chain):
        if item.gen < 0 or item.queue < 0 or item.start_offset < 0:
            raise MappingRejectedError(f"{where}: item {i} has a negative gen, queue or start offset")
        if item.end_offset != -1 and item.end_offset < item.start_offset:
            raise MappingRejectedError(f"{where}: item {i} ends ({item.end_offset}) before it starts")
        if not item.decided and i != len(chain) - 1:
            raise MappingRejectedError(f"{where}: only the last item may have logicOffset -1 (item {i} has)")
        if item.logic_offset < -1:
            raise MappingRejectedError(f"{where}: item {i} has logicOffset {item.logic_offset}")
    for i, (a, b) in enumerate(itertools.pairwise(chain)):
        if b.gen <= a.gen:
            raise MappingRejectedError(f"{where}: gens must strictly increase (item {i + 1}: {b.gen} after {a.gen})")
        if a.decided and b.decided:
            if b.logic_offset <= a.logic_offset:
                raise MappingRejectedError(
                    f"{where}: logic offsets must strictly increase (item {i + 1}: {b.logic_offset} "
                    f"after {a.logic_offset})"
                )
            if a.end_offset >= 0 and a.logic_end() > b.logic_offset:
                raise MappingRejectedError(
                    f"{where}: item {i} ends at logic offset {a.logic_end()}, past item {i + 1}'s "
                    f"start {b.logic_offset}: segments overlap"
                )
    seen: set[tuple[str, int]] = set()
    for item in chain:
        key = (item.bname, item.queue)
        if key in seen:
            raise MappingRejectedError(f"{where}: physical queue {item.bname}/{item.queue} is used for two segments")
        seen.add(key)


def validate_mapping(mapping: TopicQueueMapping) -> None:
    if mapping.total_queues <= 0:
        raise MappingRejectedError(f"topic {mapping.topic!r}: totalQueues must be positive")
    owner: dict[tuple[str, int], tuple[int, int]] = {}
    for q, chain in mapping.hosted.items():
        if not 0 <= q < mapping.total_queues:
            raise MappingRejectedError(
                f"topic {mapping.topic!r}: logic queue {q} is outside 0..{mapping.total_queues - 1}"
            )
        validate_chain(mapping.topic, q, chain)
        for item in chain:
            key = (item.bname, item.queue)
            if key in owner and owner[key] != (q, item.gen):
                raise MappingRejectedError(
                    f"topic {mapping.topic!r}: physical queue {item.bname}/{item.queue} is used by logic "
                    f"queues {owner[key][0]} and {q}"
                )
            owner[key] = (q, item.gen)


def check_transition(old: TopicQueueMapping | None, new: TopicQueueMapping, broker: str) -> None:
    """Everything a broker checks before it stores `new` over its current copy `old`."""
    if new.bname != broker:
        raise MappingRejectedError(f"mapping of {new.topic!r} names broker {new.bname!r}; this is broker {broker!r}")
    validate_mapping(new)
    if old is None:
        return
    if new.epoch < old.epoch:
        raise MappingRejectedError(f"topic {new.topic!r}: epoch {new.epoch} is older than the stored epoch {old.epoch}")
    if new.total_queues < old.total_queues:
        raise MappingRejectedError(
            f"topic {new.topic!r}: totalQueues cannot shrink ({old.total_queues} -> {new.total_queues})"
        )
    for q, new_chain in new.hosted.items():
        old_chain = old.hosted.get(q)
        if old_chain:
            _check_chain_transition(new.topic, q, old_chain, new_chain)


def _check_chain_transition(topic: str, q: int, old: Chain, new: Chain) -> None:
    where = f"topic {topic!r} logic queue {q}"
    by_gen = {i.gen: i for i in old}
    first_new_gen = new[0].gen
    for item in new:
        before = by_gen.get(item.gen)
        if before is None:
            if item.gen <= old[-1].gen:
                raise MappingRejectedError(f"{where}: gen {item.gen} was not in the stored chain")
            continue
        if (before.bname, before.queue, before.start_offset) != (item.bname, item.queue, item.start_offset):
            raise MappingRejectedError(f"{where}: gen {item.gen} changed its physical queue or start offset")
        if before.decided and item.logic_offset != before.logic_offset:
            raise MappingRejectedError(
                f"{where}: gen {item.gen} has the decided logicOffset {before.logic_offset}; it cannot become "
                f"{item.logic_offset}"
            )
        if before.end_offset >= 0 and item.end_offset != before.end_offset:
            raise MappingRejectedError(f"{where}: gen {item.gen}'s end offset {before.end_offset} cannot change")
    missing = [i.gen for i in old if i.gen >= first_new_gen and i.gen not in {n.gen for n in new}]
    if missing:
        raise MappingRejectedError(f"{where}: gens {missing} were dropped from the middle of the chain")
