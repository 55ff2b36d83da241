"""Strom broker: the trio server, handlers and log storage."""

__version__ = "0.1.0"
"""The package version (pyproject.toml reads it from here): reading it back through
importlib.metadata would cost every start-up tens of milliseconds."""
