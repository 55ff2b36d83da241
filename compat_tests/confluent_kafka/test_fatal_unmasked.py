"""ck.fatal_unmasked: the SystemError confluent-kafka 2.16 raises after a fatal error becomes
the fatal KafkaException; any other SystemError passes through."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from compat_tests.confluent_kafka import ck


def test_a_system_error_caused_by_a_fatal_error_is_that_fatal_error() -> None:
    fatal = KafkaException(KafkaError(KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER, fatal=True))
    with pytest.raises(KafkaException) as raised, ck.fatal_unmasked():
        raise SystemError("<built-in function monotonic> returned a result with an exception set") from fatal
    assert raised.value is fatal


def test_any_other_system_error_passes_through() -> None:
    with pytest.raises(SystemError), ck.fatal_unmasked():
        raise SystemError("something else")
