"""KRaft: the metadata partition replicated by Raft, as a pure state machine.

`core.RaftCore` takes messages, ticks (the time, passed in), randomness and durable-write
acknowledgements, and emits messages, durable writes and commit/leader news (`effects`). The
messages are the typed values of `messages`; `wire` translates them to Kafka's generated RPC
classes for the driver. The durable state behind it lives in `strom.storage.raft.raft_store`. See
docs/raft.md for the state machine, the invariants the simulator checks and what a driver does.
"""

from strom.coordinator.raft.core import QuorumInfo, RaftConfig, RaftCore, RaftSafetyError
from strom.coordinator.raft.states import Role

__all__ = ["QuorumInfo", "RaftConfig", "RaftCore", "RaftSafetyError", "Role"]
