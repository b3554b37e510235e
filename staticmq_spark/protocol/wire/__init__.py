"""Protobuf messages on the wire: PullResponse and StageRequest written and read by hand without
copying their rows (over raw_fields.py), TopicRoute and TopicConfig converted to the clients' values."""
