"""Compatibility tests: aiokafka against a real Strom broker."""
