"""Every advertised API's request, at every advertised version, decoded from hostile bytes.

What the server does with a frame (`wire.Connection` framing, then `decode_request`)
must end in a request or `ProtocolError` -- never IndexError, struct.error,
UnicodeDecodeError, MemoryError or a hang. Valid messages come from the same JSON
model as `tests/wire/schema_strategies.py`; `tests/fuzz/corpus.py` corrupts them.
"""

from __future__ import annotations

import random
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strom.wire.connection import CLOSED, NEED_DATA, Connection, Request, UnsupportedRequest
from strom.wire.errors import ErrorCode, ProtocolError
from tests.fuzz.corpus import MUTATIONS, Api, advertised_apis, frame, mutate, pairs, random_body
from tests.wire.schema_strategies import struct_strategy

PAIRS = pairs()
APIS = advertised_apis()
API_IDS = [api.cls.NAME for api in APIS]
PER_API = settings(
    max_examples=15,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
"""Examples per API (versions drawn); `test_seeded_mutations` covers every version for sure."""


def _serve_frames(data: bytes) -> list[Request | UnsupportedRequest]:
    """What the server's read loop does with `data` then end of stream."""
    conn = Connection(max_frame_size=1 << 20)
    conn.receive_data(data)
    conn.receive_data(b"")
    out: list[Request | UnsupportedRequest] = []
    while True:
        event = conn.next_event()
        if event is CLOSED or event is NEED_DATA:
            return out
        assert isinstance(event, Request | UnsupportedRequest)
        out.append(event)


def _survives(data: bytes) -> None:
    try:
        _serve_frames(data)
    except ProtocolError as exc:
        error = exc.error
    else:
        return
    assert isinstance(error, ErrorCode)


def test_every_advertised_api_and_version_is_fuzzed() -> None:
    from strom.broker.handlers import HANDLERS

    covered = {(api.key, v) for api, v in PAIRS}
    for handler in HANDLERS.values():
        for version in range(max(handler.min_version, 0), handler.max_version + 1):
            assert (handler.api_key, version) in covered


@pytest.mark.parametrize("api", APIS, ids=API_IDS)
@PER_API
@given(data=st.data())
def test_mutated_valid_request(api: Api, data: st.DataObject) -> None:
    version = data.draw(st.sampled_from(api.versions))
    body = data.draw(struct_strategy(api.schema, api.cls, api.schema.fields, version))
    good = frame(api.key, version, 7, body.encode(version), "fuzz")
    (decoded,) = _serve_frames(good)
    assert isinstance(decoded, Request)
    assert decoded.body == body
    rng = data.draw(st.randoms(use_true_random=False))
    bad = good
    for _ in range(data.draw(st.integers(1, 3))):
        bad, _name = mutate(rng, bad)
    _survives(bad)


@pytest.mark.parametrize("api", APIS, ids=API_IDS)
def test_seeded_mutations(api: Api) -> None:
    """Every mutation, several times, on requests of every version drawn like the socket fuzzer's."""
    for version in api.versions:
        _seeded_mutations(api, version)


def _seeded_mutations(api: Api, version: int) -> None:
    rng = random.Random(f"{api.key}:{version}")
    good = frame(api.key, version, 1, random_body(rng, api, version).encode(version), "fuzz")
    _serve_frames(good)
    for name, corrupt in MUTATIONS.items():
        for _ in range(4):
            bad = bytearray(good)
            corrupt(rng, bad)
            try:
                _serve_frames(bytes(bad))
            except ProtocolError:
                pass
            except Exception as exc:
                raise AssertionError(f"{name} on {api.cls.NAME} v{version}: {bad.hex()}") from exc


@settings(max_examples=200, deadline=None, database=None)
@given(
    api_version=st.sampled_from(PAIRS),
    body=st.binary(max_size=200),
)
def test_random_body_behind_a_valid_header(api_version: tuple[Api, int], body: bytes) -> None:
    api, version = api_version
    _survives(frame(api.key, version, 3, body, "fuzz"))


@settings(max_examples=200, deadline=None, database=None)
@given(
    key=st.integers(-(2**15), 2**15 - 1),
    version=st.integers(-(2**15), 2**15 - 1),
    rest=st.binary(max_size=64),
)
def test_random_api_key_and_version(key: int, version: int, rest: bytes) -> None:
    payload = struct.pack(">hh", key, version) + rest
    _survives(struct.pack(">i", len(payload)) + payload)


@settings(max_examples=200, deadline=None, database=None)
@given(stream=st.binary(max_size=300))
def test_random_stream(stream: bytes) -> None:
    _survives(stream)
