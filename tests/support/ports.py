"""A free TCP port on the loopback interface, for the servers the tests start."""

from __future__ import annotations

import random
import socket
from pathlib import Path

_EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")


def _ephemeral_start() -> int:
    """The lowest port the kernel hands out to outgoing connections (Linux's default range starts at 32768)."""
    try:
        return int(_EPHEMERAL.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A port nothing listens on right now, below the kernel's ephemeral range.

    A port the kernel picks (``bind(0)``) lies in that range, where any outgoing connection (a Spark task's, an
    HTTP client's in the other test worker) may take it before the server binds it: an api-server then failed with
    "address already in use". Below the range only another test's server can; the random pick makes that rare.
    """
    low = 20000
    high = max(low + 1000, min(_ephemeral_start(), 65536)) - 1
    for _ in range(200):
        port = random.randint(low, high)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:  # a crowded machine: the kernel's choice
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
