"""Strom wire layer: the Kafka protocol, sans-IO."""
