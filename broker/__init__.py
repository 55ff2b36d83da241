"""The broker: the trio process that serves clients and hosts the state machines.

Its folders and modules, by floor, top down (imports only go down; pyproject.toml's
`broker-floors` contract checks it):

- `testing/`: test support for Strom's tests and users' (embedded broker, child process,
  raw client, the pytest plugin).
- `process/`: start-up (it builds every service once and hands them down), the command line,
  logging, process limits.
- `network/`: listeners, one task per connection, framing, writing responses.
- `handlers/`: one module per API key (`produce.py`, `fetch.py`, ...), the registry table and
  what every handler is given (`request.RequestContext`, `state.BrokerState`).
- `state.py`: `BrokerState`, this node's core plus its services as typed fields.
- `data/`: the produce and fetch data path between the handlers and `strom.storage`.
- `replication/`: this broker's partitions kept in step with the metadata image; leaders,
  followers, the ISR and the high watermark.
- `admin/`: the broker's half of admin requests (configs, loggers, forwarding, broker lists).
- `core_state.py`: `BrokerCore`, what the floors above build on: identity, configuration, the
  controller and its metadata image, the logs, the forwarder to the active controller.
- `drivers/`: the trio drivers that host the pure state machines of `strom.coordinator`
  (the controller, Raft and the group coordinator): they feed them requests, time and
  durability, on narrow interfaces.
- `security/`: TLS contexts from the ssl.* keys and the listeners' TLS (handshake, reloads),
  SASL (mechanisms, the connection's authenticator, the client side), principals, ACL
  decisions.
- `metrics/`: the request-path counters.
- `runtime.py`: the machine under it all: the network, the clocks, worker threads and
  randomness, which a simulation of the whole cluster replaces (`tests/simulation`).

May import everything below it: `strom.coordinator`, `strom.storage`, `strom.config`,
`strom.wire`. Nothing imports `strom.broker`.
"""
