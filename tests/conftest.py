"""Shared fixtures: one SparkSession per test run (real Spark, real Iceberg JDBC catalog on SQLite).

Spark's catalog configuration is fixed when the session starts, so the whole run uses one lake directory
(``session_lake``); tests isolate themselves by using their own table names or their own namespaces.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from cdclake.settings import LakeSettings

pytest_plugins = ["tests.support.s3_server"]

# Spark for tests, in this process and in every cdclake subprocess a test starts (CLI, jobs, Airflow tasks):
# two cores, few shuffle partitions (the data is small; cdclake's default of 8 only adds tasks), a 2 GB driver.
os.environ.setdefault("CDCLAKE_SPARK_MASTER", "local[2]")
os.environ.setdefault("CDCLAKE_SHUFFLE_PARTITIONS", "2")
os.environ.setdefault("CDCLAKE_DRIVER_MEMORY", "2g")
# The tests' spark-defaults.conf (JVM options of short-lived drivers; see the file). Subprocess environments keep
# it: tests drop only the CDCLAKE_* variables when they set their own.
os.environ.setdefault("SPARK_CONF_DIR", str(Path(__file__).parent / "support" / "spark-conf"))


@pytest.fixture(scope="session")
def session_lake(tmp_path_factory: pytest.TempPathFactory) -> LakeSettings:
    """The lake every in-process Spark test shares."""
    root = tmp_path_factory.mktemp("lake")
    return LakeSettings.from_env(root, env={})


@pytest.fixture(scope="session")
def spark(session_lake: LakeSettings):
    """The test run's one SparkSession (``local[2]``, few shuffle partitions)."""
    from cdclake.spark import get_spark

    session = get_spark(session_lake, app_name="cdclake-tests")
    yield session
    session.stop()
    # py4j closes its pooled connections when they are garbage-collected at interpreter exit, and logs that at
    # INFO to a handler whose stream pytest has closed by then ("--- Logging error ---" after the summary).
    logging.getLogger("py4j").setLevel(logging.WARNING)


@pytest.fixture()
def lake(tmp_path: Path) -> LakeSettings:
    """A fresh lake directory for tests that run cdclake in subprocesses (CLI, Airflow)."""
    return LakeSettings.from_env(tmp_path / "lake", env={})


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    """Prints each test file's seconds (setup, call and teardown of its tests) and keeps them in tests/artifacts.

    The suite is CPU-bound on two workers that take a whole file each, so a file's time is what decides how the
    workers' loads balance and whether a file belongs in CI's tier; ``--durations`` lists single tests only.
    """
    if hasattr(config, "workerinput"):
        return
    seconds: dict[str, float] = {}
    for reports in terminalreporter.stats.values():
        for report in reports:
            nodeid = getattr(report, "nodeid", "")
            if nodeid and isinstance(getattr(report, "duration", None), float):
                path = nodeid.split("::", 1)[0]
                seconds[path] = seconds.get(path, 0.0) + report.duration
    if not seconds:
        return
    ranked = sorted(seconds.items(), key=lambda item: -item[1])
    title = f"seconds per test file (all {len(ranked)} of them in tests/artifacts/file-seconds.json)"
    terminalreporter.write_sep("=", title)
    for path, total in ranked[:25]:
        terminalreporter.write_line(f"{total:8.1f}s {path}")
    artifacts = Path(config.rootpath) / "tests" / "artifacts"
    artifacts.mkdir(parents=True, exist_ok=True)
    (artifacts / "file-seconds.json").write_text(json.dumps(dict(ranked), indent=1) + "\n")
