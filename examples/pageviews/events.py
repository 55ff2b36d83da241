"""Page-view events: what the services send, as JSON, with event times chosen up front.

An event's time is when the page was viewed, not when it reached the broker: the streaming job
windows on it. `page_views` makes a reproducible run of events, one every `step_ms`, so a
pipeline's output can be known exactly in advance.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from datetime import UTC, datetime

PAGES = ("/", "/pricing", "/docs", "/blog", "/signup")

START_MS = int(datetime(2026, 1, 1, tzinfo=UTC).timestamp() * 1000)
"""Default time of the first event: 2026-01-01T00:00:00Z."""


@dataclass(frozen=True)
class PageView:
    page: str
    user: str
    ts_ms: int
    """Event time, milliseconds since the epoch (UTC)."""

    def to_json(self) -> bytes:
        """The wire form: `{"page": ..., "user": ..., "ts": "2026-01-01T00:00:05.000Z"}`."""
        return json.dumps({"page": self.page, "user": self.user, "ts": iso_ms(self.ts_ms)}).encode()

    @classmethod
    def from_json(cls, data: bytes) -> PageView:
        obj = json.loads(data)
        return cls(page=obj["page"], user=obj["user"], ts_ms=parse_iso_ms(obj["ts"]))


def iso_ms(ms: int) -> str:
    """`2026-01-01T00:00:05.000Z`: ISO-8601 in UTC with milliseconds, as Spark writes it."""
    moment = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def parse_iso_ms(text: str) -> int:
    return round(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


def page_views(
    count: int, *, start_ms: int = START_MS, step_ms: int = 1000, seed: int = 13
) -> list[PageView]:
    """`count` events, the i-th at `start_ms + i * step_ms`, pages and users drawn from `seed`."""
    rng = random.Random(seed)
    return [
        PageView(
            page=rng.choice(PAGES), user=f"user-{rng.randrange(20)}", ts_ms=start_ms + i * step_ms
        )
        for i in range(count)
    ]
