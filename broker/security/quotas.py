"""Client quotas, enforced as Kafka's ClientQuotaManager and its request and controller
mutation variants do.

Quotas live in the metadata image (ClientQuotaRecord, set with AlterClientQuotas). For a
request from user U with client id C, the quota is the first entity that has the key, in
Kafka's order: (user U, client C), (user U, client default), (user U), (user default, client
C), (user default, client default), (user default), (client C), (client default). Each
client's usage is measured against the entity that matched: a user quota is shared by all of
that user's clients, a default quota is per user (or client) all the same.

Four keys, each measured the way Kafka measures it:

- `producer_byte_rate`, `consumer_byte_rate`: a rate over a window of 11 one-second samples
  (Kafka's `quota.window.num` and `quota.window.size.seconds`): produce counts the request's
  bytes, fetch (consumers only; a follower's replication is not a client) the records it
  returns.
- `request_percentage`: the same windowed rate of the event-loop time the client's requests
  take (`strom.broker.network.loop_time`), in percent of one second: 100 is the whole event
  loop, the broker's only request thread; a throttle is at most one sample (1 s), as Kafka's.
- `controller_mutation_rate` (KIP-599): partitions created or deleted per second, a token
  bucket that refills at the rate and holds at most 11 seconds' worth. New request versions are
  refused once it is empty (THROTTLING_QUOTA_EXCEEDED, `MutationQuota`), older ones are let
  through and throttled.

A consumer's Fetch is charged before its answer is built, as Kafka's KafkaApis does
(`FetchQuota`): it reads at most what the quota allows in one window (the quota x 10 s, so a
single fetch is not throttled for its size alone), and a fetch over its byte rate or request
time is answered without records (no partitions, `throttle_time_ms` set) and its bytes are not
counted, since none were sent; a full fetch then creates no session.

Over a quota, the response says how long to wait (`throttle_time_ms` = (rate - quota) / quota
x the window for a rate, the time to refill an empty bucket for a mutation), and the broker
reads nothing more from that connection for that long (Kafka's channel muting, KIP-219): the
client is slowed without a request being refused. Without any quota in the image this costs
nothing. Measurements idle for a window are dropped, so clients that come and go (any number
of client ids under a default quota) cost bounded memory.

Connections (KIP-612, `IpConnectionQuotas`): an `ip` entity's `connection_creation_rate` bounds
the connections accepted from that address per second, measured as the same windowed rate; an
address's own quota overrides the default ip entity's (null name), and without either there is
no limit. A connection over it is not served: the acceptor holds it and closes it after the
throttle, (rate - quota) / quota x the window, at most one sample (1 s), as Kafka's acceptor
does; it does not count as a connection made. Other addresses are unaffected, and an address's
measurement is dropped once idle for a window.

"""

from __future__ import annotations

import ipaddress
from collections import deque
from collections.abc import Callable, Mapping

from strom.coordinator.metadata.image import QuotaEntity

SAMPLE_S = 1.0
SAMPLES = 11
MAX_THROTTLE_MS = int(SAMPLE_S * SAMPLES * 1000)
MAX_REQUEST_THROTTLE_MS = int(SAMPLE_S * 1000)
"""Kafka's ClientRequestQuotaManager bounds a request-time throttle by one sample."""
PRODUCE, FETCH = "producer_byte_rate", "consumer_byte_rate"
REQUEST, MUTATION = "request_percentage", "controller_mutation_rate"
CONNECTION_RATE = "connection_creation_rate"
MAX_CONNECTION_THROTTLE_MS = int(SAMPLE_S * 1000)
"""Kafka bounds a connection throttle by one sample (`quota.window.size.seconds`)."""
SWEEP_EVERY_S = 60.0
"""How often measurements that went idle are dropped."""


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

    def idle(self, now: float) -> bool:
        """Nothing recorded within the window: the rate is zero and forgetting it loses nothing."""
        return not self._samples or now - self._samples[-1][0] > SAMPLE_S * SAMPLES


class TokenBucket:
    """Kafka's TokenBucket stat (KIP-599): refills at `limit` per second up to `limit` x the
    window (SAMPLES x SAMPLE_S); a record takes tokens and may leave it negative."""

    def __init__(self, limit: float, now: float) -> None:
        self._tokens = limit * SAMPLES * SAMPLE_S  # a new bucket starts full, as Kafka's
        self._at = now

    def tokens(self, limit: float, now: float) -> float:
        burst = limit * SAMPLES * SAMPLE_S
        self._tokens = min(burst, self._tokens + limit * (now - self._at))
        self._at = now
        return self._tokens

    def take(self, amount: float, limit: float, now: float) -> float:
        self._tokens = self.tokens(limit, now) - amount
        return self._tokens

    def idle(self, limit: float, now: float) -> bool:
        """Full again: forgetting it loses nothing (a new one starts full)."""
        return self.tokens(limit, now) >= limit * SAMPLES * SAMPLE_S


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


def has_quota(quotas: Mapping[QuotaEntity, Mapping[str, float]], key: str) -> bool:
    """Whether any entity has a quota on `key`."""
    return any(key in values for values in quotas.values())


class MutationQuota:
    """One request's view of its client's controller mutation quota (Kafka's Strict- and
    PermissiveControllerMutationQuota). `admit(n)` before each topic's partitions are created
    or deleted: strict (the newer request versions), it refuses once the bucket is empty,
    else takes the tokens even if that empties it (the next mutation is refused); permissive,
    it always takes them. `throttle_ms` is how long the client must wait: set when strict
    refused, or permissive left the bucket below zero."""

    def __init__(self, bucket: TokenBucket, limit: float, strict: bool, clock: Callable[[], float]) -> None:
        self._bucket = bucket
        self._limit = limit
        self._strict = strict
        self._clock = clock
        self._throttle_ms = 0
        self._throttled_at = 0.0

    def admit(self, permits: int) -> bool:
        now = self._clock()
        if self._strict:
            tokens = self._bucket.tokens(self._limit, now)
            if tokens < 0:
                self._throttled(tokens, now)
                return False
            self._bucket.take(permits, self._limit, now)
            return True
        tokens = self._bucket.take(permits, self._limit, now)
        if tokens < 0:
            self._throttled(tokens, now)
        return True

    def settle(self, failed: int) -> None:
        """Give back what `admit` took for mutations that then failed (Kafka counts only the
        mutations its controller goes on to make); a permissive quota's throttle is what the
        bucket then lacks."""
        if not failed:
            return
        now = self._clock()
        tokens = self._bucket.take(-failed, self._limit, now)
        if not self._strict:
            self._throttle_ms = 0
            if tokens < 0:
                self._throttled(tokens, now)

    def _throttled(self, tokens: float, now: float) -> None:
        self._throttle_ms = round(-tokens / self._limit * 1000)
        self._throttled_at = now

    @property
    def throttle_ms(self) -> int:
        """What is left of the throttle, as Kafka deducts the time since it was recorded."""
        if not self._throttle_ms:
            return 0
        elapsed_ms = (self._clock() - self._throttled_at) * 1000
        return max(0, int(self._throttle_ms - elapsed_ms))


class ClientQuotas:
    """This broker's usage measurements. `record` returns the throttle in milliseconds;
    `mutation` hands out a request's controller mutation quota."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._rates: dict[tuple[str, str, str], Rate] = {}
        self._buckets: dict[tuple[str, str], tuple[TokenBucket, float]] = {}
        self._swept = 0.0

    def __len__(self) -> int:
        """How many measurements are held (bounded: idle ones are dropped)."""
        return len(self._rates) + len(self._buckets)

    def record(
        self,
        quotas: Mapping[QuotaEntity, Mapping[str, float]],
        key: str,
        user: str,
        client: str,
        amount: float,
    ) -> int:
        if not quotas:
            return 0
        found = quota_for(quotas, key, user, client)
        if found is None:
            return 0
        limit, usage = found
        now = self._clock()
        self._sweep(now)
        rate = self._rates.get((key, *usage))
        if rate is None:
            rate = self._rates[(key, *usage)] = Rate()
        rate.record(amount, now)
        observed = rate.rate(now)
        if observed <= limit:
            return 0
        throttle = (observed - limit) / limit * rate.window_ms(now)
        return min(round(throttle), MAX_REQUEST_THROTTLE_MS if key == REQUEST else MAX_THROTTLE_MS)

    def unrecord(
        self,
        quotas: Mapping[QuotaEntity, Mapping[str, float]],
        key: str,
        user: str,
        client: str,
        amount: float,
    ) -> None:
        """Take back `amount` recorded on `key` (a throttled fetch's bytes, never sent)."""
        found = quota_for(quotas, key, user, client) if quotas else None
        if found is not None:
            rate = self._rates.get((key, *found[1]))
            if rate is not None:
                rate.record(-amount, self._clock())

    def mutation(
        self,
        quotas: Mapping[QuotaEntity, Mapping[str, float]],
        user: str,
        client: str,
        strict: bool,
    ) -> MutationQuota | None:
        """The controller mutation quota of this user and client (None: no quota applies)."""
        found = quota_for(quotas, MUTATION, user, client) if quotas else None
        if found is None:
            return None
        limit, usage = found
        now = self._clock()
        self._sweep(now)
        held = self._buckets.get(usage)
        bucket = held[0] if held is not None else TokenBucket(limit, now)
        self._buckets[usage] = (bucket, limit)
        return MutationQuota(bucket, limit, strict, self._clock)

    def _sweep(self, now: float) -> None:
        if now - self._swept < SWEEP_EVERY_S:
            return
        self._swept = now
        for key in [k for k, rate in self._rates.items() if rate.idle(now)]:
            del self._rates[key]
        for usage in [u for u, (b, limit) in self._buckets.items() if b.idle(limit, now)]:
            del self._buckets[usage]


class FetchQuota:
    """A consumer's Fetch under client quotas, charged before its answer is built (Kafka's
    KafkaApis.handleFetchRequest). `max_bytes`: the most one fetch may read, the byte quota's
    whole window (reading more would be throttled whatever came before). `charge(size)` records
    the request's event-loop time so far and the answer's `size` bytes and returns the longer
    throttle; when there is one, the bytes are taken back and the fetch must answer without
    records."""

    def __init__(
        self,
        quotas: ClientQuotas,
        limits: Mapping[QuotaEntity, Mapping[str, float]],
        user: str,
        client: str,
        request_time: Callable[[], int],
    ) -> None:
        self._quotas = quotas
        self._limits = limits
        self._user = user
        self._client = client
        self._request_time = request_time
        self.charged = False
        """Whether `charge` ran (the dispatcher then counts neither the bytes again nor the
        rest of the request's time against a throttle, as Kafka records it without one)."""

    def max_bytes(self) -> int | None:
        found = quota_for(self._limits, FETCH, self._user, self._client)
        if found is None:
            return None
        return int(found[0] * (SAMPLES - 1) * SAMPLE_S)

    def charge(self, size: int) -> int:
        self.charged = True
        request = self._request_time()
        fetch = self._quotas.record(self._limits, FETCH, self._user, self._client, size)
        throttle = max(request, fetch)
        if throttle > 0:
            self._quotas.unrecord(self._limits, FETCH, self._user, self._client, size)
        return throttle


Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def _address(text: str) -> Address | None:
    try:
        address = ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped  # a dual-stack listener sees IPv4 peers as ::ffff:a.b.c.d
    return address


class IpConnectionQuotas:
    """The connection creation rate of each address (KIP-612's ip quota). `admit(quotas, host)`
    records a new connection from `host` and returns 0, or, over the address's quota, takes it
    back and returns how long to hold the connection before closing it, in milliseconds."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._rates: dict[Address, Rate] = {}
        self._swept = 0.0
        self._seen: object = None
        self._specific: dict[Address, float] = {}
        self._default: float | None = None

    def __len__(self) -> int:
        """How many addresses are measured (bounded: idle ones are dropped)."""
        return len(self._rates)

    def limit(self, quotas: Mapping[QuotaEntity, Mapping[str, float]], host: str) -> float | None:
        """The connection creation rate quota of `host` (None: unlimited)."""
        if quotas is not self._seen:
            self._seen = quotas
            self._specific, self._default = {}, None
            for entity, values in quotas.items():
                if len(entity) != 1 or entity[0][0] != "ip" or CONNECTION_RATE not in values:
                    continue
                name = entity[0][1]
                if name is None:
                    self._default = values[CONNECTION_RATE]
                elif (address := _address(name)) is not None:
                    self._specific[address] = values[CONNECTION_RATE]
        address = _address(host)
        if address is not None and address in self._specific:
            return self._specific[address]
        return self._default

    def admit(self, quotas: Mapping[QuotaEntity, Mapping[str, float]], host: str) -> int:
        if not quotas:  # no quota of any kind: nothing to measure
            return 0
        now = self._clock()
        self._sweep(now)
        limit = self.limit(quotas, host)
        address = _address(host)
        if limit is None or address is None:
            return 0
        rate = self._rates.get(address)
        if rate is None:
            rate = self._rates[address] = Rate()
        rate.record(1.0, now)
        observed = rate.rate(now)
        if observed <= limit:
            return 0
        rate.record(-1.0, now)  # not accepted: not counted, as Kafka un-records it
        throttle = (observed - limit) / limit * rate.window_ms(now)
        return max(1, min(round(throttle), MAX_CONNECTION_THROTTLE_MS))

    def _sweep(self, now: float) -> None:
        if now - self._swept < SWEEP_EVERY_S:
            return
        self._swept = now
        for address in [a for a, rate in self._rates.items() if rate.idle(now)]:
            del self._rates[address]
