"""The broker's half of admin requests: what it answers itself before or instead of the controller.

Config descriptions and alterations, runtime log levels (BROKER_LOGGER), authorized-operation
bitfields, admin deadlines, forwarding to the active controller, the brokers Metadata lists.
Handlers in `strom.broker.handlers` call these; metadata changes go to the controller driver.
Takes this node's `BrokerCore`; may import `strom.broker.core_state` and `strom.broker.drivers`.
"""
