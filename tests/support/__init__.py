"""Helpers shared by the tests: clusters, backends, the CLI runner, waiting, Spark sessions."""
