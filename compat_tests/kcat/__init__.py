"""Compatibility tests: kcat against a real Strom broker."""
