"""Crash points for fault-injection tests.

``CDCLAKE_FAULT=<point>[,<point>...]`` makes the process kill itself with SIGKILL (no cleanup, no ``finally``)
when it reaches a named point, which is what a machine loss or an OOM kill looks like. Unset in production: a point
costs one environment lookup.

Points: ``apply:after-changelog``, ``apply:after-history``, ``apply:after-cut``, ``apply:after-merge``, ``apply:after-tombstones``, and the
Kafka lander's ``after-manifest``, ``mid-files``, ``before-commit`` (:mod:`cdclake.kafka`).
"""

from __future__ import annotations

import logging
import os
import signal

from cdclake.exceptions import ConfigError

log = logging.getLogger(__name__)

ENV = "CDCLAKE_FAULT"
POINTS = ("apply:after-changelog", "apply:after-history", "apply:after-cut", "apply:after-merge", "apply:after-tombstones",
          "after-manifest", "mid-files", "before-commit")


def check() -> None:
    """Refuse a ``CDCLAKE_FAULT`` that names no crash point (a typo would silently test nothing)."""
    wanted = os.environ.get(ENV)
    unknown = [p for p in (wanted or "").split(",") if p and p not in POINTS]
    if unknown:
        raise ConfigError(f"{ENV}={wanted!r}: {', '.join(unknown)} is not one of {', '.join(POINTS)} "
                          "(a test hook; unset it)")


def point(name: str) -> None:
    """Die here, by SIGKILL, when ``CDCLAKE_FAULT`` names this point."""
    wanted = os.environ.get(ENV)
    if wanted and name in wanted.split(","):
        log.warning("CDCLAKE_FAULT: killing this process at %s", name)
        for handler in logging.getLogger().handlers:
            handler.flush()
        os.kill(os.getpid(), signal.SIGKILL)
