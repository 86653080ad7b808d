"""The per-source ingestion DAGs, generated from two source configs, run with Airflow's ``dag.test()``.

Two Debezium sources share a stream shape but each applies one table (``tables.include``), so the lake's
tables come from two DAGs. Three daily intervals of one source each deliver one micro-batch, the other source
delivers its stream at once; an interval with nothing new short-circuits. Tables are compared with an independent
replay of each source's logical changes. (A real ``airflow backfill create`` over past intervals, on a running
scheduler, is ``test_scheduler_backfill.py``.)
"""

from __future__ import annotations

import os
import textwrap
from datetime import datetime, timedelta, timezone
from pathlib import Path

from cdclake import airflow_home
from cdclake.demo.generator import generate, write_batches
from cdclake.demo.oracle import expected_tables
from cdclake.reader import dump_rows, list_tables
from cdclake.settings import LakeSettings
from tests.support.airflow_runs import run_plan

DATES = [datetime(2026, 1, 1, tzinfo=timezone.utc) + timedelta(days=i) for i in range(3)]
SOURCES = {"alpha": ("public.customers", 31), "beta": ("public.orders", 32)}


def test_two_source_dags_then_backfill_converge(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    sources_dir = tmp_path / "sources"
    sources_dir.mkdir()
    expected: dict[str, list[dict]] = {}
    batches: dict[str, list[Path]] = {}
    for name, (table, seed) in SOURCES.items():
        (sources_dir / f"{name}.yaml").write_text(textwrap.dedent(f"""\
            name: {name}
            format: debezium
            inbox: inbox/{name}
            schedule: "@daily"
            retries: 1
            retry_delay: 5s
            tables:
              include: ["{table}"]
            """))
        stream = generate(seed=seed, customers=8, orders=10, stream_changes=40, batches=3)
        batches[name] = write_batches(stream, tmp_path / f"stream-{name}")
        expected[table] = expected_tables(stream.changes)[table]

    # gamma applies none of its stream's tables: its runs must still mark the batch applied, and then skip.
    (sources_dir / "gamma.yaml").write_text(
        "name: gamma\nformat: debezium\ninbox: inbox/gamma\nschedule: '@daily'\ntables:\n  include: ['nothing.*']\n")

    env = airflow_home.prepare(tmp_path / "airflow", base={
        **{k: v for k, v in os.environ.items() if not k.startswith("CDCLAKE_")},
        "CDCLAKE_SOURCES_DIR": str(sources_dir), "CDCLAKE_LAKE": str(lake),
        "CDCLAKE_SPARK_MASTER": "local[2]", "CDCLAKE_SHUFFLE_PARTITIONS": "2", "CDCLAKE_DRIVER_MEMORY": "2g",
    })
    alpha_dag, beta_dag = "cdclake_sources__alpha", "cdclake_sources__beta"
    # alpha: one micro-batch per daily interval; beta: its whole stream at once, in the first interval.
    beta_files = [[str(b), str(lake / "inbox" / "beta" / b.name)] for b in batches["beta"]]
    plan = [{"deliver": [[str(f), str(lake / "inbox" / "alpha" / f.name)]] + (beta_files if i == 0 else []),
             "runs": [{"dag_id": alpha_dag, "logical_date": d.isoformat()}]
                     + ([{"dag_id": beta_dag, "logical_date": d.isoformat()}] if i == 0 else [])}
            for i, (f, d) in enumerate(zip(batches["alpha"], DATES))]
    # A fourth interval with nothing new short-circuits.
    plan.append({"runs": [{"dag_id": alpha_dag, "logical_date": (DATES[-1] + timedelta(days=1)).isoformat()}]})
    # The manual replay DAG, each mode.
    replay_date = DATES[-1] + timedelta(days=2)
    plan.append({"runs": [
        {"dag_id": "cdclake_replay", "logical_date": (replay_date + timedelta(hours=i)).isoformat(), "conf": conf}
        for i, conf in enumerate([
            {"source": "alpha", "mode": "replay", "batch_from": "2", "batch_to": "00000003",
             "tables": ["public.*"]},
            {"source": "beta", "mode": "quarantine-replay"},
            {"source": "alpha", "mode": "resnapshot"},
        ])]})
    gamma_dag = "cdclake_sources__gamma"
    plan.append({"deliver": [[str(batches["alpha"][0]), str(lake / "inbox" / "gamma" / "only.jsonl")]],
                 "runs": [{"dag_id": gamma_dag, "logical_date": d.isoformat()} for d in DATES[:2]]})
    runs = run_plan(env, plan, tmp_path, "runs")
    replayed, quarantine_replayed, resnapshot = runs[5:8]
    gamma_first, gamma_second = runs[8:10]

    first = [runs[0], runs[2], runs[3]]
    beta, idle = runs[1], runs[4]
    for run in [*first, beta]:
        assert run["state"] == "success", run
        table = SOURCES[run["dag_id"].split("__")[1]][0]
        # One mapped apply and validate task per applied table; the other table is excluded by config.
        assert {k: v for k, v in run["tasks"].items() if k.startswith(("apply_table", "validate_table"))} == {
            "apply_table[0]": "success", "validate_table[0]": "success"}, run["tasks"]
        assert run["xcom"]["apply_table[0]"]["table_id"] == table
        assert [e["uri"] for e in run["asset_events"]] == [f"iceberg://lake/{table}"]
        assert run["tasks"]["mark_applied"] == "success"
    assert [r["xcom"]["land_batch"]["batches"] for r in first] == [["00000001"], ["00000002"], ["00000003"]]
    assert beta["xcom"]["land_batch"]["batches"] == ["00000001"]
    assert idle["state"] == "success" and idle["tasks"]["land_batch"] == "success"
    assert all(state == "skipped" for task, state in idle["tasks"].items() if task != "land_batch"), idle["tasks"]

    # replay: exactly batches 2..3, re-applied without effect; quarantine-replay: nothing was quarantined;
    # resnapshot: fails, telling the operator what the source must do.
    assert replayed["state"] == "success", replayed["tasks"]
    result = replayed["xcom"]["run_replay"]
    assert sorted(result["batches"]) == ["00000002", "00000003"]
    assert all(set(tables) == {"public.customers"} for tables in result["batches"].values()), result
    assert all(c["inserted"] == c["updated"] == c["deleted"] == 0
               for tables in result["batches"].values() for c in tables.values()), result
    assert quarantine_replayed["state"] == "success"
    assert quarantine_replayed["xcom"]["run_replay"] == {"mode": "quarantine-replay", "source": "beta", "replays": []}
    assert resnapshot["state"] == "failed" and resnapshot["tasks"]["run_replay"] == "failed"
    assert "execute-snapshot" in (tmp_path / "runs.log").read_text()

    # No table to apply: the mapped tasks are skipped, the batch is still marked applied, the next run skips.
    assert gamma_first["state"] == "success", gamma_first["tasks"]
    assert gamma_first["xcom"]["normalize_batch"] == []
    assert gamma_first["tasks"]["mark_applied"] == "success"
    assert gamma_first["xcom"]["mark_applied"] == {"00000001": {}}
    assert gamma_first["asset_events"] == []
    assert gamma_second["state"] == "success" and gamma_second["xcom"].get("land_batch") is None
    assert gamma_second["tasks"]["mark_applied"] == "skipped"

    settings = LakeSettings.from_env(lake, env={})
    assert list_tables(settings) == sorted(expected)
    for table, rows in expected.items():
        assert dump_rows(settings, table) == rows, table
