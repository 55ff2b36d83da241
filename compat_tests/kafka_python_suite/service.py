"""`test.service` for kafka-python's integration fixtures, which the PyPI sdist leaves out.

kafka-python's `test/integration/fixtures.py` imports `ExternalService` and `SpawnedService`
from `test/service.py`, a module its repository has and its sdist does not ship. The suite
runner (`compat_tests.kafka_python_suite.suite`) copies this file there. It gives the two
classes the behaviour the fixtures use: `SpawnedService(args, env)` runs a child process in
its own session, keeps its output lines, `wait_for(pattern, timeout)` searches them (case
insensitive, as the fixtures expect), `dump_logs()` prints them and `stop()` terminates the
child (SIGTERM, then SIGKILL after 5 s); `ExternalService(host, port)` stands for a broker
something else runs. It is a thread, as the fixtures call `start()` and `is_alive()` on it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from typing import IO


class ExternalService:
    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port

    def open(self) -> None:
        pass

    def close(self) -> None:
        pass

    def dump_logs(self) -> None:
        pass

    def wait_for(self, pattern: str, timeout: float = 30) -> bool:
        return True


class SpawnedService(threading.Thread):
    def __init__(self, args: list[str] | None = None, env: dict[str, str] | None = None) -> None:
        super().__init__(daemon=True)
        if args is None:
            raise TypeError("args parameter is required")
        self.args = [str(a) for a in args]
        self.env = env
        self.captured_stdout: list[str] = []
        self.captured_stderr: list[str] = []
        self.child: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()

    def run(self) -> None:
        self.child = subprocess.Popen(
            self.args, env=self.env, start_new_session=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        assert self.child.stdout is not None
        assert self.child.stderr is not None
        readers = [
            threading.Thread(target=self._read, args=(self.child.stdout, self.captured_stdout), daemon=True),
            threading.Thread(target=self._read, args=(self.child.stderr, self.captured_stderr), daemon=True),
        ]  # fmt: skip
        for reader in readers:
            reader.start()
        self.child.wait()
        for reader in readers:
            reader.join()

    def _read(self, stream: IO[bytes], into: list[str]) -> None:
        for raw in iter(stream.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip()
            if line:
                with self._lock:
                    into.append(line)

    def dump_logs(self) -> None:
        with self._lock:
            sys.stderr.write("\n".join(self.captured_stderr) + "\n")
            sys.stdout.write("\n".join(self.captured_stdout) + "\n")

    def wait_for(self, pattern: str, timeout: float = 30) -> bool:
        deadline = time.monotonic() + timeout
        regex = re.compile(pattern, re.IGNORECASE)
        while True:
            with self._lock:
                text = "\n".join(self.captured_stdout + self.captured_stderr)
            if regex.search(text):
                return True
            if not self.is_alive() or time.monotonic() >= deadline:
                return False
            time.sleep(0.1)

    def stop(self) -> None:
        child = self.child
        if child is not None and child.poll() is None:
            child.terminate()
            try:
                child.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(child.pid, 9)
        self.join()
