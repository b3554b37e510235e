"""The `staticmq` command: cluster, namesrv, broker, admin, send, pull and demo."""
