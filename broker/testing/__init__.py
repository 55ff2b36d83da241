"""Test support, for Strom's own tests and for users' tests.

- `embedded`: `open_broker` runs a broker inside the current trio run; `BrokerProcess` runs
  `strom serve` as a child process (port 0, the real port reported).
- `client`: a minimal raw Kafka client that sends exact requests at exact versions.
- `cluster`: `ClusterProcess` runs a multi-node cluster (combined or split roles) of `strom serve`
  children on ports it binds first and passes by socket activation (`activation`).
- `faults`: the harness's end of request fault injection (`strom.broker.network.faults`).
- `pytest_plugin`: the `strom_broker` and `strom_cluster` fixtures, registered through the
  `pytest11` entry point.

For code outside pytest, `BrokerProcess` and `ClusterProcess` are context managers:

    from strom.broker.testing import ClusterProcess
    with ClusterProcess(combined=3) as cluster:
        cluster.fail("Fetch", "NOT_LEADER_OR_FOLLOWER", count=2, topic="orders")
"""

from strom.broker.testing.cluster import ClusterError, ClusterNode, ClusterProcess
from strom.broker.testing.embedded import BrokerProcess

__all__ = ["BrokerProcess", "ClusterError", "ClusterNode", "ClusterProcess"]
