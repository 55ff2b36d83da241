"""A connection to a cluster for one command: confluent-kafka's admin client, producer and
consumer, with one timeout and Kafka's errors turned into one-line `CliError`s."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient

T = TypeVar("T")

EXIT_OK = 0
EXIT_FAILED = 1
"""The cluster answered with an error, or a check failed (e.g. `cluster health`)."""
EXIT_USAGE = 2
"""Bad arguments (click's own code for usage errors)."""
EXIT_UNREACHABLE = 3
"""No answer: the cluster could not be reached, or did not answer within --timeout."""

_QUIET = logging.getLogger("strom.cli.librdkafka")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False


class CliError(Exception):
    """A failure to report in one line, with the exit code scripts can rely on."""

    def __init__(self, message: str, code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.code = code


_UNREACHABLE = {
    KafkaError._TRANSPORT,
    KafkaError._TIMED_OUT,
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError._RESOLVE,
    KafkaError.REQUEST_TIMED_OUT,
}


def describe_error(error: Any, context: str = "") -> CliError:
    """A CliError for a KafkaError or KafkaException: Kafka's error name and its message."""
    if isinstance(error, KafkaException):
        error = error.args[0] if error.args else error
    if isinstance(error, KafkaError):
        name = error.name()
        text = error.str()
        code = EXIT_UNREACHABLE if error.code() in _UNREACHABLE else EXIT_FAILED
        message = f"{name}: {text}" if text and text != name else name
    else:
        message, code = str(error), EXIT_FAILED
    return CliError(f"{context}: {message}" if context else message, code)


@dataclass
class Session:
    """What every command gets: where the cluster is and how long to wait for it."""

    bootstrap: str
    timeout: float
    extra: Mapping[str, str] = field(default_factory=dict)
    """librdkafka properties from -X key=value (security settings, client.id, ...)."""
    _admin: AdminClient | None = None

    def config(self, **more: Any) -> dict[str, Any]:
        return {
            "bootstrap.servers": self.bootstrap,
            "client.id": "strom-cli",
            "logger": _QUIET,
            "socket.connection.setup.timeout.ms": int(self.timeout * 1000),
            **self.extra,
            **more,
        }

    @property
    def admin(self) -> AdminClient:
        if self._admin is None:
            self._admin = AdminClient(self.config())
        return self._admin

    def producer(self, **more: Any) -> Producer:
        return Producer(self.config(**more))

    def consumer(self, **more: Any) -> Consumer:
        return Consumer(self.config(**more))

    def wait(self, future: Future[T], context: str = "") -> T:
        """The result of an admin future, or a CliError naming the Kafka error."""
        try:
            return future.result(timeout=self.timeout)
        except KafkaException as exc:
            raise describe_error(exc, context) from None
        except TimeoutError:
            raise self.unreachable(context) from None

    def wait_all(self, futures: Mapping[str, Future[Any]], what: str) -> dict[str, Any]:
        """Every future's result; the failures reported together in one line."""
        results: dict[str, Any] = {}
        failures: list[CliError] = []
        for name, future in futures.items():
            try:
                results[name] = self.wait(future, f"{what} {name}")
            except CliError as exc:
                failures.append(exc)
        if failures:
            code = max(f.code for f in failures)
            raise CliError("; ".join(str(f) for f in failures), code)
        return results

    def unreachable(self, context: str = "") -> CliError:
        where = f"{context}: " if context else ""
        return CliError(
            f"{where}no answer from {self.bootstrap} within {self.timeout:g}s: check "
            "--brokers (or STROM_BROKERS) and that the cluster is up",
            EXIT_UNREACHABLE,
        )

    def metadata(self) -> Any:
        """ClusterMetadata of every topic (librdkafka's Metadata request; asking for one topic
        by name would let a broker with auto.create.topics.enable create it)."""
        try:
            return self.admin.list_topics(timeout=self.timeout)
        except KafkaException as exc:
            error = describe_error(exc)
            if error.code == EXIT_UNREACHABLE:
                raise self.unreachable() from None
            raise error from None
