"""The Spark sink: `df.writeStream.format("staticmq")` / `df.write.format("staticmq")`."""
