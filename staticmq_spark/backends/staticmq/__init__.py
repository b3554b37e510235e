"""The staticmq backend: broker_stub's gRPC protocol (channels, routes, selector, delivery, staging,
two-phase commit, remap)."""
