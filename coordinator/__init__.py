"""Strom coordinators: groups, transactions and the controller."""
