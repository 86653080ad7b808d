"""One writer per table: an apply (or a maintenance run) holds its table's lock from its first read of the table to
its last commit.

Iceberg's optimistic commits protect each table on its own. An apply reads and writes more than its table, though:
it classifies its changes against the table, its tombstones and its cut (``cdclake_meta.tombstones``), then commits
the table, then the tombstones. A commit another apply makes between that classification and the MERGE is not a
conflict Iceberg can see. For example, a delete of a key the table does not hold changes only the tombstones, and
the first apply's older insert of that key would then add it again. The lock closes that window.

The lock lives where the catalog does, and is released when its holder dies (``kill -9`` included):

- SQLite catalog (one machine): an ``flock`` on ``<catalog file>.locks/<table>.lock``. The file holds who has it.
- PostgreSQL catalog: a session advisory lock (``pg_try_advisory_lock``) on a connection of its own, named
  ``cdclake lock <n>`` in ``pg_stat_activity`` (its last statement says who holds it).

A waiter logs who holds the lock every 30 seconds. It gives up after ``CDCLAKE_TABLE_LOCK_TIMEOUT`` seconds (default
3600) with ``TableLockTimeout``. ``CDCLAKE_TABLE_LOCK=off`` turns locking off, for a deployment that runs one writer
per table by other means; commit conflicts are still retried then, but the window above is open.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import hashlib
import json
import logging
import os
import re
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator

from cdclake.exceptions import ConfigError, TableLockTimeout
from cdclake.settings import CATALOG_NAME, sqlalchemy_uri

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

TIMEOUT_ENV = "CDCLAKE_TABLE_LOCK_TIMEOUT"
SWITCH_ENV = "CDCLAKE_TABLE_LOCK"
DEFAULT_TIMEOUT_S = 3600.0
REPORT_EVERY_S = 30.0
POLL_S = 0.2


def _timeout_s() -> float:
    text = os.environ.get(TIMEOUT_ENV, "")
    try:
        value = float(text) if text else DEFAULT_TIMEOUT_S
    except ValueError:
        raise ConfigError(f"{TIMEOUT_ENV}={text!r}: expected a number of seconds") from None
    if value < 0:
        raise ConfigError(f"{TIMEOUT_ENV}={text!r}: expected a number of seconds >= 0")
    return value


def _enabled() -> bool:
    text = os.environ.get(SWITCH_ENV, "on").strip().lower()
    if text not in ("on", "off"):
        raise ConfigError(f"{SWITCH_ENV}={text!r}: expected on or off")
    return text == "on"


def _holder(purpose: str) -> str:
    return f"{purpose} on {socket.gethostname()}:{os.getpid()}"


def _wait(tid: str, purpose: str, try_once: Callable[[], bool], held_by: Callable[[], str]) -> None:
    """Call ``try_once`` until it takes the lock, reporting the holder now and then; raise after the timeout."""
    if try_once():
        return
    timeout, started = _timeout_s(), time.monotonic()
    log.info("table %s: waiting for its lock (%s), held by %s", tid, purpose, held_by())
    reported = started
    while not try_once():
        now = time.monotonic()
        if now - started >= timeout:
            raise TableLockTimeout(
                f"table {tid}: its lock was still held by {held_by()} after {timeout:.0f} s ({TIMEOUT_ENV}); "
                f"another apply or maintenance run of the table is running or hung")
        if now - reported >= REPORT_EVERY_S:
            log.info("table %s: still waiting for its lock after %.0f s, held by %s", tid, now - started, held_by())
            reported = now
        time.sleep(POLL_S)
    log.info("table %s: lock taken after %.1f s", tid, time.monotonic() - started)


def _file_name(tid: str) -> str:
    digest = hashlib.sha256(tid.encode()).hexdigest()[:12]
    return f"{re.sub(r'[^A-Za-z0-9_.-]', '_', tid)[:100]}-{digest}.lock"


@contextlib.contextmanager
def _file_lock(database: Path, tid: str, purpose: str) -> Iterator[None]:
    directory = database.parent / f"{database.name}.locks"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / _file_name(tid)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        def try_once() -> bool:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                return False

        def held_by() -> str:
            try:
                info = json.loads(path.read_text() or "{}")
            except (OSError, ValueError):
                info = {}
            return f"{info.get('holder', 'another process')} since {info.get('since', '?')} ({path})"

        _wait(tid, purpose, try_once, held_by)
        note = json.dumps({"holder": _holder(purpose), "table": tid,
                           "since": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")})
        os.ftruncate(fd, 0)
        os.pwrite(fd, note.encode(), 0)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def advisory_key(tid: str) -> int:
    """The 64-bit PostgreSQL advisory lock key of a table (signed, as ``pg_advisory_lock`` takes it)."""
    return int.from_bytes(hashlib.sha256(f"cdclake table {tid}".encode()).digest()[:8], "big", signed=True)


@contextlib.contextmanager
def _advisory_lock(uri: str, tid: str, purpose: str) -> Iterator[None]:
    from sqlalchemy import create_engine, text
    from sqlalchemy.pool import NullPool

    key = advisory_key(tid)
    name = f"cdclake lock {key & 0xFFFFFFFFFFFFFFFF:x}"
    engine = create_engine(uri, poolclass=NullPool, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            def try_once() -> bool:
                return bool(conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": key}).scalar())

            def held_by() -> str:
                row = conn.execute(text("SELECT query, query_start FROM pg_stat_activity WHERE application_name = :n "
                                        "LIMIT 1"), {"n": name}).first()
                found = re.search(r"/\* cdclake lock holder: (.*?) \*/", row[0] or "") if row else None
                return f"{found.group(1)} since {row[1]:%Y-%m-%dT%H:%M:%S%z}" if found else "another session"

            _wait(tid, purpose, try_once, held_by)
            # A waiter finds the holder's session by its name, and who it is in the text of its last statement.
            holder = _holder(purpose).replace("*/", "* /").replace("%", "%%")
            conn.exec_driver_sql(
                f"/* cdclake lock holder: {holder} */ SELECT set_config('application_name', %s, false)", (name,))
            try:
                yield
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": key})
    finally:
        engine.dispose()


def catalog_of(spark: "SparkSession") -> tuple[str, str | None, str | None]:
    """The JDBC URI and credentials of the session's lake catalog."""
    prefix = f"spark.sql.catalog.{CATALOG_NAME}"
    return (spark.conf.get(f"{prefix}.uri"), spark.conf.get(f"{prefix}.jdbc.user", None) or None,
            spark.conf.get(f"{prefix}.jdbc.password", None) or None)


@contextlib.contextmanager
def catalog_lock(catalog_uri: str, tid: str, purpose: str, *, user: str | None = None,
                 password: str | None = None) -> Iterator[None]:
    """Hold a table's lock in a catalog (a JDBC URI, as ``CDCLAKE_CATALOG_URI``) for the ``with`` block.

    Args:
        catalog_uri: ``jdbc:sqlite:<file>`` or ``jdbc:postgresql://host:port/db``.
        tid: ``namespace.table``.
        purpose: What the holder does (``apply of batch …``), shown to waiters.
        user: / password: Catalog credentials.

    Raises:
        TableLockTimeout: Another writer held the lock for longer than ``CDCLAKE_TABLE_LOCK_TIMEOUT`` seconds.
    """
    if not _enabled():
        yield
        return
    if catalog_uri.startswith("jdbc:sqlite:"):
        lock = _file_lock(Path(catalog_uri[len("jdbc:sqlite:"):]), tid, purpose)
    else:
        lock = _advisory_lock(sqlalchemy_uri(catalog_uri, user, password), tid, purpose)
    with lock:
        yield


@contextlib.contextmanager
def table_lock(spark: "SparkSession", tid: str, purpose: str) -> Iterator[None]:
    """Hold the table's lock in the session's lake catalog for the ``with`` block (see :func:`catalog_lock`)."""
    uri, user, password = catalog_of(spark)
    with catalog_lock(uri, tid, purpose, user=user, password=password):
        yield
