"""gRPC plumbing: opening channels (options, TLS, request signing) and gRPC failures -> staticmq errors."""
