"""Outcomes of an ack of one receipt handle (the wire enum AckStatus of consume.proto), with the
explanation a client shows when a handle is refused."""

from __future__ import annotations

import enum


class AckOutcome(enum.IntEnum):
    OK = 0
    FORGED = 1
    EXPIRED = 2
    SUPERSEDED = 3
    ALREADY_ACKED = 4
    REVIVED = 5
    UNKNOWN = 6
    WRONG_GROUP = 7


EXPLANATIONS = {
    AckOutcome.OK: "acked",
    AckOutcome.FORGED: "the receipt handle was not issued by this broker or was altered",
    AckOutcome.EXPIRED: "the receipt handle expired: the invisible time is over and the message comes back",
    AckOutcome.SUPERSEDED: (
        "the receipt handle was superseded by change_invisible_time: only the newest handle of the message acks"
    ),
    AckOutcome.ALREADY_ACKED: "the message was already acked with this receipt handle",
    AckOutcome.REVIVED: "the message was already sent back through the retry topic (its invisible time ended)",
    AckOutcome.UNKNOWN: "the broker no longer holds the checkpoint of this receipt handle (already acked or revived)",
    AckOutcome.WRONG_GROUP: "the receipt handle was issued for another consumer group or topic",
}


def explain(outcome: int) -> str:
    try:
        return EXPLANATIONS[AckOutcome(outcome)]
    except ValueError:
        return f"unknown ack outcome {outcome}"
