"""The verdict: the checks of the table the query exported, and the summary of a run's figures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from bench.soak.traffic import Sender, body_of


def check(result: Path, sender: Sender, keys: int) -> dict[str, Any]:
    import pyarrow.parquet as pq

    table = pq.read_table(result)
    sent = sender.next_g
    acked = np.zeros(sent, dtype=bool)
    for a, b in sender.acked_ranges:
        acked[a:b] = True
    counts = np.zeros(sent, dtype=np.int64)
    key_col = table.column("key").to_pylist()
    values = table.column("value").to_pylist()
    qid = np.asarray(table.column("queueId").to_numpy(zero_copy_only=False), dtype=np.int64)
    qoff = np.asarray(table.column("queueOffset").to_numpy(zero_copy_only=False), dtype=np.int64)
    g = np.full(len(values), -1, dtype=np.int64)
    unknown = 0
    for i, (k, v) in enumerate(zip(key_col, values, strict=True)):
        try:
            name, seq = bytes(v).decode().split(":")
            key = int(name[1:])
            gi = int(seq) * keys + key
        except (ValueError, UnicodeDecodeError, TypeError):
            unknown += 1
            continue
        if name != k or not name.startswith("k") or key >= keys or gi >= sent:
            unknown += 1
            continue
        g[i] = gi
    known = g >= 0
    np.add.at(counts, g[known], 1)
    lost = int(np.count_nonzero(acked & (counts == 0)))
    dup_acked = int(np.count_nonzero(acked & (counts > 1)))
    dup_unacked = int(np.count_nonzero(~acked & (counts > 1)))
    unacked_stored = int(np.count_nonzero(~acked & (counts == 1)))
    positions = qid * (1 << 40) + qoff
    same_position = len(positions) - len(np.unique(positions))
    # order: each key's acknowledged messages sorted by (queueId, queueOffset) have increasing seq
    sel = known.copy()
    sel[known] = acked[g[known]]
    gk, qk, ok = g[sel], qid[sel], qoff[sel]
    key_ids, seqs = gk % keys, gk // keys
    order = np.lexsort((ok, qk, key_ids))
    ks, ss, qs = key_ids[order], seqs[order], qk[order]
    same_key = ks[1:] == ks[:-1]
    out_of_order = int(np.count_nonzero(same_key & (ss[1:] < ss[:-1])))  # equal: a duplicate, counted above
    keys_on_several_queues = len(np.unique(ks[1:][same_key & (qs[1:] != qs[:-1])]))
    return {
        "rows": len(values),
        "lost": lost,
        "duplicated": dup_acked + dup_unacked,
        "duplicated_acked": dup_acked,
        "duplicated_unacked": dup_unacked,
        "unacked_stored": unacked_stored,
        "unknown": unknown,
        "out_of_order": out_of_order,
        "keys_on_several_queues": keys_on_several_queues,
        "same_position_twice": int(same_position),
        "lost_examples": [body_of(int(x), keys)[1].decode() for x in np.flatnonzero(acked & (counts == 0))[:5]],
        "duplicated_examples": [body_of(int(x), keys)[1].decode() for x in np.flatnonzero(counts > 1)[:5]],
    }


def summary(f: dict[str, Any]) -> None:
    lines = [
        f"soak on {f['backend']} ({f['date']}): {'OK' if f['ok'] else 'FAILED'}",
        f"  messages sent {f.get('sent', 0):,}, acked {f.get('acked', 0):,}, unacked {f.get('unacked', 0):,} "
        f"(stored {f.get('unacked_stored', 0):,}), rows in the table {f.get('rows', 0):,}",
        f"  remaps {f.get('remaps', 0)}, broker kills {f.get('broker_kills', 0)}, "
        f"driver kills {f.get('driver_kills', 0)}, micro-batches {f.get('micro_batches', 0)}, "
        f"query restarts after Spark's Python worker timeout {f.get('query_restarts_worker_timeout', 0)}",
        f"  lost {f.get('lost', '?')}, duplicated {f.get('duplicated', '?')}, "
        f"out of order {f.get('out_of_order', '?')}, "
        f"unknown {f.get('unknown', '?')}, keys on several queues {f.get('keys_on_several_queues', '?')}",
        f"  wall time {f.get('wall_seconds', 0):.0f} s (production {f.get('produce_seconds', 0):.0f} s)",
        *(f"  FAILED: {x}" for x in f["failures"]),
    ]
    print("\n".join(lines), flush=True)
