"""Runnable examples of Strom with the Kafka ecosystem; each lives in its own package."""
