"""A real Spark standalone cluster for tests: one master and one worker started with pyspark's ``spark-class`` on
127.0.0.1, free ports, a temporary work directory. Import the fixture into a test module to use it::

    from tests.support.spark_cluster import spark_cluster  # noqa: F401

``spark_cluster`` (module scope) yields a :class:`SparkCluster` and stops both processes afterwards.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest

from cdclake.cluster import spark_home
from tests.support.ports import free_port

START_TIMEOUT_S = 120.0


@dataclass
class SparkCluster:
    """A running master + worker.

    Attributes:
        master_url: ``spark://127.0.0.1:PORT``.
        ui_url: The master's web UI (``/json/`` gives its state).
        work_dir: The worker's work directory (one directory per application; executors fetch ``--py-files``
            and jars into it).
        log_dir: Where the master's and worker's output goes.
        processes: The master and worker processes.
    """

    master_url: str
    ui_url: str
    work_dir: Path
    log_dir: Path
    processes: list[subprocess.Popen[bytes]]

    def state(self) -> dict[str, Any]:
        """The master's state: ``aliveworkers``, ``activeapps``, ``completedapps``, ..."""
        with urllib.request.urlopen(f"{self.ui_url}/json/", timeout=5) as response:
            return json.loads(response.read())


def _spark_class() -> str:
    return str(Path(sys.executable).parent / "spark-class")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update({"SPARK_LOCAL_IP": "127.0.0.1", "SPARK_DAEMON_MEMORY": "256m", "PYSPARK_PYTHON": sys.executable})
    home = spark_home()
    if home:
        env["SPARK_HOME"] = home
    return env


def start_cluster(directory: Path, *, cores: int = 2, memory: str = "1536m") -> SparkCluster:
    """Start a master and one worker, and wait until the worker has registered.

    Raises:
        RuntimeError: A process exited or the worker did not register in time (the message holds the logs' end).
    """
    directory.mkdir(parents=True, exist_ok=True)
    port, ui_port, worker_ui = free_port(), free_port(), free_port()
    master_url, ui_url = f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{ui_port}"
    work_dir = directory / "work"
    logs = {"master": directory / "master.log", "worker": directory / "worker.log"}
    processes = []
    with logs["master"].open("ab") as out:
        processes.append(subprocess.Popen(
            [_spark_class(), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
             "--webui-port", str(ui_port)], stdout=out, stderr=subprocess.STDOUT, env=_env()))
    with logs["worker"].open("ab") as out:
        processes.append(subprocess.Popen(
            [_spark_class(), "org.apache.spark.deploy.worker.Worker", master_url, "--host", "127.0.0.1",
             "--cores", str(cores), "--memory", memory, "--webui-port", str(worker_ui), "--work-dir", str(work_dir)],
            stdout=out, stderr=subprocess.STDOUT, env=_env()))
    cluster = SparkCluster(master_url, ui_url, work_dir, directory, processes)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in processes):
            break
        try:
            if cluster.state().get("aliveworkers", 0) >= 1:
                return cluster
        except OSError:
            pass
        time.sleep(0.5)
    stop_cluster(cluster)
    tails = "\n".join(f"--- {name}:\n" + path.read_text(errors="replace")[-2000:] for name, path in logs.items())
    raise RuntimeError(f"Spark standalone cluster did not come up within {START_TIMEOUT_S:.0f}s:\n{tails}")


def stop_cluster(cluster: SparkCluster) -> None:
    """Stop the worker, then the master (the processes this module started)."""
    for proc in reversed(cluster.processes):
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    """A standalone master + worker for the tests of one module."""
    cluster = start_cluster(tmp_path_factory.mktemp("spark-cluster"))
    try:
        yield cluster
    finally:
        stop_cluster(cluster)
