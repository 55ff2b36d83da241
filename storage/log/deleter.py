"""Removing deleted partition directories off the event loop.

`LogManager.delete` renames a partition directory to `<name>.<hex>-delete` (one quick
`rename`) and hands it here: one daemon thread removes such directories in order, since an
`rmtree` of a large log can take seconds (Kafka, too, deletes later: `file.delete.delay.ms`).
Crash rule: whatever is left is removed when the directory is next loaded.
"""

from __future__ import annotations

import logging
import queue
import threading
from pathlib import Path

from strom.storage import disk

log = logging.getLogger(__name__)


class DirectoryDeleter:
    def __init__(self) -> None:
        self._queue: queue.Queue[Path] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def remove(self, path: Path) -> None:
        """Remove `path` (a renamed-away partition directory) soon, on the deleter thread."""
        self._queue.put(path)
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="strom-log-deleter", daemon=True
                )
                self._thread.start()

    def wait(self) -> None:
        """Block until every directory handed over so far is gone (tests, shutdown)."""
        self._queue.join()

    def _run(self) -> None:
        while True:
            path = self._queue.get()
            try:
                disk.rmtree(path)
                log.debug("removed %s", path)
            finally:
                self._queue.task_done()
