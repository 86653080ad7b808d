"""``airflow backfill create`` on a running Airflow (API server, scheduler, DAG processor, LocalExecutor) whose
metadata database is a real PostgreSQL server (Debian's binaries, :mod:`tests.support.postgres_server`).

A source (with an ``end_date``, so unpausing it schedules nothing of its own) first runs one daily interval,
landing one micro-batch (``dag.test()``, as a scheduled run). A second file then arrives and the operator
backfills both intervals with ``--reprocess-behavior completed``. The scheduler re-runs the first interval, which
must reprocess exactly the batch recorded for it and change nothing, and runs the second, which lands the new
file. Every run must succeed, and the table must equal an independent replay of the source's
logical changes.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from cdclake import airflow_home
from cdclake.demo.generator import generate, write_batches
from cdclake.demo.oracle import expected_tables
from cdclake.reader import dump_rows, list_tables
from cdclake.settings import LakeSettings
from tests.support.airflow_runs import run_plan
from tests.support.airflow_stack import AirflowStack, airflow_stack
from tests.support.postgres_server import PostgresServer, postgres_server  # noqa: F401  (fixture)

# In the extended tier (a running API server, scheduler and DAG processor): `CDCLAKE_TESTS=all ./.ci/run`.
pytestmark = pytest.mark.extended

DAG_ID = "cdclake_sources__alpha"
TABLE = "public.customers"
DATES = [datetime(2026, 2, 1, tzinfo=timezone.utc) + timedelta(days=i) for i in range(2)]
BACKFILL_TIMEOUT_S = 900


def _runs(stack: AirflowStack) -> dict[str, dict[str, Any]]:
    """The DAG's runs by logical date (ISO day): state, run id, backfill id."""
    rows = stack.query("SELECT logical_date, state, run_id, backfill_id FROM dag_run WHERE dag_id = ?", (DAG_ID,))
    return {str(date)[:10]: {"state": state, "run_id": run_id, "backfill_id": backfill}
            for date, state, run_id, backfill in rows}


def _xcom(stack: AirflowStack, run_id: str, task_id: str, map_index: int = -1) -> Any:
    rows = stack.query("SELECT value FROM xcom WHERE dag_id = ? AND run_id = ? AND task_id = ? AND map_index = ?"
                       " AND key = 'return_value'", (DAG_ID, run_id, task_id, map_index))
    if not rows or rows[0][0] is None:
        return None
    value = rows[0][0]
    if isinstance(value, (str, bytes)):  # SQLite hands JSON back as text; PostgreSQL decodes it
        return json.loads(value.decode() if isinstance(value, bytes) else value)
    return value


def _task_states(stack: AirflowStack, run_id: str) -> dict[str, str]:
    rows = stack.query("SELECT task_id, map_index, state FROM task_instance WHERE dag_id = ? AND run_id = ?",
                       (DAG_ID, run_id))
    return {f"{t}[{m}]" if m >= 0 else t: str(s) for t, m, s in rows}


def test_backfill_on_a_running_scheduler_reprocesses_recorded_batches_and_lands_new_ones(
        tmp_path: Path, postgres_server: PostgresServer) -> None:  # noqa: F811
    lake = tmp_path / "lake"
    sources_dir = tmp_path / "sources"
    sources_dir.mkdir()
    (sources_dir / "alpha.yaml").write_text(textwrap.dedent(f"""\
        name: alpha
        format: debezium
        inbox: inbox/alpha
        schedule: "@daily"
        start_date: "{DATES[0].date().isoformat()}"
        end_date: "{DATES[-1].date().isoformat()}"
        retries: 0
        tables:
          include: ["{TABLE}"]
        """))
    stream = generate(seed=41, customers=8, orders=4, stream_changes=30, batches=2)
    files = write_batches(stream, tmp_path / "stream")
    expected = expected_tables(stream.changes)[TABLE]
    inbox = lake / "inbox" / "alpha"

    env = airflow_home.prepare(tmp_path / "airflow", base={
        **{k: v for k, v in os.environ.items() if not k.startswith("CDCLAKE_")},
        "CDCLAKE_SOURCES_DIR": str(sources_dir), "CDCLAKE_LAKE": str(lake),
        "CDCLAKE_SPARK_MASTER": "local[2]", "CDCLAKE_SHUFFLE_PARTITIONS": "2", "CDCLAKE_DRIVER_MEMORY": "1g",
    })
    postgres_server.create_database("airflow_backfill")
    env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = postgres_server.sqlalchemy_uri("airflow_backfill")
    migrated = subprocess.run([*airflow_home.airflow_command(), "db", "migrate"], env=env, capture_output=True,
                              text=True, timeout=600, check=False)
    assert migrated.returncode == 0, migrated.stderr[-3000:]
    # The run of the first interval, one micro-batch.
    first = run_plan(env, [{"deliver": [[str(files[0]), str(inbox / files[0].name)]],
                            "runs": [{"dag_id": DAG_ID, "logical_date": DATES[0].isoformat()}]}], tmp_path,
                     "first-runs")
    assert [r["state"] for r in first] == ["success"], first
    assert [r["xcom"]["land_batch"]["batches"] for r in first] == [["00000001"]]
    (inbox / files[1].name).write_bytes(files[1].read_bytes())

    with airflow_stack(env, tmp_path / "stack") as stack:
        before = _runs(stack)
        # The scheduler starts no run of a paused DAG, backfills included. end_date keeps it from scheduling
        # today's interval once unpaused.
        stack.cli("dags", "unpause", DAG_ID)
        created = stack.cli("backfill", "create", "--dag-id", DAG_ID, "--from-date", DATES[0].isoformat(),
                            "--to-date", DATES[-1].isoformat(), "--reprocess-behavior", "completed",
                            "--max-active-runs", "1")
        deadline = time.monotonic() + BACKFILL_TIMEOUT_S
        while True:
            stack.check_alive()
            runs = _runs(stack)
            backfilled = {day: r for day, r in runs.items() if r["backfill_id"] is not None}
            if len(backfilled) == len(DATES) and all(r["state"] in ("success", "failed")
                                                     for r in backfilled.values()):
                break
            assert time.monotonic() < deadline, (
                f"backfill not done in {BACKFILL_TIMEOUT_S}s: {runs}\n{created.stdout[-2000:]}\n"
                + stack.tail("scheduler"))
            time.sleep(5)

        days = [d.date().isoformat() for d in DATES]
        assert sorted(backfilled) == days, runs
        failed = {day: _task_states(stack, r["run_id"]) for day, r in backfilled.items() if r["state"] != "success"}
        assert not failed, f"backfill runs failed: {failed}\n{stack.tail('scheduler')}"
        # The first interval's run was re-run in place (same run id); the second is new.
        assert backfilled[days[0]]["run_id"] == before[days[0]]["run_id"], (before, backfilled)
        assert days[1] not in before

        landed = [_xcom(stack, backfilled[day]["run_id"], "land_batch") for day in days]
        assert [x["batches"] for x in landed] == [["00000001"], ["00000002"]], landed
        assert [x["reprocess"] for x in landed] == [True, False], landed
        applied = [_xcom(stack, backfilled[day]["run_id"], "apply_table", 0) for day in days]
        assert all(a["table_id"] == TABLE for a in applied), applied
        counts = applied[0]["batches"]
        assert all(c["inserted"] == c["updated"] == c["deleted"] == 0 for c in counts.values()), counts
        new_counts = applied[1]["batches"]["00000002"]
        assert new_counts["inserted"] + new_counts["updated"] + new_counts["deleted"] > 0, new_counts
        # One asset event per run id: the first run's and the new interval's; the re-run changed nothing.
        events = stack.query("SELECT e.source_run_id, a.uri FROM asset_event e JOIN asset a ON a.id = e.asset_id"
                             " WHERE e.source_dag_id = ?", (DAG_ID,))
        assert sorted(events) == sorted((backfilled[day]["run_id"], f"iceberg://lake/{TABLE}") for day in days)

    settings = LakeSettings.from_env(lake, env={})
    assert list_tables(settings) == [TABLE]
    assert dump_rows(settings, TABLE) == expected
