"""A real PostgreSQL server for tests, started from Debian's ``postgresql`` binaries in a temporary directory.

The server listens on 127.0.0.1 on a free port, with password (scram-sha-256) authentication for one user, so the
tests exercise the same JDBC/SQLAlchemy URIs and credentials as production. ``postgres`` refuses to run as root:
when the test process is root, the cluster directory is handed to the ``postgres`` system user and every server
binary runs through ``runuser``. Import the fixture into a test module to use it::

    from tests.support.postgres_server import postgres_server  # noqa: F401

``postgres_server`` (session scope) starts one server and stops it, removing its directory, at the end of the run.
"""

from __future__ import annotations

import glob
import os
import secrets
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from tests.support.ports import free_port

START_TIMEOUT_S = 60.0
SYSTEM_USER = "postgres"


def postgres_bin_dir() -> Path:
    """The newest ``/usr/lib/postgresql/<version>/bin`` holding a ``postgres`` binary.

    Raises:
        RuntimeError: The Debian ``postgresql`` package is not installed (``.ci/bootstrap`` installs it).
    """
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"), key=lambda p: int(p.split("/")[4]))
    if not candidates:
        raise RuntimeError("no PostgreSQL server binaries under /usr/lib/postgresql/*/bin: "
                           "apt-get install postgresql (or run .ci/bootstrap)")
    return Path(candidates[-1]).parent


@dataclass(frozen=True)
class PostgresServer:
    """A running server.

    Attributes:
        host: Address it listens on.
        port: TCP port.
        user: The superuser the tests connect as.
        password: Its password.
        directory: Cluster directory (data, socket, log).
    """

    host: str
    port: int
    user: str
    password: str
    directory: Path

    def jdbc_uri(self, database: str) -> str:
        """``jdbc:postgresql://host:port/database`` (credentials travel separately)."""
        return f"jdbc:postgresql://{self.host}:{self.port}/{database}"

    def sqlalchemy_uri(self, database: str) -> str:
        """A psycopg2 SQLAlchemy URI with the credentials."""
        return f"postgresql+psycopg2://{self.user}:{self.password}@{self.host}:{self.port}/{database}"

    def create_database(self, name: str) -> None:
        """Create a database (``CREATE DATABASE``) owned by :attr:`user`."""
        import psycopg2

        conn = psycopg2.connect(host=self.host, port=self.port, user=self.user, password=self.password,
                                dbname="postgres")
        try:
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute(f'CREATE DATABASE "{name}"')
        finally:
            conn.close()

    def lake_env(self, database: str) -> dict[str, str]:
        """``CDCLAKE_CATALOG_*`` variables pointing a lake's Iceberg catalog at a database of this server."""
        return {"CDCLAKE_CATALOG_URI": self.jdbc_uri(database), "CDCLAKE_CATALOG_USER": self.user,
                "CDCLAKE_CATALOG_PASSWORD": self.password}


def _as_server_user(argv: list[str]) -> list[str]:
    # postgres and initdb refuse to run as root; run them as the postgres system user instead.
    return ["runuser", "-u", SYSTEM_USER, "--", *argv] if os.geteuid() == 0 else argv


def _run(argv: list[str]) -> None:
    proc = subprocess.run(_as_server_user(argv), capture_output=True, text=True, timeout=120, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed (exit {proc.returncode}):\n{proc.stdout[-2000:]}"
                           f"\n{proc.stderr[-2000:]}")


def start_postgres(user: str = "cdclake") -> PostgresServer:
    """Initialise a cluster in a fresh temporary directory and start a server on a free 127.0.0.1 port.

    Args:
        user: Name of the superuser to create (with a random password).

    Returns:
        The running server; stop it with :func:`stop_postgres`.

    Raises:
        RuntimeError: initdb failed or the server did not accept connections in time (the message holds its log).
    """
    bin_dir = postgres_bin_dir()
    # Not under pytest's tmp_path: that lives in a 0700 directory of root the postgres user cannot enter.
    directory = Path(tempfile.mkdtemp(prefix="cdclake-pg-"))
    password = secrets.token_hex(12)
    (directory / "pwfile").write_text(password + "\n")
    if os.geteuid() == 0:
        shutil.chown(directory, user=SYSTEM_USER)
        shutil.chown(directory / "pwfile", user=SYSTEM_USER)
    data = directory / "data"
    _run([str(bin_dir / "initdb"), "-D", str(data), "-U", user, "--pwfile", str(directory / "pwfile"),
          "--auth=scram-sha-256", "-E", "UTF8", "--no-sync", "--locale=C"])
    last_error = ""
    for _ in range(3):  # the free port can be taken between choosing it and binding it
        port = free_port()
        options = f"-h 127.0.0.1 -p {port} -k {directory} -c fsync=off -c max_connections=50"
        proc = subprocess.run(_as_server_user([str(bin_dir / "pg_ctl"), "-D", str(data), "-l",
                                               str(directory / "server.log"), "-o", options, "-w", "-t",
                                               str(int(START_TIMEOUT_S)), "start"]),
                              capture_output=True, text=True, timeout=START_TIMEOUT_S + 30, check=False)
        if proc.returncode == 0:
            server = PostgresServer("127.0.0.1", port, user, password, directory)
            _wait_ready(server)
            return server
        log_file = directory / "server.log"
        last_error = proc.stderr + (log_file.read_text()[-2000:] if log_file.exists() else "")
    shutil.rmtree(directory, ignore_errors=True)
    raise RuntimeError(f"PostgreSQL did not start in {directory}:\n{last_error}")


def _wait_ready(server: PostgresServer) -> None:
    import psycopg2

    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            psycopg2.connect(host=server.host, port=server.port, user=server.user, password=server.password,
                             dbname="postgres", connect_timeout=2).close()
            return
        except psycopg2.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def stop_postgres(server: PostgresServer) -> None:
    """Stop the server (fast shutdown) and remove its directory."""
    pg_ctl = postgres_bin_dir() / "pg_ctl"
    subprocess.run(_as_server_user([str(pg_ctl), "-D", str(server.directory / "data"), "-m", "fast", "-w",
                                    "stop"]), capture_output=True, timeout=60, check=False)
    shutil.rmtree(server.directory, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A PostgreSQL server for the test run (see the module docstring)."""
    server = start_postgres()
    try:
        yield server
    finally:
        stop_postgres(server)
