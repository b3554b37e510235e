"""Message properties the broker adds when a popped message comes back through the retry topic
or lands in the dead-letter queue. Clients hide them from popped messages (they are surfaced as
fields: queue_id, queue_offset, reconsume_times); a DLQ reader sees them as they are."""

from __future__ import annotations

PREFIX = "smq.pop."
ORIGIN_TOPIC = PREFIX + "origin_topic"
ORIGIN_QUEUE = PREFIX + "origin_queue"  # logic queue on a static topic
ORIGIN_OFFSET = PREFIX + "origin_offset"  # logic offset on a static topic
RECONSUME_TIMES = PREFIX + "reconsume_times"
