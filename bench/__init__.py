"""The benchmarks, one package each: `python -m bench.<name> --help` (bench/README.md)."""
