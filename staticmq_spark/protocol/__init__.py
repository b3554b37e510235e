"""What staticmq's clients, backends and broker_stub say to each other, grouped by concern:
rows/ (the packed message rows and their Arrow columns), wire/ (protobuf messages written and read
by hand, and their conversions to values), transport/ (gRPC channels and gRPC failures), security/
(request signing, ACL files), topics/ (names, topic configuration, routes) and consume/ (pull
statuses, pop acks and properties, tag filters); pb/ is generated from proto/ (scripts/gen_proto.py)."""
