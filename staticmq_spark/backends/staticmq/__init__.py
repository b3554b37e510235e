"""The staticmq backend: broker_stub's gRPC protocol (its client instance of channels, routes and
detection; selector, delivery, staging, two-phase commit, the static-topic admin)."""
