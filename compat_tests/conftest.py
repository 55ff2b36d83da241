"""Compatibility tests: every test runs stock clients against a real `strom serve` process.

The `strom_broker` fixture (broker.testing) starts one child broker per test on a free port with
its own data directory; it starts in well under a second, so tests share no broker state.
"""

pytest_plugins = ["broker.testing"]
