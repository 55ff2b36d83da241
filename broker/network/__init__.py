"""Listeners and connections: one trio task per connection, requests answered in order.

`server` reads bytes into a sans-IO `strom.wire.Connection`, dispatches complete requests to
`strom.broker.handlers` and writes responses with `send` (file ranges by `os.sendfile`).
"""
