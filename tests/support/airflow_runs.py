"""Run DAGs with ``dag.test()`` in a process of its own, following a JSON plan; print what happened as JSON.

Airflow reads its configuration on first import, so tests run this file as a subprocess with the environment of a
prepared Airflow home (:func:`cdclake.airflow_home.prepare`)::

    python tests/support/airflow_runs.py plan.json

The plan is a list of steps; each step first copies files (``"deliver": [[src, dst], ...]``), produces
``kcat -C -J`` lines to a Kafka broker (``"produce": {"bootstrap", "lines" (a file), "partitions"}``, one record per
producer batch, see :mod:`cdclake.demo.tansu`), then runs DAGs (``"runs": [{"dag_id", "logical_date" (ISO),
"conf" (optional)}, ...]``) in order, then ``cdclake`` commands (``"cli": [[arg, ...], ...]``) in this process, so
they reuse its SparkSession, and last writes every lake table's rows (``cdclake.reader.dump_rows`` of
``CDCLAKE_LAKE``) as JSON to ``"dump"`` when given. The output line ``RUNS-JSON [...]`` lists per run its state,
the state of every task instance (``task_id[map_index]``), the return values of the tasks, the asset events the
run emitted and whether a SparkContext had been started by then; per command ``{"cli", "exit", "stdout",
"stderr"}``. Tests call :func:`run_plan`.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any, Mapping


def run_plan(env: Mapping[str, str], plan: list[dict[str, Any]], tmp_path: Path, name: str) -> list[dict[str, Any]]:
    """Run a plan in a subprocess with ``env`` (a prepared Airflow home's); return the runs it reports.

    The plan goes to ``tmp_path/<name>.json`` and the subprocess's output to ``tmp_path/<name>.log``; a failing
    subprocess fails the calling test with the end of its stderr.
    """
    plan_file = tmp_path / f"{name}.json"
    plan_file.write_text(json.dumps(plan))
    proc = subprocess.run([sys.executable, __file__, str(plan_file)], env=dict(env), capture_output=True, text=True,
                          timeout=1200, check=False)
    (tmp_path / f"{name}.log").write_text(proc.stdout + proc.stderr)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RUNS-JSON ")), None)
    assert proc.returncode == 0 and line, f"exit {proc.returncode}; log {tmp_path / name}.log:\n{proc.stderr[-4000:]}"
    return json.loads(line[len("RUNS-JSON "):])


def _run(dag: Any, logical_date: datetime, conf: dict[str, Any] | None) -> dict[str, Any]:
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    dr = dag.test(logical_date=logical_date, run_conf=conf)
    with create_session() as session:
        tis = {f"{ti.task_id}[{ti.map_index}]" if ti.map_index >= 0 else ti.task_id: str(ti.state)
               for ti in dr.get_task_instances(session=session)}
        xcoms: dict[str, Any] = {}
        for row in session.query(XComModel).filter(XComModel.dag_id == dr.dag_id, XComModel.run_id == dr.run_id,
                                                   XComModel.key == "return_value"):
            name = f"{row.task_id}[{row.map_index}]" if row.map_index >= 0 else row.task_id
            value = row.value
            xcoms[name] = json.loads(value) if isinstance(value, (str, bytes)) else value
        events = [
            {"uri": uri, "extra": extra}
            for uri, extra in session.query(AssetModel.uri, AssetEvent.extra)
            .join(AssetEvent, AssetEvent.asset_id == AssetModel.id)
            .filter(AssetEvent.source_dag_id == dr.dag_id, AssetEvent.source_run_id == dr.run_id)
        ]
    return {"dag_id": dr.dag_id, "logical_date": logical_date.isoformat(), "state": str(dr.state),
            "tasks": tis, "xcom": xcoms, "asset_events": sorted(events, key=lambda e: e["uri"]),
            "spark_started": _spark_started()}


def _spark_started() -> bool:
    """Whether this process has started a SparkContext by now (``dag.test()`` runs the tasks in this process)."""
    if "pyspark" not in sys.modules:
        return False
    from pyspark import SparkContext

    return SparkContext._active_spark_context is not None


def main(argv: list[str]) -> int:
    """Execute the plan in ``argv[0]``."""
    from airflow.dag_processing.dagbag import DagBag
    from cli_session import call_cli  # run as a script: this directory is first on sys.path

    plan = json.loads(Path(argv[0]).read_text())
    bag = DagBag()
    if bag.import_errors:
        print("IMPORT-ERRORS " + json.dumps({str(k): str(v) for k, v in bag.import_errors.items()}))
        return 1
    results = []
    for step in plan:
        for src, dst in step.get("deliver", []):
            Path(dst).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dst)
        if "produce" in step:
            from cdclake.demo.produce import produce_lines
            from cdclake.demo.tansu import EXACT_WATERMARK_PRODUCER

            spec = step["produce"]
            produce_lines(spec["bootstrap"], Path(spec["lines"]).read_text().splitlines(),
                          partitions=spec.get("partitions", 3), producer_config=EXACT_WATERMARK_PRODUCER)
        for run in step.get("runs", []):
            dag = bag.get_dag(run["dag_id"])
            if dag is None:
                raise SystemExit(f"no DAG {run['dag_id']!r} in {sorted(bag.dag_ids)}")
            results.append(_run(dag, datetime.fromisoformat(run["logical_date"]), run.get("conf")))
        results.extend(call_cli(args) for args in step.get("cli", []))
        if "dump" in step:
            from cdclake.reader import dump_rows, list_tables
            from cdclake.settings import LakeSettings

            settings = LakeSettings.from_env()
            tables = {table: dump_rows(settings, table) for table in list_tables(settings)}
            Path(step["dump"]).write_text(json.dumps(tables, default=str))
    print("RUNS-JSON " + json.dumps(results, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
