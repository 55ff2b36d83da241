"""Coordinators: pure state machines, no I/O.

The controller (`controller/`) and the metadata image it builds (`metadata/`), the Raft core
(`raft/`), the classic group coordinator (`groups/`) and the transaction coordinator
(`transactions/`). Each takes
requests, time and randomness as inputs and returns records to make durable and effects
(responses, timers); durability comes back as an input. Their trio drivers live in
`strom.broker.drivers`. May import `strom.storage`, `strom.config` and `strom.wire`, never
`strom.broker`, never trio or sockets (`lint-imports` checks).
"""
