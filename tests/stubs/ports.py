"""Loopback ports for tests and benchmarks that start a server process: a free one, and waiting until it listens."""

from __future__ import annotations

import socket
import time


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(*ports: int, timeout: float = 60.0) -> None:
    """Return once something listens on every port on 127.0.0.1; raise TimeoutError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    for port in ports:
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if time.monotonic() > deadline:
                raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout:g} s")
            time.sleep(0.05)
