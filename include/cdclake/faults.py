"""Crash points for fault-injection tests.

``CDCLAKE_FAULT=<point>[,<point>...]`` makes the process kill itself with SIGKILL (no cleanup, no ``finally``)
when it reaches a named point, which is what a machine loss or an OOM kill looks like. Unset in production: a point
costs one environment lookup.

Points: ``apply:after-changelog``, ``apply:after-cut``, ``apply:after-merge``, ``apply:after-tombstones``.
"""

from __future__ import annotations

import logging
import os
import signal

log = logging.getLogger(__name__)


def point(name: str) -> None:
    """Die here, by SIGKILL, when ``CDCLAKE_FAULT`` names this point."""
    wanted = os.environ.get("CDCLAKE_FAULT")
    if wanted and name in wanted.split(","):
        log.warning("CDCLAKE_FAULT: killing this process at %s", name)
        for handler in logging.getLogger().handlers:
            handler.flush()
        os.kill(os.getpid(), signal.SIGKILL)
