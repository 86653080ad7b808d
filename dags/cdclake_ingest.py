"""
### cdclake_ingest: change-stream micro-batches into Iceberg tables

Every 15 minutes, one micro-batch of one source goes through four tasks:

1. **land_batch** lands every inbox file not landed before into the raw zone as one new batch. When the inbox
   holds nothing new, the rest of the run is skipped (short-circuit).
2. **normalize_batch** maps the batch's messages (format `format`) onto canonical change records per table;
   malformed messages are quarantined.
3. **apply_changes** merges the changes into the lake's Iceberg tables, in source order, skipping changes older
   than the row they would overwrite. Its return value has inserted/updated/deleted/skipped counts per table.
4. **validate_tables** runs the data-quality suites on the touched tables (after apply) and on the batch's
   changes, stores every outcome in `cdclake_meta.dq_results` and publishes Data Docs under `<lake>/dq/`. A table
   that fails is handled by its `dq_policy`: `fail` fails the run without retries, naming the expectations and
   the report; `warn` marks it in the results; `quarantine` holds the batch's changes to it back until
   `cdclake dq release`. The Airflow UI shows it all under **Data Quality**.

Every stage is idempotent for a batch, so a retried task redoes its own work only. Params: `source`, `format`,
`inbox` (empty: `<lake>/inbox`), `lake` (the lake directory; `CDCLAKE_*` variables override single locations)
`keys` (primary keys for streams that carry none, `[TABLE=]COL[,COL]`) and `dq_policy`.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone
from typing import Any, Callable

from airflow.sdk import Param, dag, get_current_context, task

DAG_ID = "cdclake_ingest"


def _params() -> dict[str, Any]:
    return dict(get_current_context()["params"])


def _call(body: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run a task body; a configuration error fails the task at once, since retrying cannot fix it."""
    from airflow.sdk.exceptions import AirflowFailException

    from cdclake.exceptions import ConfigError

    try:
        return body(*args, **kwargs)
    except ConfigError as exc:
        raise AirflowFailException(f"{type(exc).__name__}: {exc}") from exc


@dag(
    dag_id=DAG_ID,
    schedule="*/15 * * * *",
    start_date=datetime(2025, 1, 1, tzinfo=timezone.utc),
    catchup=False,
    max_active_runs=1,
    doc_md=__doc__,
    tags=["cdclake", "cdc", "iceberg"],
    default_args={
        "owner": "cdclake",
        "retries": 2,
        "retry_delay": timedelta(seconds=30),
        "execution_timeout": timedelta(hours=1),
    },
    params={
        "source": Param("demo", type="string", minLength=1,
                        description="Source name: batches, raw zone prefix and state are kept per source."),
        "format": Param("debezium", type="string", minLength=1,
                        description="Change-stream format of the source (debezium, dtle, drs, ckafka, canal, ...)."),
        "inbox": Param(os.environ.get("CDCLAKE_INBOX", ""), type="string",
                       description="Directory or s3:// prefix whose new files form the next batch; "
                                   "empty means <lake>/inbox."),
        "lake": Param(os.environ.get("CDCLAKE_LAKE") or "lake", type="string", minLength=1,
                      description="Lake root directory (catalog, warehouse, raw zone, staging, dq)."),
        "keys": Param([], type="array", items={"type": "string"},
                      description="Primary keys for streams that carry none, e.g. customers=id or "
                                  "public.orders=order_id,line_no; a bare COL[,COL] is the default key."),
        "dq_policy": Param(os.environ.get("CDCLAKE_DQ_POLICY") or "fail", type="string", minLength=1,
                           description="What a failed data-quality check does, per table: fail, warn or "
                                       "quarantine, e.g. 'public.orders=warn,default=fail'."),
    },
)
def cdclake_ingest() -> None:
    @task.short_circuit(task_id="land_batch", multiple_outputs=False)
    def land_batch() -> dict[str, Any] | None:
        from cdclake import orchestration

        return _call(orchestration.land_batch, _params())

    @task(task_id="normalize_batch", multiple_outputs=False)
    def normalize_batch(landed: dict[str, Any]) -> dict[str, Any]:
        from cdclake import orchestration

        return _call(orchestration.normalize_batch, _params(), landed)

    @task(task_id="apply_changes", multiple_outputs=False)
    def apply_changes(normalized: dict[str, Any]) -> dict[str, Any]:
        from cdclake import orchestration

        return _call(orchestration.apply_changes, _params(), normalized)

    @task(task_id="validate_tables", multiple_outputs=False)
    def validate_tables(applied: dict[str, Any]) -> dict[str, Any]:
        from airflow.sdk.exceptions import AirflowFailException

        from cdclake import orchestration

        context = get_current_context()
        try:
            return _call(orchestration.validate_tables, _params(), applied, run_id=context["run_id"],
                         dag_id=context["dag"].dag_id)
        except orchestration.ValidationFailedError as exc:
            # The summary is still published, and the data will not pass on a retry.
            context["ti"].xcom_push(key="return_value", value=exc.report)
            raise AirflowFailException(str(exc)) from exc

    validate_tables(apply_changes(normalize_batch(land_batch())))


cdclake_ingest()
