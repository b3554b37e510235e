"""Apache RocketMQ 5 over its classic remoting protocol, in pure Python (no JVM on the workers)."""
