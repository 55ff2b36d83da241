"""DescribeQuorum over `strom.wire` (librdkafka does not send it): one blocking request to the
first bootstrap server that answers, as `kafka-metadata-quorum --bootstrap-server` does
(a broker forwards it to the active controller)."""

from __future__ import annotations

import socket
import time

from strom.cli.session import EXIT_UNREACHABLE, CliError
from strom.wire.connection import CLOSED, NEED_DATA, ClientConnection
from strom.wire.errors import ErrorCode
from strom.wire.messages.describe_quorum import DescribeQuorumRequest, DescribeQuorumResponse

VERSION = 1
"""Kafka 3.3+ answers v1 (the replicas' fetch times); v2 adds only endpoints."""


def describe_quorum(bootstrap: str, timeout: float) -> DescribeQuorumResponse:
    """The quorum of `__cluster_metadata-0` as the first reachable server answers it."""
    failures = []
    for address in (a.strip() for a in bootstrap.split(",") if a.strip()):
        host, _, port = address.rpartition(":")
        try:
            return _ask(host.strip("[]") or "127.0.0.1", int(port), timeout)
        except (OSError, ValueError) as exc:
            failures.append(f"{address}: {exc}")
    raise CliError(
        f"no answer to DescribeQuorum from {bootstrap} ({'; '.join(failures)}): check --brokers",
        EXIT_UNREACHABLE,
    )


def _ask(host: str, port: int, timeout: float) -> DescribeQuorumResponse:
    request = DescribeQuorumRequest(
        topics=[
            DescribeQuorumRequest.TopicData(
                "__cluster_metadata", [DescribeQuorumRequest.PartitionData(0)]
            )
        ]
    )
    conn = ClientConnection("strom-cli")
    deadline = time.monotonic() + timeout
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(conn.send_request(request, VERSION))
        while True:
            event = conn.next_response()
            if event is NEED_DATA:
                sock.settimeout(max(0.01, deadline - time.monotonic()))
                data = sock.recv(65536)
                if not data:
                    raise OSError(
                        "the server closed the connection (it may not serve DescribeQuorum)"
                    )
                conn.receive_data(data)
                continue
            if event is CLOSED:
                raise OSError("the server closed the connection")
            assert isinstance(event, tuple)
            response = event[1]
            assert isinstance(response, DescribeQuorumResponse)
            return response


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)
