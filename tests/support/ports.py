"""A free TCP port on the loopback interface, for the servers the tests start."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port nothing listens on right now (another process may take it before the caller binds it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
