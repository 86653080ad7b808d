"""A running Airflow 3 deployment for tests: API server (with the execution API), scheduler and DAG processor.

The components are the ``airflow`` commands of this interpreter, started on a prepared Airflow home
(:func:`cdclake.airflow_home.prepare`; its SQLite metadata database, or the one ``AIRFLOW__DATABASE__SQL_ALCHEMY_CONN``
names, e.g. PostgreSQL; LocalExecutor) with the API server on a free
localhost port, each in a session of its own with its log under ``logs_dir``. Task processes reach the execution
API of that server (``[core] execution_api_server_url``). State is read straight from the metadata database, so
the test process never imports Airflow.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import time
import urllib.request
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping

from cdclake import airflow_home
from tests.support.ports import free_port

START_TIMEOUT_S = 240


@dataclass
class AirflowStack:
    """Handles of a started stack: its environment (for ``airflow`` CLI calls) and its log files."""

    env: dict[str, str]
    base_url: str
    logs: dict[str, Path]
    processes: dict[str, subprocess.Popen[bytes]]

    def cli(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """Run ``airflow ARGS`` against this deployment; fails the caller with the output on a non-zero exit."""
        proc = subprocess.run([*airflow_home.airflow_command(), *args], env=self.env, capture_output=True, text=True,
                              timeout=timeout, check=False)
        assert proc.returncode == 0, f"airflow {' '.join(args)}: exit {proc.returncode}\n{proc.stderr[-4000:]}"
        return proc

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Rows of a read-only query (``?`` placeholders) on the metadata database: SQLite or PostgreSQL."""
        url = self.env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]
        if url.startswith("postgresql"):
            import psycopg2

            with closing(psycopg2.connect(url.replace("postgresql+psycopg2://", "postgresql://", 1))) as conn:
                with conn.cursor() as cursor:
                    cursor.execute(sql.replace("?", "%s"), params)
                    return cursor.fetchall()
        database = Path(self.env["AIRFLOW_HOME"]) / "airflow.db"
        with closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=30)) as conn:
            return conn.execute(sql, params).fetchall()

    def check_alive(self) -> None:
        for name, proc in self.processes.items():
            assert proc.poll() is None, f"airflow {name} exited ({proc.returncode}):\n{self.tail(name)}"

    def tail(self, name: str, lines: int = 60) -> str:
        return "\n".join(self.logs[name].read_text(errors="replace").splitlines()[-lines:])


def _healthy(base_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base_url}/api/v2/monitor/health", timeout=10) as response:
            return response.status == 200
    except OSError:
        return False


@contextmanager
def airflow_stack(env: Mapping[str, str], logs_dir: Path) -> Iterator[AirflowStack]:
    """Start api-server, scheduler and dag-processor with ``env`` (a prepared home's); stop them on exit."""
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    env = {**env, "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{base_url}/execution/",
           "AIRFLOW__API__BASE_URL": base_url, "AIRFLOW__CORE__PARALLELISM": "4"}
    logs_dir.mkdir(parents=True, exist_ok=True)
    commands = {
        "api-server": ["api-server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
        "scheduler": ["scheduler"],
        "dag-processor": ["dag-processor"],
    }
    stack = AirflowStack(env=env, base_url=base_url, logs={}, processes={})
    handles = []
    try:
        for name, args in commands.items():
            log = logs_dir / f"{name}.log"
            handle = log.open("wb")
            handles.append(handle)
            stack.logs[name] = log
            stack.processes[name] = subprocess.Popen([*airflow_home.airflow_command(), *args], env=env,
                                                     stdout=handle, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _healthy(base_url):
            stack.check_alive()
            assert time.monotonic() < deadline, f"api-server not healthy in {START_TIMEOUT_S}s:\n" + stack.tail(
                "api-server")
            time.sleep(2)
        yield stack
    finally:
        for proc in stack.processes.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in stack.processes.values():
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
        for handle in handles:
            handle.close()
