"""The name server: broker registration, heartbeats and topic routes."""
