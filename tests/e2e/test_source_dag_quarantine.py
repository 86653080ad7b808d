"""The ``quarantine`` policy in a per-source DAG (``dag.test()``): a failing table's batch is taken back out of the
table and held, and ``cdclake dq release`` applies and validates it after the fix.

The source's first interval delivers the snapshot and passes. Before the second interval its config gains a
one-second freshness SLA that the generated (2024) changes cannot meet: the run's batch fails validation, the
``validate_table`` task still succeeds (quarantine), and the table is back to the snapshot. The fix restores the
config; the release then passes and the table equals the replay of the whole stream. The oracle is an independent
plain-Python replay of the generated logical changes (:func:`cdclake.demo.oracle.expected_tables`).
"""

from __future__ import annotations

import json
import os
import textwrap
from datetime import datetime, timedelta, timezone
from pathlib import Path

from cdclake import airflow_home, dq_hold, dq_results
from cdclake.demo.generator import generate, write_batches
from cdclake.demo.oracle import expected_tables
from cdclake.reader import dump_rows
from cdclake.settings import LakeSettings
from tests.support.airflow_runs import run_plan

TABLE = "public.customers"
DAG_ID = "cdclake_sources__held"
DATES = [datetime(2026, 2, 1, tzinfo=timezone.utc) + timedelta(days=i) for i in range(2)]
CONFIG = textwrap.dedent(f"""\
    name: held
    format: debezium
    inbox: inbox/held
    schedule: "@daily"
    retries: 0
    tables:
      include: ["{TABLE}"]
    defaults:
      dq_policy: quarantine
    """)
STALE_CONFIG = CONFIG + "  freshness_sla: 1s\n"


def test_quarantine_holds_the_runs_batch_back_until_released(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    sources = tmp_path / "sources"
    sources.mkdir()
    (sources / "held.yaml").write_text(CONFIG)
    (tmp_path / "stale.yaml").write_text(STALE_CONFIG)
    stream = generate(seed=41, customers=8, orders=6, stream_changes=30, batches=2)
    snapshot_file, stream_file = write_batches(stream, tmp_path / "stream")
    env = airflow_home.prepare(tmp_path / "airflow", base={
        **{k: v for k, v in os.environ.items() if not k.startswith("CDCLAKE_")},
        "CDCLAKE_SOURCES_DIR": str(sources), "CDCLAKE_LAKE": str(lake),
        "CDCLAKE_SPARK_MASTER": "local[2]", "CDCLAKE_SHUFFLE_PARTITIONS": "2", "CDCLAKE_DRIVER_MEMORY": "2g",
    })
    inbox = lake / "inbox" / "held"
    (tmp_path / "fixed.yaml").write_text(CONFIG)
    lake_args = ["--lake", str(lake)]
    plan = [
        {"deliver": [[str(snapshot_file), str(inbox / snapshot_file.name)]],
         "runs": [{"dag_id": DAG_ID, "logical_date": DATES[0].isoformat()}]},
        # The second interval, under the SLA the changes cannot meet; then what the lake holds.
        {"deliver": [[str(stream_file), str(inbox / stream_file.name)],
                     [str(tmp_path / "stale.yaml"), str(sources / "held.yaml")]],
         "runs": [{"dag_id": DAG_ID, "logical_date": DATES[1].isoformat()}],
         "cli": [["dump", *lake_args, "--table", TABLE], ["dq", "held", *lake_args]]},
        # The fix: the SLA goes. The release applies the held batch and validates it (table and batch suites).
        {"deliver": [[str(tmp_path / "fixed.yaml"), str(sources / "held.yaml")]],
         "cli": [["dq", "release", *lake_args, "--source", "held", "--batch", "00000002", "--table", TABLE]]},
    ]
    first, second, dumped, held, release = run_plan(env, plan, tmp_path, "runs")
    settings = LakeSettings.from_env(lake, env={})
    snapshot_only = expected_tables(c for c in stream.changes if c.op == "snapshot")[TABLE]
    everything = expected_tables(stream.changes)[TABLE]
    assert snapshot_only != everything

    assert first["state"] == "success" and first["xcom"]["validate_table[0]"]["status"] == "passed", first
    # The per-source task runs the whole table suite: generated types and the user suite of public.customers
    # (include/dq_suites/public.customers.yaml), not only key and row count.
    first_expectations = {r["expectation"] for r in dq_results.read_rows(settings)
                          if r["batch_id"] == "00000001" and r["table_id"] == TABLE}
    assert {"expect_column_values_to_match_regex", "expect_column_values_to_be_of_type",
            "expect_column_values_to_be_unique"} <= first_expectations, first_expectations
    # The failing run succeeds under quarantine, its batch held and its changes out of the table.
    assert second["state"] == "success", second["tasks"]
    assert second["tasks"]["validate_table[0]"] == "success" and second["tasks"]["mark_applied"] == "success"
    validated = second["xcom"]["validate_table[0]"]
    assert (validated["status"], validated["policy"], validated["held_batches"]) == (
        "quarantined", "quarantine", ["00000002"])
    assert [f.split(":")[0] for f in validated["expectations_failed"]] == ["freshness"]
    assert second["xcom"]["apply_table[0]"]["batches"]["00000002"]["inserted"] > 0
    assert dumped["exit"] == 0 and [json.loads(line) for line in dumped["stdout"].splitlines()] == snapshot_only
    assert held["exit"] == 0
    assert [(h["source"], h["batch_id"], h["table_id"]) for h in map(json.loads, held["stdout"].splitlines())] == [
        ("held", "00000002", TABLE)]
    held_rows = [r for r in dq_results.read_rows(settings) if r["status"] == "quarantined"]
    assert {(r["table_id"], r["batch_id"], r["dag_id"]) for r in held_rows} == {(TABLE, "00000002", DAG_ID)}

    # Released after the fix: applied, validated and passed; the table is the whole stream's.
    assert release["exit"] == 0, release["stderr"][-3000:]
    released = json.loads(release["stdout"])
    assert (released["status"], released["failed"]) == ("passed", [])
    assert dump_rows(settings, TABLE) == everything
    assert dq_hold.list_held(settings) == []
    rows = [r for r in dq_results.read_rows(settings) if r["run_id"] == released["run_id"]]
    assert {r["suite"] for r in rows} == {f"cdclake.{TABLE}", f"cdclake_batch.{TABLE}"}
    assert all(r["success"] and r["status"] == "passed" for r in rows)
