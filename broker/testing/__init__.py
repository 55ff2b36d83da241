"""Test support, for Strom's own tests and for users' tests.

- `embedded`: `open_broker` runs a broker inside the current trio run; `BrokerProcess` runs
  `strom serve` as a child process (port 0, the real port reported).
- `client`: a minimal raw Kafka client that sends exact requests at exact versions.
- `pytest_plugin`: the `strom_broker` fixture, registered through the `pytest11` entry point.
"""
