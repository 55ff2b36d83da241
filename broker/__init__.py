"""The broker: the trio process that serves clients and hosts the state machines.

Its folders, by concern:

- `network/`: listeners, one task per connection, framing, writing responses.
- `handlers/`: one module per API key (`produce.py`, `fetch.py`, ...), the registry table and
  what every handler is given (`request.RequestContext`, `state.BrokerState`).
- `data/`: the produce and fetch data path between the handlers and `strom.storage`.
- `admin/`: the broker's half of admin requests (configs, loggers, internal topics).
- `drivers/`: the trio drivers that host the pure state machines of `strom.coordinator`
  (the controller and the group coordinator): they feed them requests, time and durability.
- `security/`: TLS contexts from the ssl.* keys, the listeners' TLS (handshake, reloads), who a
  connection is (principals).
- `replication/`: this broker's partitions kept in step with the metadata image; followers,
  the ISR and leader changes (issue 12) live here.
- `process/`: start-up, the command line, logging, process limits.
- `testing/`: test support for Strom's tests and users' (embedded broker, child process,
  raw client, the pytest plugin).

May import everything below it: `strom.coordinator`, `strom.storage`, `strom.config`,
`strom.wire`. Nothing imports `strom.broker`.
"""
