"""`staticmq demo`: the main job on an embedded local cluster, end to end, verified."""
