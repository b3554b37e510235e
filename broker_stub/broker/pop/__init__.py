"""Pop (shared) consumption on one broker.

    pop_service      pop across the queues of a topic: CK per queue batch, handles, long polling
    ack_service      ack (batch) and change_invisible_time
    revive_service   un-acked messages back through %RETRY%{group}_{topic}, or to %DLQ%{group}
    pop_state        the state and its one way of changing: revive-log records, then apply
    checkpoints      the CK buffer in memory, where acks are matched first (buffer merge)
    order_lanes      order pop: one lane per queue, redelivery in order
    records          CK / ACK / SUP / DONE rows of the revive log
    revive_log       those rows in the internal topic rmq_sys_REVIVE_LOG, and the checkpoint file
    receipt_handles  opaque, tamper-evident handles (keyed BLAKE2b per CK, per-broker secret)
    sources          the queues pop reads (plain, static logic queues, retry) and reading back
    retry_rows       retry/DLQ rows with their origin and reconsume count as properties
    requeue          appends to retry topics and DLQs (created on first use)
    queue_locks      `topic@group@queue` try-locks

Durability: every change is a row appended to the broker's own commit log before it is applied
in memory and answered, so a broker killed with -9 and restarted replays the rows after the last
checkpoint and ends up where it was: acked messages stay acked, messages in flight come back
when their invisible time ends.
"""
