"""Exclusive (ordered) consumption: broker-side pull locks with leases, and the pulls and commits
only a lock holder may make."""
