"""Compatibility tests: durability against a real Strom broker."""
