"""Client quotas on produce and fetch bytes, enforced as Kafka's ClientQuotaManager does.

Quotas live in the metadata image (ClientQuotaRecord, set with AlterClientQuotas). For a
request from user U with client id C, the quota is the first entity that has the key, in
Kafka's order: (user U, client C), (user U, client default), (user U), (user default, client
C), (user default, client default), (user default), (client C), (client default). Each
client's usage is measured against the entity that matched: a user quota is shared by all of
that user's clients, a default quota is per user (or client) all the same.

The usage is a rate over a window of 11 one-second samples (Kafka's `quota.window.num` and
`quota.window.size.seconds`): produce counts the request's bytes, fetch (consumers only; a
follower's replication is not a client) the response's. Over the quota, the response says how
long to wait (`throttle_time_ms` = (rate - quota) / quota x the window), and the broker reads
nothing more from that connection for that long (Kafka's channel muting, KIP-219): the client
is slowed without a request being refused. Without any quota in the image this costs nothing.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping

from strom.coordinator.metadata.image import QuotaEntity

SAMPLE_S = 1.0
SAMPLES = 11
MAX_THROTTLE_MS = int(SAMPLE_S * SAMPLES * 1000)
PRODUCE, FETCH = "producer_byte_rate", "consumer_byte_rate"


class Rate:
    """A sliding-window rate (Kafka's Rate over SampledStat): SAMPLES samples of SAMPLE_S."""

    def __init__(self) -> None:
        self._samples: deque[list[float]] = deque()  # [start, total]

    def record(self, amount: float, now: float) -> None:
        if not self._samples or now - self._samples[-1][0] >= SAMPLE_S:
            self._samples.append([now, 0.0])
        self._samples[-1][1] += amount
        while len(self._samples) > SAMPLES or now - self._samples[0][0] > SAMPLE_S * SAMPLES:
            self._samples.popleft()

    def rate(self, now: float) -> float:
        if not self._samples:
            return 0.0
        total = sum(total for _, total in self._samples)
        # the window counts as full-length from the start, as Kafka's does, so a first burst
        # is not read as an enormous rate
        elapsed = max(now - self._samples[0][0], SAMPLE_S * (SAMPLES - 1))
        return total / elapsed

    def window_ms(self, now: float) -> float:
        if not self._samples:
            return SAMPLE_S * (SAMPLES - 1) * 1000
        return max(now - self._samples[0][0], SAMPLE_S * (SAMPLES - 1)) * 1000


def _candidates(user: str, client: str) -> list[tuple[QuotaEntity, tuple[str, str]]]:
    """Kafka's quota entities for (user, client id), most specific first, each with the key
    of the usage it is measured on."""
    return [
        ((("client-id", client), ("user", user)), (user, client)),
        ((("client-id", None), ("user", user)), (user, client)),
        ((("user", user),), (user, "")),
        ((("client-id", client), ("user", None)), (user, client)),
        ((("client-id", None), ("user", None)), (user, client)),
        ((("user", None),), (user, "")),
        ((("client-id", client),), ("", client)),
        ((("client-id", None),), ("", client)),
    ]


def quota_for(
    quotas: Mapping[QuotaEntity, Mapping[str, float]], key: str, user: str, client: str
) -> tuple[float, tuple[str, str]] | None:
    """The quota on `key` for this user and client, and the usage it is measured on."""
    for entity, usage in _candidates(user, client):
        found = quotas.get(entity)
        if found is not None and key in found:
            return found[key], usage
    return None


class ClientQuotas:
    """This broker's usage measurements; `record` returns the throttle in milliseconds."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._rates: dict[tuple[str, str, str], Rate] = {}

    def record(
        self,
        quotas: Mapping[QuotaEntity, Mapping[str, float]],
        key: str,
        user: str,
        client: str,
        amount: int,
    ) -> int:
        if not quotas:
            return 0
        found = quota_for(quotas, key, user, client)
        if found is None:
            return 0
        limit, usage = found
        now = self._clock()
        rate = self._rates.get((key, *usage))
        if rate is None:
            rate = self._rates[(key, *usage)] = Rate()
        rate.record(amount, now)
        observed = rate.rate(now)
        if observed <= limit:
            return 0
        throttle = (observed - limit) / limit * rate.window_ms(now)
        return min(int(throttle), MAX_THROTTLE_MS)
