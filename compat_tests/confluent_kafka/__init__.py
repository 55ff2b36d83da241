"""Compatibility tests: confluent_kafka against a real Strom broker."""
