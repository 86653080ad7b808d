"""Cluster mode: the ``jobs/`` entry points submitted with ``spark-submit`` to a real standalone master + worker
(pyspark's ``spark-class``), the package shipped as a zip. Landing is a plain spark-submit; normalize and the
per-table applies are the per-source DAG's task bodies in cluster mode (``CDCLAKE_SPARK_SUBMIT_CONN_ID``: jobs
submitted through the Spark provider's hook with an Airflow Spark connection); validation goes through
``SparkSubmitOperator`` itself. The tables equal the independent replay that the local mode tests
(``test_cli_apply.py``) hold the embedded default to."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cdclake import airflow_home
from cdclake.cluster import package_zip, submit_spec
from cdclake.demo.generator import generate, write_batches
from cdclake.demo.oracle import expected_tables
from cdclake.pipeline import is_applied
from cdclake.reader import dump_rows, list_tables
from cdclake.settings import LakeSettings
from tests.support.spark_cluster import SparkCluster, spark_cluster  # noqa: F401

# In the extended tier (a standalone Spark master and worker): `CDCLAKE_TESTS=all ./.ci/run`.
pytestmark = pytest.mark.extended


def _submit(cluster: SparkCluster, settings: LakeSettings, zip_path: Path, job: str, *args: str) -> dict:
    spec = submit_spec(job, list(args), settings, master=cluster.master_url, py_files=zip_path,
                       executor_memory="768m")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("CDCLAKE_")}, **spec.env_vars,
           "SPARK_LOCAL_IP": "127.0.0.1", "CDCLAKE_DRIVER_MEMORY": "1g", "CDCLAKE_SHUFFLE_PARTITIONS": "2"}
    proc = subprocess.run(spec.command(), env=env, capture_output=True, text=True, timeout=900, check=False)
    assert proc.returncode == 0, f"{job}: exit {proc.returncode}\n{proc.stderr[-4000:]}"
    start = proc.stdout.index("{")  # the job prints its result as one JSON document
    return json.loads(proc.stdout[start:])


_OPERATOR = """
import json, sys
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

kwargs = json.loads(sys.argv[1])
SparkSubmitOperator(task_id="validate_tables", conn_id="spark_cdclake", **kwargs).execute(context={})
"""


def _submit_with_operator(cluster: SparkCluster, settings: LakeSettings, zip_path: Path, home: Path, job: str,
                          *args: str) -> None:
    """Run a job through ``SparkSubmitOperator.execute`` in an Airflow process; the master comes from a Spark
    connection (``AIRFLOW_CONN_SPARK_CDCLAKE``), spark-submit from PATH."""
    spec = submit_spec(job, list(args), settings, master=cluster.master_url, py_files=zip_path,
                       executor_memory="768m")
    kwargs = spec.operator_kwargs()
    kwargs["env_vars"] = {**kwargs["env_vars"], "CDCLAKE_DRIVER_MEMORY": "1g"}
    proc = subprocess.run([sys.executable, "-c", _OPERATOR, json.dumps(kwargs)], env=_airflow_env(cluster, home),
                          capture_output=True,
                          text=True, timeout=900, check=False)
    assert proc.returncode == 0, f"{job} via SparkSubmitOperator: exit {proc.returncode}\n{proc.stderr[-4000:]}"


_SOURCE_TASKS = """
import json, sys
from cdclake import source_tasks

landed = {"source": "shop", "batches": [sys.argv[1]], "reprocess": False}
plan = source_tasks.normalize_batch("shop", landed)
applied = [source_tasks.apply_table("shop", p["table_id"], p["batches"]) for p in plan]
marked = source_tasks.mark_applied("shop", landed["batches"], applied)
print("RESULT-JSON " + json.dumps({"plan": plan, "applied": applied, "marked": marked}))
"""


def _airflow_env(cluster: SparkCluster, home: Path) -> dict[str, str]:
    env = airflow_home.airflow_env(home, {k: v for k, v in os.environ.items() if not k.startswith("CDCLAKE_")})
    airflow_home.write_config(home)
    env["AIRFLOW_CONN_SPARK_CDCLAKE"] = cluster.master_url  # spark://127.0.0.1:PORT
    env.update({"SPARK_LOCAL_IP": "127.0.0.1", "CDCLAKE_DRIVER_MEMORY": "1g", "CDCLAKE_SHUFFLE_PARTITIONS": "2"})
    return env


def test_jobs_on_a_standalone_cluster_give_the_oracle_tables(tmp_path: Path,
                                                             spark_cluster: SparkCluster) -> None:  # noqa: F811
    stream = generate(seed=41, customers=8, orders=10, stream_changes=40, batches=3)
    files = write_batches(stream, tmp_path / "inbox")
    expected = expected_tables(stream.changes)
    settings = LakeSettings.from_env(tmp_path / "lake", env={})
    zip_path = package_zip(tmp_path / "dist" / "cdclake.zip")

    landed = _submit(spark_cluster, settings, zip_path, "land_batch", "--source", "shop",
                     *map(str, files))
    batch = landed["batch_id"]
    assert batch == "00000001" and landed["created"] is True
    # The per-source DAG's task bodies in cluster mode, in an Airflow process.
    sources = tmp_path / "sources"
    sources.mkdir()
    (sources / "shop.yaml").write_text("name: shop\nformat: debezium\ninbox: inbox\n")
    env = {**_airflow_env(spark_cluster, tmp_path / "airflow"), "CDCLAKE_SPARK_SUBMIT_CONN_ID": "spark_cdclake",
           "CDCLAKE_SPARK_MASTER": spark_cluster.master_url, "CDCLAKE_LAKE": str(settings.root),
           "CDCLAKE_SOURCES_DIR": str(sources)}
    proc = subprocess.run([sys.executable, "-c", _SOURCE_TASKS, batch], env=env, capture_output=True, text=True,
                          timeout=1800, check=False)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT-JSON ")), None)
    assert proc.returncode == 0 and line, f"exit {proc.returncode}\n{proc.stderr[-4000:]}"
    result = json.loads(line[len("RESULT-JSON "):])
    assert [p["table_id"] for p in result["plan"]] == sorted(expected)
    assert {a["table_id"]: a["rows_after"] for a in result["applied"]} == {t: len(r) for t, r in expected.items()}
    assert is_applied(settings, "shop", batch)
    applied_file = tmp_path / "applied.json"
    applied_file.write_text(json.dumps({"batch_id": batch, "tables": result["marked"][batch]}))

    validated_file = tmp_path / "validated.json"
    _submit_with_operator(spark_cluster, settings, zip_path, tmp_path / "airflow", "validate_tables",
                          "--source", "shop", "--applied", str(applied_file), "--run-id", "cluster",
                          "--output", str(validated_file))
    assert json.loads(validated_file.read_text())["success"] is True

    assert list_tables(settings) == sorted(expected)
    for table, rows in expected.items():
        assert dump_rows(settings, table) == rows, table

    # The Spark jobs really ran on the cluster, and its executors fetched the shipped package.
    names = sorted(app["name"] for app in spark_cluster.state()["completedapps"])
    assert [n for n in names if n.startswith("cdclake-")] == [
        "cdclake-apply", "cdclake-apply", "cdclake-normalize", "cdclake-validate"], names
    shipped = list(spark_cluster.work_dir.glob("app-*/*/cdclake.zip"))
    assert shipped, f"no executor fetched cdclake.zip under {spark_cluster.work_dir}"
