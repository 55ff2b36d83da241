"""Compatibility tests: kafka_python against a real Strom broker."""
