"""Benchmarks: run them by hand, never as timed tests."""
