"""Topic values shared by broker, name server and clients: name rules, topic configuration, routes."""
