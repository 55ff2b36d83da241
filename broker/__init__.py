"""Strom broker: the trio server, handlers and log storage."""
