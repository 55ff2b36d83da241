"""What the broker counts as it works: `recorder` (plain integers and bucket arrays updated on
the request path, no locks, no library; always on).

Imports nothing else of `strom.broker`, so every part of the broker may record into it.
`strom.broker.monitoring` reads it at scrape time.
"""
