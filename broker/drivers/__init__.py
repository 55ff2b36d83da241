"""Trio drivers that host the pure state machines of `strom.coordinator`.

A driver owns the state machine, serializes the commands it is given, feeds it time, writes the
records it emits durably and reports the outcome back to it as an input; it depends on narrow
interfaces (a log to append to, a publish callback), never on the whole broker state.
`quorum_controller`: the one controller host, the metadata controller on the Raft quorum (a
one-voter quorum on a single node). `groups`: the classic group coordinator over
`__consumer_offsets` (`group_loading` reads it back at start-up, in a worker thread; the
broker's appends, acks=all, are `strom.broker.data.coordinator_topics`'s, behind the
`coordinator_topic` protocol both coordinators' drivers use).
`topics`: the one path by which the broker creates topics on its own behalf (auto-creation,
`__consumer_offsets`, `__transaction_state`), through the controller like a CreateTopics.
`lifecycle`: this broker's registration with the controller and its heartbeats (BrokerRegistration,
BrokerHeartbeat) through a `ControllerChannel`: in-process when this node is the active
controller, else the RPC to it. `raft`: the Raft replica of `__cluster_metadata` (a
`RaftCore` with its disk store, its peers and the handlers' requests); `peer` its outbound
connection to another node.
"""
