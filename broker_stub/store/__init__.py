"""Durable broker storage: commit log, consume queues, configs, offsets and recovery."""
