"""Structured logs: one `key=value` line per event (logfmt), to stderr.

Lines look like `ts=2026-11-21T13:05:18.123Z level=INFO logger=strom.broker
msg="Strom 0.1.0 started: ..."`, easy to grep and to parse.
"""

from __future__ import annotations

import logging
import sys
import time


class LogfmtFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        msg = record.getMessage().replace("\\", "\\\\").replace('"', '\\"')
        line = (
            f'ts={ts}.{int(record.msecs):03d}Z level={record.levelname} '
            f'logger={record.name} msg="{msg}"'
        )
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def setup_logging(level: int) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(LogfmtFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
