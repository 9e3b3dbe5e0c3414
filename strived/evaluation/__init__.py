"""Benchmark folders (docs/formats.md section 2), the method registry and `run_eval`."""
