"""
### cdclake_maintenance: compaction, snapshot expiry and orphan-file removal for every lake table

Daily, one mapped task per table (**maintain_table**) runs Iceberg's Spark procedures with the thresholds of the
source config that applies the table (`maintenance:` in `include/sources/<name>.yaml`, defaults otherwise):

1. `rewrite_data_files` (bin-pack) when the table has at least `min_data_files` data files;
2. `rewrite_position_delete_files` when at least `min_delete_files` position-delete files remain;
3. `expire_snapshots` older than `expire_older_than`, keeping the last `retain_last`;
4. `remove_orphan_files` older than `orphan_older_than`.

Each task returns (and logs) what it did: files and snapshots before and after, and each procedure's counts;
**report** collects them. The `tables` param limits a manual run to some tables (globs over `namespace.table`).
Maintenance never changes a table's rows.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from airflow.sdk import Param, dag, get_current_context, task

DAG_ID = "cdclake_maintenance"


@dag(
    dag_id=DAG_ID,
    schedule="@daily",
    start_date=datetime(2025, 1, 1, tzinfo=timezone.utc),
    catchup=False,
    max_active_runs=1,
    doc_md=__doc__,
    tags=["cdclake", "iceberg", "maintenance"],
    default_args={"owner": "cdclake", "retries": 1, "retry_delay": timedelta(minutes=5)},
    params={
        "tables": Param([], type="array", items={"type": "string"}, title="Tables",
                        description="namespace.table globs to maintain (e.g. public.*); empty means every table."),
    },
)
def cdclake_maintenance() -> None:
    @task(task_id="list_tables")
    def list_tables() -> list[str]:
        from cdclake import maintenance

        return maintenance.plan_tables(list(get_current_context()["params"].get("tables") or []))

    @task(task_id="maintain_table", map_index_template="{{ cdclake_table }}", max_active_tis_per_dag=1)
    def maintain_table(table_id: str) -> dict[str, Any]:
        from cdclake import maintenance

        get_current_context()["cdclake_table"] = table_id  # type: ignore[typeddict-unknown-key]
        return maintenance.maintain(table_id)

    @task(task_id="report", trigger_rule="none_failed")
    def report(reports: list[dict[str, Any]] | None) -> dict[str, Any]:
        import logging

        reports = list(reports or [])
        for item in reports:
            logging.getLogger(__name__).info("%s", item["summary"])
        return {"tables": len(reports),
                "data_files_removed": sum(r["before"]["data_files"] - r["after"]["data_files"] for r in reports),
                "snapshots_expired": sum(r["before"]["snapshots"] - r["after"]["snapshots"] for r in reports),
                "orphan_files_removed": sum(len(r["orphan_files"]) for r in reports)}

    report(maintain_table.expand(table_id=list_tables()))


cdclake_maintenance()
