"""Planning static-topic changes: where new logic queues go, which ones a remap moves, the items
they get, and the copy of the mapping each broker stores (leader completeness).

Allocation: existing logic queues never move; each new one goes to the least-loaded target
broker (ties: the order targets are given in), so counts differ by at most one.
Create/grow (`plan_create_steps`): the new logic queues' items, the new epoch, and each broker's
copy, written first to the brokers that lead a logic queue, then to the others.
Remap: every target gets a quota (total / targets, the remainder going to the brokers that lead
most now, so fewer queues move); a logic queue stays while its broker is a target with room;
the others move to targets with room, least loaded first. A broker therefore only maps queues
in or only maps them out in one remap, never both.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from staticmq_spark.errors import InvalidArgumentError
from staticmq_spark.mapping.items import UNDECIDED, Chain, MappingItem, TopicQueueMapping
from staticmq_spark.mapping.rules import next_epoch, settle_logic_offset
from staticmq_spark.mapping.views import PhysicalBounds


def _check_targets(targets: Sequence[str]) -> None:
    if not targets:
        raise InvalidArgumentError("no target broker given")
    if len(set(targets)) != len(targets):
        raise InvalidArgumentError(f"target brokers repeat: {list(targets)}")


def plan_allocation(total_queues: int, targets: Sequence[str], leaders: Mapping[int, str]) -> dict[int, str]:
    """Brokers for the logic queues that do not exist yet (existing ones stay)."""
    _check_targets(targets)
    if total_queues < len(leaders) or any(q >= total_queues for q in leaders):
        raise InvalidArgumentError(
            f"totalQueues cannot shrink: the topic has {len(leaders)} logic queues, asked for {total_queues}"
        )
    rank = {t: i for i, t in enumerate(targets)}
    counts = dict.fromkeys(targets, 0)
    for broker in leaders.values():
        if broker in counts:
            counts[broker] += 1
    placed: dict[int, str] = {}
    for q in range(total_queues):
        if q in leaders:
            continue
        broker = min(targets, key=lambda t: (counts[t], rank[t]))
        placed[q] = broker
        counts[broker] += 1
    return placed


def plan_remap(total_queues: int, targets: Sequence[str], leaders: Mapping[int, str]) -> dict[int, str]:
    """Logic queue -> new broker for every logic queue that must move."""
    _check_targets(targets)
    rank = {t: i for i, t in enumerate(targets)}
    now = dict.fromkeys(targets, 0)
    for broker in leaders.values():
        if broker in now:
            now[broker] += 1
    base, extra = divmod(total_queues, len(targets))
    by_load = sorted(targets, key=lambda t: (-now[t], rank[t]))
    quota = {t: base + (1 if i < extra else 0) for i, t in enumerate(by_load)}
    kept = dict.fromkeys(targets, 0)
    movers = []
    for q in sorted(leaders):
        broker = leaders[q]
        if broker in quota and kept[broker] < quota[broker]:
            kept[broker] += 1
        else:
            movers.append(q)
    moves: dict[int, str] = {}
    for q in movers:
        room = [t for t in targets if kept[t] < quota[t]]
        broker = min(room, key=lambda t: (kept[t], rank[t]))
        moves[q] = broker
        kept[broker] += 1
    return moves


def new_items(
    placements: Mapping[int, str],
    next_queue_ids: Mapping[str, int],
    *,
    gens: Mapping[int, int],
    logic_offset: int,
    now_ms: int,
) -> dict[int, MappingItem]:
    """One item per placed logic queue, each on a fresh physical queue of its broker (a physical
    queue is never reused: each broker hands out its next queue id)."""
    next_ids = dict(next_queue_ids)
    items = {}
    for q in sorted(placements):
        broker = placements[q]
        queue_id = next_ids.get(broker, 0)
        next_ids[broker] = queue_id + 1
        items[q] = MappingItem(
            queue=queue_id,
            bname=broker,
            gen=gens.get(q, 0),
            logic_offset=logic_offset,
            start_offset=0,
            time_of_start=now_ms,
            update_time=now_ms,
        )
    return items


def moved_item_gens(chains: Mapping[int, Chain], moves: Mapping[int, str]) -> dict[int, int]:
    return {q: chains[q][-1].gen + 1 for q in moves}


def leaders_of(chains: Mapping[int, Chain]) -> dict[int, str]:
    return {q: chain[-1].bname for q, chain in chains.items()}


def copies_for(
    topic: str, epoch: int, total_queues: int, chains: Mapping[int, Chain], brokers: Iterable[str]
) -> dict[str, TopicQueueMapping]:
    """The mapping each broker stores: the full chain of every logic queue it leads or second-
    leads (copies older than two gens are dropped); brokers hosting none still get one, with
    epoch and totalQueues, so that a lost broker is detectable."""
    out = {}
    for broker in brokers:
        hosted = {
            q: tuple(chain)
            for q, chain in chains.items()
            if chain[-1].bname == broker or (len(chain) > 1 and chain[-2].bname == broker)
        }
        out[broker] = TopicQueueMapping(
            topic=topic, bname=broker, epoch=epoch, total_queues=total_queues, hosted=hosted
        )
    return out


def drop_expired(chain: Chain, physical_min: Mapping[tuple[str, int], int]) -> Chain:
    """Remove leading items whose physical data retention has deleted entirely (never the
    leader, never an item whose end is still open)."""
    keep_from = 0
    for i, item in enumerate(chain[:-1]):
        low = physical_min.get((item.bname, item.queue))
        if item.end_offset >= 0 and low is not None and low >= item.end_offset:
            keep_from = i + 1
        else:
            break
    return chain[keep_from:]


def is_undecided(chain: Chain) -> bool:
    return chain[-1].logic_offset == UNDECIDED


def leaders_first(chains: Mapping[int, Chain], brokers: Iterable[str]) -> list[str]:
    """The write order of a create, grow or repair: the brokers that lead a logic queue, then
    every other one (each sorted by name)."""
    hosting = sorted({c[-1].bname for c in chains.values()})
    return hosting + [n for n in sorted(brokers) if n not in hosting]


@dataclass(frozen=True)
class CreateSteps:
    """A create or grow as the brokers receive it: write `copies` (at `epoch`) to the brokers in
    `order` (the leaders first). `placements`: each new logic queue's broker."""

    placements: dict[int, str]
    epoch: int
    copies: dict[str, TopicQueueMapping]
    order: list[str]


def check_total_queues(total_queues: int) -> None:
    """A static topic has at least one logic queue (`-qn`)."""
    if total_queues <= 0:
        raise InvalidArgumentError(f"-qn must be positive, got {total_queues}")


def plan_create_steps(
    topic: str,
    total_queues: int,
    current_total: int,
    epoch: int,
    chains: Mapping[int, Chain],
    targets: Sequence[str],
    physical_counts: Mapping[str, int],
    now_ms: int,
) -> CreateSteps:
    """Create `topic` with `total_queues` logic queues, or grow it to that many. `current_total`,
    `epoch`, `chains`: the topic as it is (0, 0, {} when it does not exist); `physical_counts`:
    every live broker -> its physical queues of the topic (a new item takes the next id). Existing
    logic queues stay; each new one starts at logic offset 0 on a least-loaded target; shrinking
    is refused (a key's logic queue must never change)."""
    check_total_queues(total_queues)
    if total_queues < current_total:
        raise InvalidArgumentError(
            f"static topic {topic!r} has {current_total} logic queues; shrinking to {total_queues} "
            "is refused (a key's logic queue must never change)"
        )
    placements = plan_allocation(total_queues, targets, leaders_of(chains))
    grown = dict(chains)
    for q, item in new_items(placements, physical_counts, gens={}, logic_offset=0, now_ms=now_ms).items():
        grown[q] = (item,)
    new_epoch = next_epoch(epoch, now_ms)
    copies = copies_for(topic, new_epoch, total_queues, grown, physical_counts)
    return CreateSteps(dict(placements), new_epoch, copies, leaders_first(grown, physical_counts))


@dataclass(frozen=True)
class RemapSteps:
    """A remap as the brokers receive it (switch-new, fence-old, settle-new): `copies` (at `epoch`)
    hold the new leaders with undecided logic offsets; write them to `map_in` (new leaders
    writable), then to `map_out` (old leaders fenced), then settle each moved chain
    (`settled_chain`) from its old leader's final max and write the result everywhere."""

    moves: dict[int, str]  # logic queue -> its new broker
    epoch: int
    pending: dict[int, Chain]  # every chain, the moved ones ending in their undecided new item
    map_in: list[str]
    map_out: list[str]
    copies: dict[str, TopicQueueMapping]


def plan_remap_steps(
    topic: str,
    total_queues: int,
    epoch: int,
    chains: Mapping[int, Chain],
    targets: Sequence[str],
    physical_counts: Mapping[str, int],
    brokers: Iterable[str],
    now_ms: int,
) -> RemapSteps | None:
    """The remap of `chains` onto `targets` (None: nothing moves). `physical_counts`: each broker's
    physical queues of the topic (a new item takes the next id); `brokers`: every live one."""
    moves = plan_remap(total_queues, targets, leaders_of(chains))
    if not moves:
        return None
    new_epoch = next_epoch(epoch, now_ms)
    gens = {q: chains[q][-1].gen + 1 for q in moves}
    fresh = new_items(moves, physical_counts, gens=gens, logic_offset=UNDECIDED, now_ms=now_ms)
    pending = {**chains, **{q: (*chains[q], fresh[q]) for q in moves}}
    map_in = sorted(set(moves.values()))
    map_out = sorted({chains[q][-1].bname for q in moves})
    copies = copies_for(topic, new_epoch, total_queues, pending, brokers)
    return RemapSteps(moves, new_epoch, pending, map_in, map_out, copies)


def settle_chains(
    chains: Mapping[int, Chain], queues: Iterable[int], fenced: Mapping[tuple[str, int], PhysicalBounds], now_ms: int
) -> dict[int, Chain]:
    """Each of `queues`' pending chains settled from its fenced old leader's physical bounds
    (`fenced[(broker, physical queue)]`; a queue with none ends where it started)."""
    out = {}
    for q in queues:
        old = chains[q][-2]
        bounds = fenced.get((old.bname, old.queue))
        final_max = bounds.max_offset if bounds is not None else old.start_offset
        last_ts = bounds.last_store_timestamp if bounds is not None else 0
        out[q] = settled_chain(chains[q], final_max, last_ts, now_ms)
    return out


def plan_settled_copies(
    steps: RemapSteps,
    fenced: Mapping[tuple[str, int], PhysicalBounds],
    physical_min: Mapping[tuple[str, int], int],
    now_ms: int,
) -> dict[str, TopicQueueMapping]:
    """Step 3 of a remap: every broker's copy (at the remap's epoch) once each moved chain is settled
    from its fenced old leader's bounds, expired items dropped (`physical_min`: drop_expired's).
    Written to the map-in brokers first, then to every other one."""
    settled = settle_chains(steps.pending, sorted(steps.moves), fenced, now_ms)
    final = {q: drop_expired(chain, physical_min) for q, chain in {**steps.pending, **settled}.items()}
    first = next(iter(steps.copies.values()))
    return copies_for(first.topic, steps.epoch, first.total_queues, final, steps.copies)


def settled_chain(chain: Chain, final_max: int, last_store_ms: int, now_ms: int) -> Chain:
    """A pending chain settled: its old leader (fenced, second to last) ends at `final_max` (its
    physical max once fenced), and the new leader's logic offset follows that end."""
    old, new = chain[-2], chain[-1]
    old_done = replace(
        old, end_offset=max(final_max, old.start_offset), time_of_end=last_store_ms or now_ms, update_time=now_ms
    )
    new_done = replace(new, logic_offset=settle_logic_offset(old_done.logic_end()), update_time=now_ms)
    return (*chain[:-2], old_done, new_done)
