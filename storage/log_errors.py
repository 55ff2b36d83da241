"""Exceptions the log raises, each carrying the Kafka error code a handler should return.

Handlers map `LogError.error` straight into the response; `record_errors` feeds
ProduceResponse's per-record error list (batch_index, message).
"""

from __future__ import annotations

from collections.abc import Sequence

from strom.wire.errors import ErrorCode


class LogError(Exception):
    """Any log failure that has a Kafka error code."""

    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


class LogAppendError(LogError):
    """An append was rejected; the log is exactly as it was before the call."""

    def __init__(
        self,
        error: ErrorCode,
        message: str,
        record_errors: Sequence[tuple[int, str]] | None = None,
    ) -> None:
        super().__init__(error, message)
        self.record_errors: list[tuple[int, str]] = list(record_errors or ())


class KafkaStorageError(LogAppendError):
    """The disk failed (ENOSPC, EIO...): the partition stops taking appends but still serves reads."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.KAFKA_STORAGE_ERROR, message)


class OffsetOutOfRange(LogError):
    """A read or query named an offset outside [log_start_offset, log_end_offset]."""

    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(
            ErrorCode.OFFSET_OUT_OF_RANGE,
            f"offset {offset} is outside [{log_start_offset}, {log_end_offset}]",
        )
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class CorruptLogError(LogError):
    """Stored bytes that were trusted (validated on write or recovery) no longer parse."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.CORRUPT_MESSAGE, message)
