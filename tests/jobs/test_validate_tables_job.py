"""``jobs/validate_tables.py`` run as its own process (as spark-submit runs it), on tables with duplicate keys.

The batch is staged and applied in the test's Spark (session lake); the job, in a process of its own, must do what
the ``cdclake_ingest`` DAG's validate task does: store every outcome in ``cdclake_meta.dq_results`` and the reports,
and apply each table's policy -- ``fail`` exits 1 naming the failed expectation and the report, ``warn`` succeeds,
``quarantine`` takes the batch's changes back out of the table and holds them. The oracle is the test data: only
the tables written with a duplicate key fail, and only on key uniqueness.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

from cdclake import dq_hold, dq_results
from cdclake.pipeline import apply_batch
from cdclake.reader import dump_rows
from cdclake.settings import LakeSettings
from tests.support.dq_tables import create_table, stage_inserts

JOB = Path(__file__).resolve().parents[2] / "jobs" / "validate_tables.py"
UNIQUE = "expect_column_values_to_be_unique"
SOURCE = "dqjob"
NOW = datetime.now(timezone.utc).replace(tzinfo=None)
BROKEN = [(1, "a"), (2, "b"), (2, "b again")]  # key 2 twice: the table suite's uniqueness check must fail
CLEAN = [(1, "a"), (2, "b")]
TABLES = {"dqjob_fail.items": BROKEN, "dqjob_warn.items": BROKEN, "dqjob_hold.items": BROKEN,
          "dqjob_ok.items": CLEAN}
POLICY = "dqjob_warn.items=warn,dqjob_hold.items=quarantine,default=fail"


def _job(settings: LakeSettings, applied: dict, tmp_path: Path, run_id: str, policy: str
         ) -> tuple[subprocess.CompletedProcess[str], dict]:
    applied_file, output = tmp_path / f"{run_id}.applied.json", tmp_path / f"{run_id}.out.json"
    applied_file.write_text(json.dumps(applied))
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("CDCLAKE_")},
           "CDCLAKE_SPARK_MASTER": "local[2]", "CDCLAKE_SHUFFLE_PARTITIONS": "2", "CDCLAKE_DRIVER_MEMORY": "1g"}
    proc = subprocess.run([sys.executable, str(JOB), "--lake", str(settings.root), "--source", SOURCE,
                           "--applied", str(applied_file), "--run-id", run_id, "--dq-policy", policy,
                           "--dag-id", "my_cluster_dag", "--output", str(output)],
                          env=env, capture_output=True, text=True, timeout=600, check=False)
    (tmp_path / f"{run_id}.log").write_text(proc.stdout + proc.stderr)
    assert output.is_file(), proc.stderr[-3000:]
    report = json.loads(output.read_text())
    assert json.loads(proc.stdout[proc.stdout.index("{"):]) == report
    return proc, report


def _refresh(spark, *tables: str) -> None:
    """Forget the test session's cached metadata of tables the job's process committed to."""
    for tid in tables:
        spark.sql(f"REFRESH TABLE lake.{tid}")


def test_job_stores_results_and_applies_each_policy(spark, session_lake, tmp_path: Path) -> None:
    for tid, rows in TABLES.items():
        create_table(spark, tid, rows, source_ts=NOW)
    stage_inserts(spark, session_lake, source=SOURCE, batch_id="0001", tables={t: [(3, "c")] for t in TABLES},
                  source_ts=NOW)
    applied = apply_batch(spark, session_lake, source=SOURCE, batch_id="0001").to_dict()

    try:
        proc, report = _job(session_lake, applied, tmp_path, "job-run-1", POLICY)
        # Only the warn and the clean table, all allowed to fail softly: the job succeeds.
        soft = {**applied, "tables": {t: c for t, c in applied["tables"].items() if t in ("dqjob_warn.items",
                                                                                          "dqjob_ok.items")}}
        soft_proc, soft_report = _job(session_lake, soft, tmp_path, "job-run-2", POLICY)
    finally:
        _refresh(spark, dq_results.TABLE, *TABLES)

    # fail: exit 1, the failed expectation and the report named on stderr.
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "validation FAILED for 3 of 4 table(s)" in proc.stderr
    assert f"failed: {UNIQUE}(id), observed 2" in proc.stderr
    report_json = session_lake.dq_root.resolve() / "results" / "dqjob_fail.items" / "job-run-1.json"
    assert f"report: {report_json}" in proc.stderr
    assert report["success"] is False
    statuses = {t: v["status"] for t, v in report["tables"].items()}
    assert statuses == {"dqjob_fail.items": "failed", "dqjob_warn.items": "warned", "dqjob_hold.items": "quarantined",
                        "dqjob_ok.items": "passed"}
    assert {t: v["policy"] for t, v in report["tables"].items()} == {
        "dqjob_fail.items": "fail", "dqjob_warn.items": "warn", "dqjob_hold.items": "quarantine",
        "dqjob_ok.items": "fail"}
    failed = sorted((s["table_id"], s["suite"], o["expectation"], o["column"])
                    for s in report["summaries"] for o in s["outcomes"])
    assert failed == sorted((t, f"cdclake.{t}", UNIQUE, "id") for t, rows in TABLES.items() if rows is BROKEN)

    # Every outcome stored, with the job's run and DAG; the reports and Data Docs written.
    stored = [r for r in dq_results.read_rows(session_lake) if r["run_id"] == "job-run-1"]
    assert {r["table_id"] for r in stored} == set(TABLES)
    assert {(r["table_id"], r["status"]) for r in stored} == set(statuses.items())
    assert sorted((r["table_id"], r["expectation"]) for r in stored if not r["success"]) == sorted(
        (t, UNIQUE) for t, rows in TABLES.items() if rows is BROKEN)
    assert {(r["dag_id"], r["dag_run_id"], r["source"], r["batch_id"]) for r in stored} == {
        ("my_cluster_dag", "job-run-1", SOURCE, "0001")}
    assert all(Path(r["report_json"]).is_file() for r in stored)
    assert Path(report["data_docs_index"]).is_file()

    # quarantine: the batch's insert of id 3 is out of the table and held; the other tables keep it.
    held = [h for h in dq_hold.list_held(session_lake, source=SOURCE)]
    assert [(h.table_id, h.batch_id, h.run_id) for h in held] == [("dqjob_hold.items", "0001", "job-run-1")]
    assert UNIQUE in held[0].reason
    assert sorted(r["id"] for r in dump_rows(session_lake, "dqjob_hold.items")) == [1, 2, 2]
    for tid in ("dqjob_fail.items", "dqjob_warn.items", "dqjob_ok.items"):
        assert 3 in {r["id"] for r in dump_rows(session_lake, tid)}, tid

    # warn only: exit 0, the warned table marked in the results.
    assert soft_proc.returncode == 0, soft_proc.stderr[-3000:]
    assert soft_report["success"] is True
    assert {t: v["status"] for t, v in soft_report["tables"].items()} == {
        "dqjob_warn.items": "warned", "dqjob_ok.items": "passed"}
    assert "WARN dqjob_warn.items [cdclake.dqjob_warn.items]" in soft_proc.stderr
    assert {(r["table_id"], r["status"]) for r in dq_results.read_rows(session_lake) if r["run_id"] == "job-run-2"} \
        == {("dqjob_warn.items", "warned"), ("dqjob_ok.items", "passed")}
