"""Generator of Strom's message classes from Kafka's JSON message definitions.

Run `python -m strom.wire.codegen` to rewrite the checked-in modules under
`wire/messages/` and `wire/formats/`; `python -m strom.wire.codegen --check` exits
non-zero when they differ from what the JSON produces.
"""
