"""Table locks (``cdclake.locks``) in both catalogs: a second writer of a table waits and says who holds the lock, a
writer of another table does not wait, a wait that outlasts the timeout fails naming the holder, and a holder killed
with ``kill -9`` releases the lock. The PostgreSQL cases run against a real server (Debian's ``postgresql``)."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from cdclake.exceptions import TableLockTimeout
from cdclake.locks import catalog_lock
from tests.support.postgres_server import PostgresServer, postgres_server  # noqa: F401

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(params=["sqlite", "postgresql"])
def catalog(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    """``catalog_lock`` arguments for a catalog of each kind."""
    if request.param == "sqlite":
        return {"catalog_uri": f"jdbc:sqlite:{tmp_path / 'catalog.db'}"}
    server: PostgresServer = request.getfixturevalue("postgres_server")
    return {"catalog_uri": server.jdbc_uri("postgres"), "user": server.user, "password": server.password}


def _hold_in_thread(catalog: dict[str, str], tid: str, purpose: str):
    """Take the lock in another thread; return (taken event, release event, thread)."""
    taken, release = threading.Event(), threading.Event()

    def hold() -> None:
        with catalog_lock(tid=tid, purpose=purpose, **catalog):
            taken.set()
            release.wait(60)

    thread = threading.Thread(target=hold)
    thread.start()
    assert taken.wait(60), "the first holder never got the lock"
    return release, thread


def test_a_second_writer_waits_and_names_the_holder(catalog, caplog, monkeypatch) -> None:
    release, holder = _hold_in_thread(catalog, "shop.orders", "apply of batch b-1")
    try:
        # Another table is not blocked.
        with catalog_lock(tid="shop.customers", purpose="apply of batch b-2", **catalog):
            pass
        waited, done = [], threading.Event()

        def second() -> None:
            started = time.monotonic()
            with catalog_lock(tid="shop.orders", purpose="maintenance", **catalog):
                waited.append(time.monotonic() - started)
            done.set()

        with caplog.at_level(logging.INFO, logger="cdclake.locks"):
            other = threading.Thread(target=second)
            other.start()
            deadline = time.monotonic() + 30
            while not any("waiting for its lock" in r.getMessage() for r in caplog.records):
                assert time.monotonic() < deadline, "the second writer never reported waiting"
                time.sleep(0.05)
            assert not done.is_set()
            time.sleep(0.5)
            release.set()
            other.join(30)
        assert done.is_set() and waited[0] >= 0.5
        message = next(r.getMessage() for r in caplog.records if "waiting for its lock" in r.getMessage())
        assert "shop.orders" in message and "apply of batch b-1" in message and f":{os.getpid()}" in message, message
    finally:
        release.set()
        holder.join(30)


def test_a_wait_past_the_timeout_fails_naming_the_holder(catalog, monkeypatch) -> None:
    monkeypatch.setenv("CDCLAKE_TABLE_LOCK_TIMEOUT", "1")
    release, holder = _hold_in_thread(catalog, "shop.orders", "apply of batch b-7")
    try:
        started = time.monotonic()
        with pytest.raises(TableLockTimeout, match=r"shop\.orders.*apply of batch b-7.*after 1 s"):
            with catalog_lock(tid="shop.orders", purpose="apply of batch b-8", **catalog):
                pass
        assert 1 <= time.monotonic() - started < 10
    finally:
        release.set()
        holder.join(30)
    with catalog_lock(tid="shop.orders", purpose="apply of batch b-8", **catalog):
        pass


def test_a_holder_killed_with_sigkill_releases_the_lock(catalog, monkeypatch) -> None:
    script = ("import sys, time\n"
              "from cdclake.locks import catalog_lock\n"
              "kwargs = dict(zip(sys.argv[1::2], sys.argv[2::2]))\n"
              "with catalog_lock(tid='shop.orders', purpose='doomed apply', **kwargs):\n"
              "    print('held', flush=True)\n"
              "    time.sleep(600)\n")
    argv = [sys.executable, "-c", script, *(x for pair in catalog.items() for x in pair)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "include"), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        monkeypatch.setenv("CDCLAKE_TABLE_LOCK_TIMEOUT", "1")
        with pytest.raises(TableLockTimeout, match="doomed apply"):
            with catalog_lock(tid="shop.orders", purpose="apply", **catalog):
                pass
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
        monkeypatch.setenv("CDCLAKE_TABLE_LOCK_TIMEOUT", "20")
        with catalog_lock(tid="shop.orders", purpose="apply after the crash", **catalog):
            pass
    finally:
        proc.kill()
        proc.wait(30)
