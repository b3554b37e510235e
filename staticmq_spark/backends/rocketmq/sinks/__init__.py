"""The RocketMQ sink's three delivery modes and their bookkeeping: staged (exactly once, the default),
transactional half messages (exactly once) and direct sends (at least once)."""
