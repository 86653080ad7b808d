"""A local Airflow environment for the embedded default: this repo's DAGs on a SQLite metadata database.

``AIRFLOW_HOME`` is ``<repo>/.airflow`` unless another directory is given. It holds an ``airflow.cfg`` that this
module writes (DAGs folder ``<repo>/dags``, plugins folder ``<repo>/plugins``, no example DAGs, SQLite metadata
database, and secrets generated once), so ``AIRFLOW_HOME=<repo>/.airflow airflow standalone`` (with the
virtualenv's ``bin`` on ``PATH``: standalone starts its components as ``airflow`` subprocesses) shows the same
runs in the UI without any other setting. :func:`prepare` migrates the metadata database once and returns the
environment to run ``airflow`` subprocesses with; ``eval "$(python -m cdclake.airflow_home)"`` sets up a shell.

Nothing here imports Airflow: Airflow reads its configuration when it is first imported, so the process that
sets up the environment must not be the one that runs it.
"""

from __future__ import annotations

import base64
import configparser
import fcntl
import json
import os
import shlex
import sqlite3
import subprocess
import sys
from contextlib import closing
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any, Mapping

from cdclake.exceptions import ConfigError

REPO_ROOT = Path(__file__).resolve().parents[2]
"""The repository checkout this package lives in (``include/cdclake/`` is two levels down)."""

DEFAULT_HOME = REPO_ROOT / ".airflow"

_MARKER = ".cdclake-migrated"
_CFG_HEADER = "# Written by cdclake.airflow_home; settings below are rewritten, secrets are kept.\n"


def airflow_command() -> list[str]:
    """The command that runs the Airflow CLI of this interpreter's environment (no reliance on ``PATH``)."""
    return [sys.executable, "-m", "airflow"]


def settings_for(home: Path) -> dict[tuple[str, str], str]:
    """The Airflow settings this module manages, as ``(section, key) -> value``.

    Args:
        home: The ``AIRFLOW_HOME`` directory.

    Returns:
        Settings written to ``airflow.cfg`` and also exported as ``AIRFLOW__SECTION__KEY`` variables, so a stray
        variable in the caller's environment cannot point Airflow at another DAGs folder or database.
    """
    return {
        ("core", "dags_folder"): str(REPO_ROOT / "dags"),
        ("core", "plugins_folder"): str(REPO_ROOT / "plugins"),
        ("core", "load_examples"): "False",
        # LocalExecutor is what `airflow standalone` uses; `airflow dags test` runs tasks in-process regardless.
        ("core", "executor"): "LocalExecutor",
        ("database", "sql_alchemy_conn"): f"sqlite:///{home / 'airflow.db'}",
        ("logging", "base_log_folder"): str(home / "logs"),
    }


def _secrets(existing: configparser.ConfigParser) -> dict[tuple[str, str], str]:
    """Secrets kept from an existing ``airflow.cfg`` or generated once.

    Airflow only generates ``jwt_secret`` and ``fernet_key`` when it writes its own default ``airflow.cfg``; since
    this module writes the file, it must provide them. They must stay stable across processes: the scheduler
    signs the execution-API tokens that the API server verifies with ``jwt_secret``, and ``fernet_key``
    encrypts connections and variables in the metadata database.
    """
    wanted = {
        ("core", "fernet_key"): lambda: base64.urlsafe_b64encode(os.urandom(32)).decode(),
        ("api_auth", "jwt_secret"): lambda: base64.b64encode(os.urandom(32)).decode(),
        ("api", "secret_key"): lambda: base64.b64encode(os.urandom(16)).decode(),
    }
    return {
        (section, key): existing.get(section, key, fallback="") or make()
        for (section, key), make in wanted.items()
    }


def write_config(home: Path) -> Path:
    """Write ``<home>/airflow.cfg`` with the managed settings, keeping secrets already there.

    Args:
        home: The ``AIRFLOW_HOME`` directory (created if missing).

    Returns:
        The path of the configuration file.
    """
    home.mkdir(parents=True, exist_ok=True)
    path = home / "airflow.cfg"
    parser = configparser.ConfigParser(interpolation=None)
    if path.exists():
        parser.read(path)
    values = {**_secrets(parser), **settings_for(home)}
    for (section, key), value in values.items():
        if not parser.has_section(section):
            parser.add_section(section)
        parser.set(section, key, value)
    tmp = path.with_suffix(".cfg.tmp")
    with tmp.open("w") as handle:
        handle.write(_CFG_HEADER)
        parser.write(handle)
    tmp.chmod(0o600)
    tmp.replace(path)
    return path


def airflow_env(home: str | os.PathLike[str] | None = None, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for ``airflow`` subprocesses that use the local Airflow home.

    Args:
        home: ``AIRFLOW_HOME``; default ``<repo>/.airflow``.
        base: Environment to start from (default ``os.environ``).

    Returns:
        A copy of ``base`` with ``AIRFLOW_HOME``, ``AIRFLOW_CONFIG``, the managed settings as ``AIRFLOW__*``
        variables, this interpreter's ``bin`` directory first on ``PATH`` and ``<repo>/include`` first on
        ``PYTHONPATH``.
    """
    home_path = Path(home).expanduser().resolve() if home is not None else DEFAULT_HOME
    env = dict(os.environ if base is None else base)
    env["AIRFLOW_HOME"] = str(home_path)
    env["AIRFLOW_CONFIG"] = str(home_path / "airflow.cfg")
    for (section, key), value in settings_for(home_path).items():
        env[f"AIRFLOW__{section.upper()}__{key.upper()}"] = value
    # `airflow standalone` starts its components as `airflow ...` subprocesses found on PATH.
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join([bin_dir, *(p for p in env.get("PATH", "").split(os.pathsep) if p != bin_dir)])
    include = str(REPO_ROOT / "include")
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != include]
    env["PYTHONPATH"] = os.pathsep.join([include, *paths])
    return env


def _marker_text(home: Path) -> str:
    return json.dumps({"airflow": metadata.version("apache-airflow-core"),
                       "database": settings_for(home)[("database", "sql_alchemy_conn")]}, sort_keys=True)


def _migrated(home: Path) -> bool:
    marker = home / _MARKER
    database = home / "airflow.db"
    if not (marker.is_file() and database.is_file() and marker.read_text() == _marker_text(home)):
        return False
    with closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True)) as conn:
        row = conn.execute("SELECT name FROM sqlite_master WHERE type='table' AND name='alembic_version'").fetchone()
    return row is not None


def _airflow(args: list[str], env: Mapping[str, str], home: Path) -> None:
    proc = subprocess.run([*airflow_command(), *args], env=dict(env), capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-20:])
        raise ConfigError(f"airflow {' '.join(args)} failed in {home} (exit {proc.returncode}):\n{tail}")


def prepare(home: str | os.PathLike[str] | None = None, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """Set up the local Airflow home (config file and migrated metadata database) and return its environment.

    Idempotent and quick once done: ``airflow db migrate`` (and ``airflow dags reserialize``) run only when the
    database is missing or was migrated by another Airflow version. Concurrent callers wait on a file lock.

    Args:
        home: ``AIRFLOW_HOME``; default ``<repo>/.airflow``.
        base: Environment to start from (default ``os.environ``).

    Returns:
        The environment to run ``airflow`` subprocesses with (see :func:`airflow_env`).

    Raises:
        ConfigError: An ``airflow`` setup command failed; the message holds the end of its output.
    """
    env = airflow_env(home, base)
    home_path = Path(env["AIRFLOW_HOME"])
    home_path.mkdir(parents=True, exist_ok=True)
    with (home_path / ".cdclake.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        write_config(home_path)
        if not _migrated(home_path):
            # `dags reserialize` makes `airflow dags list` show the DAGs at once; `dags test` syncs them anyway.
            for step in (["db", "migrate"], ["dags", "reserialize"]):
                _airflow(step, env, home_path)
            (home_path / _MARKER).write_text(_marker_text(home_path))
    return env


def run_xcom(env: Mapping[str, str], dag_id: str, logical_date: datetime, task_id: str) -> Any:
    """The ``return_value`` XCom of a task in the DAG run of a logical date, read from the SQLite metadata database.

    Used after ``airflow dags test`` to show what a run did without importing Airflow into the caller.

    Args:
        env: Environment from :func:`prepare`.
        dag_id: The DAG.
        logical_date: The run's logical date (timezone-aware; a DAG has one run per logical date).
        task_id: The task whose return value to read.

    Returns:
        The decoded value, or None when the run or the XCom does not exist (e.g. the task was skipped).
    """
    # SQLAlchemy stores UTC datetimes in SQLite as naive "YYYY-MM-DD HH:MM:SS.ffffff" text.
    stored_date = logical_date.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")
    database = Path(env["AIRFLOW_HOME"]) / "airflow.db"
    with closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True)) as conn:
        row = conn.execute(
            "SELECT x.value FROM xcom x JOIN dag_run r ON x.dag_id = r.dag_id AND x.run_id = r.run_id"
            " WHERE r.dag_id = ? AND r.logical_date = ? AND x.task_id = ? AND x.map_index = -1"
            " AND x.key = 'return_value'",
            (dag_id, stored_date, task_id),
        ).fetchone()
    if row is None or row[0] is None:
        return None
    value = row[0]
    # XCom values are stored as JSON; SQLite hands numbers back as numbers.
    if isinstance(value, bytes):
        value = value.decode()
    return json.loads(value) if isinstance(value, str) else value


def main(argv: list[str] | None = None) -> int:
    """Prepare the local Airflow home and print ``export`` lines for a shell (``python -m cdclake.airflow_home``)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m cdclake.airflow_home", description=main.__doc__)
    parser.add_argument("--home", type=Path, help="AIRFLOW_HOME (default: <repo>/.airflow)")
    args = parser.parse_args(argv)
    try:
        env = prepare(args.home)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for key in sorted(k for k in env if k.startswith("AIRFLOW") or k in ("PATH", "PYTHONPATH")):
        print(f"export {key}={shlex.quote(env[key])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
