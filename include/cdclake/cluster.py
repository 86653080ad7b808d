"""Cluster mode: run the ``jobs/`` entry points with ``spark-submit`` against a Spark standalone master.

The embedded default runs Spark inside each task (``local[*]``). In cluster mode a task submits a job instead;
:func:`submit_spec` describes the submission once, and it is used in two ways:

- ``SparkSubmitOperator(**spec.operator_kwargs(), conn_id=...)`` from the Spark provider, in a DAG;
- :meth:`SubmitSpec.command` for a plain ``spark-submit`` command line (scripts, tests).

The package travels with the job as a zip (``--py-files``, built by :func:`package_zip`), so executors need only
pyspark of the same version; the jars (Iceberg runtime, JDBC driver, ``CDCLAKE_SPARK_JARS``) go with ``--jars``
and the JDBC driver also on the driver's class path (``java.sql.DriverManager`` only sees the system class loader's
drivers). The executors must see the lake's local paths (staging, a local warehouse) at the same locations -- a
shared volume in docker-compose -- or the lake must live in object storage.
"""

from __future__ import annotations

import os
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from cdclake.exceptions import ConfigError
from cdclake.settings import LakeSettings

PACKAGE_DIR = Path(__file__).resolve().parent
JOBS_DIR = PACKAGE_DIR.parents[1] / "jobs"


def spark_home() -> str | None:
    """``SPARK_HOME``: the environment's, else the installed pyspark package's directory (found without importing
    pyspark), else None."""
    if os.environ.get("SPARK_HOME"):
        return os.environ["SPARK_HOME"]
    from importlib.util import find_spec

    spec = find_spec("pyspark")
    return str(Path(spec.origin).parent) if spec and spec.origin else None


def package_zip(target: Path) -> Path:
    """Zip the ``cdclake`` package (Python files and its data) for ``--py-files``.

    Args:
        target: The zip file to write (its directory is created).

    Returns:
        ``target``.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(PACKAGE_DIR.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                archive.write(path, Path("cdclake") / path.relative_to(PACKAGE_DIR))
    tmp.replace(target)
    return target


@dataclass(frozen=True)
class SubmitSpec:
    """One ``spark-submit`` of a cdclake job.

    Attributes:
        application: The job file (``jobs/<verb>_<object>.py``).
        application_args: Its arguments.
        master: The Spark master URL (``spark://host:7077``).
        conf: ``--conf`` settings (the lake catalog, Iceberg extensions, ...).
        jars: ``--jars``.
        driver_class_path: ``--driver-class-path``.
        py_files: ``--py-files`` (the package zip).
        env_vars: Environment of the ``spark-submit`` process.
        name: Application name.
    """

    application: str
    application_args: list[str]
    master: str
    conf: dict[str, str]
    jars: str
    driver_class_path: str
    py_files: str
    env_vars: dict[str, str] = field(default_factory=dict)
    name: str = "cdclake"

    def operator_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for the Spark provider's ``SparkSubmitOperator`` (the master comes from its
        ``conn_id``, a Spark connection such as ``spark://spark-master:7077``)."""
        return {"application": self.application, "application_args": list(self.application_args),
                "conf": dict(self.conf), "jars": self.jars, "driver_class_path": self.driver_class_path,
                "py_files": self.py_files, "env_vars": dict(self.env_vars), "name": self.name}

    def command(self, spark_submit: str | None = None) -> list[str]:
        """The ``spark-submit`` command line.

        Args:
            spark_submit: The binary; default pyspark's ``bin/spark-submit`` of this interpreter's environment.
        """
        binary = spark_submit or str(Path(sys.executable).parent / "spark-submit")
        argv = [binary, "--master", self.master, "--deploy-mode", "client", "--name", self.name,
                "--jars", self.jars, "--driver-class-path", self.driver_class_path, "--py-files", self.py_files]
        for key, value in sorted(self.conf.items()):
            argv += ["--conf", f"{key}={value}"]
        return [*argv, self.application, *self.application_args]


def submit_spec(job: str, args: Sequence[str], settings: LakeSettings, *, master: str, py_files: Path,
                executor_memory: str = "1g", total_executor_cores: int | None = None) -> SubmitSpec:
    """Describe the submission of one job of ``jobs/`` to a cluster.

    Args:
        job: Job name, e.g. ``normalize_batch``.
        args: The job's arguments (``--lake`` is added from ``settings`` when missing).
        settings: The lake (its catalog, warehouse and credentials become ``--conf`` settings).
        master: The Spark master URL.
        py_files: The package zip (:func:`package_zip`).
        executor_memory: ``spark.executor.memory``.
        total_executor_cores: ``spark.cores.max``, or None for the cluster's default.

    Raises:
        ConfigError: No such job file, or the master is not a ``spark://`` URL.
    """
    from cdclake.spark import POSTGRES_JDBC_JAR, SQLITE_JDBC_JAR, spark_conf

    application = JOBS_DIR / f"{job}.py"
    if not application.is_file():
        raise ConfigError(f"no job {job!r}: {application} does not exist")
    if not master.startswith("spark://"):
        raise ConfigError(f"master {master!r}: cluster mode needs a standalone master URL spark://host:port")
    conf = spark_conf(settings)
    jars = conf.pop("spark.jars")
    conf.pop("spark.driver.memory", None)  # the driver JVM already runs when spark-submit reads --conf
    conf["spark.executor.memory"] = executor_memory
    conf["spark.pyspark.python"] = os.environ.get("PYSPARK_PYTHON", sys.executable)
    if total_executor_cores:
        conf["spark.cores.max"] = str(total_executor_cores)
    driver = SQLITE_JDBC_JAR if settings.catalog_uri.startswith("jdbc:sqlite:") else POSTGRES_JDBC_JAR
    args = list(args)
    if "--lake" not in args:
        args = ["--lake", str(settings.root), *args]
    # spark-submit runs the driver with PYSPARK_PYTHON (else `python3` from PATH) and finds Spark via SPARK_HOME.
    python = conf["spark.pyspark.python"]
    env = {"CDCLAKE_SPARK_MASTER": master, "PYSPARK_PYTHON": python, "PYSPARK_DRIVER_PYTHON": python}
    home = spark_home()
    if home:
        env["SPARK_HOME"] = home
    return SubmitSpec(application=str(application), application_args=args, master=master, conf=conf, jars=jars,
                      driver_class_path=str(driver), py_files=str(py_files), env_vars=env, name=f"cdclake-{job}")


SUBMIT_CONN_ENV = "CDCLAKE_SPARK_SUBMIT_CONN_ID"
"""Environment variable naming the Airflow Spark connection that switches the per-source DAGs to cluster mode."""


def submit_conn_id() -> str | None:
    """The Spark connection of cluster mode (``CDCLAKE_SPARK_SUBMIT_CONN_ID``), or None for embedded Spark."""
    return os.environ.get(SUBMIT_CONN_ENV) or None


def run_job(job: str, args: Sequence[str], settings: LakeSettings, *, conn_id: str,
            master: str | None = None) -> dict[str, Any]:
    """Submit one ``jobs/`` entry point through the Spark provider (the engine of ``SparkSubmitOperator``), wait for
    it, and return the JSON result it wrote with ``--output``.

    Args:
        job: Job name, e.g. ``apply_changes``.
        args: Its arguments (without ``--output``).
        settings: The lake.
        conn_id: Airflow Spark connection (its host/port is the master spark-submit uses).
        master: The master URL the job's session must use (default ``CDCLAKE_SPARK_MASTER``); it must be the
            connection's master, since the job builds its session with it.

    Raises:
        ConfigError: No ``spark://`` master is configured.
        CdclakeError: spark-submit failed (the provider's error, with the job's exit code, is chained).
    """
    import json
    import tempfile

    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    from cdclake.exceptions import CdclakeError

    master = master or os.environ.get("CDCLAKE_SPARK_MASTER", "")
    with tempfile.TemporaryDirectory(prefix=f"cdclake-{job}-") as tmp:
        output = Path(tmp) / "result.json"
        spec = submit_spec(job, [*args, "--output", str(output)], settings, master=master,
                           py_files=package_zip(Path(tmp) / "cdclake.zip"))
        kwargs = spec.operator_kwargs()
        application = kwargs.pop("application")
        # The job process inherits the worker's CDCLAKE_* settings (catalog credentials, raw zone, ...).
        kwargs["env_vars"] = {**{k: v for k, v in os.environ.items() if k.startswith("CDCLAKE_")},
                              **kwargs["env_vars"]}
        try:
            SparkSubmitHook(conn_id=conn_id, **kwargs).submit(application)
        except Exception as exc:  # the provider raises AirflowException with spark-submit's exit code
            raise CdclakeError(f"{job} on {master} failed: {exc}") from exc
        return json.loads(output.read_text())
