"""The staticmq reference broker cluster: name server, brokers and their durable store."""
