"""The wire of Apache RocketMQ's remoting protocol: frames and their codecs, connections (TLS), ACL
signing, the request and response codes, and the client of one method per request code."""
