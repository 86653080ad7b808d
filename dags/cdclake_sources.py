"""
### cdclake_sources: one ingestion DAG per source config (`include/sources/<name>.yaml`)

Each file under the sources directory (`CDCLAKE_SOURCES_DIR`, default `include/sources`) becomes the DAG
`cdclake_sources__<name>`, on the source's `schedule`, with its `retries`. Adding a source means adding a file.
A run covers one data interval:

1. **land_batch** lands the inbox's new files as the next batch (or resumes a landed-but-unapplied one) and
   records it as the interval's batch. A source whose file has a `kafka:` section lands from its topics instead:
   per partition the offsets from the last landed one to the high watermark (at most `max_records`), exactly
   once (`cdclake.kafka`); its return value carries the `lag` per topic and partition. Nothing new: the rest of
   the run is skipped (short-circuit; for Kafka, decided from the broker's watermarks without starting Spark).
   A re-run of an interval (clear, backfill) reprocesses exactly the batches recorded for it, so runs are
   idempotent per data interval and `airflow backfill create` converges to the same tables.
   **check_kafka_lag** (Kafka sources) stores that lag as the `kafka_lag` data-quality result of
   `kafka_lag.<name>`, `warned` above the source's `kafka.max_lag`.
2. **normalize_batch** maps the messages onto canonical change records per table and lists the tables the source
   applies (`tables.include`/`exclude`).
3. **apply_table** (dynamic task mapping, one task per table) merges the table's changes and, when the table
   changed, emits an asset event for `iceberg://lake/<namespace>.<table>` through the source's asset alias
   `cdclake.<name>.tables`, so DAGs can be scheduled on a table's Asset.
4. **validate_table** (mapped likewise) runs the table's data-quality suite, the batch suite of the run's
   batches and the freshness SLA under its `dq_policy` (fail, warn, quarantine).
5. **mark_applied** records the batch as applied when every table is applied. While a table of the source is
   stopped by a DDL statement under `ddl_policy: fail` (its changes held in quarantine, `cdclake.ddl_stops`), it
   then fails the run, naming the tables and how to release them; the other tables are applied.

Options per table (key override, partition spec, delete/write mode, DDL/DQ policy, freshness SLA, maintenance
thresholds) come from the same file; see `cdclake.config`. Spark runs inside the tasks by default; with
`CDCLAKE_SPARK_SUBMIT_CONN_ID` (an Airflow Spark connection) normalize and apply are submitted as `jobs/` to the
`spark://` master in `CDCLAKE_SPARK_MASTER` (cluster mode, see `cdclake.cluster`). Kafka landing always runs in
the land task, as a client of `CDCLAKE_SPARK_MASTER` (on a cluster its read tasks run on the executors).

An invalid source file does not take the other sources' DAGs down: it becomes the placeholder DAG
`cdclake_sources__<file name>` (no schedule, tagged `config-error`) whose description and one task `config_error`
show the file's error (file, line, field and value); the task fails with it if triggered. The error is also logged
when the file is parsed. Fixing the file brings the source's real DAG back at the next parse.
"""

from __future__ import annotations

import logging
import re
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable

from airflow.sdk import Asset, AssetAlias, dag, get_current_context, task

from cdclake.config import SourceConfig, read_sources

DAG_ID = "cdclake_sources"
log = logging.getLogger(__name__)


def asset_alias(source: str) -> AssetAlias:
    """The alias under which a source's table tasks emit their tables' asset events."""
    return AssetAlias(f"cdclake.{source}.tables")


def _call(body: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run a task body; a configuration error fails the task at once, since retrying cannot fix it."""
    from airflow.sdk.exceptions import AirflowFailException

    from cdclake.exceptions import ConfigError

    try:
        return body(*args, **kwargs)
    except ConfigError as exc:
        raise AirflowFailException(f"{type(exc).__name__}: {exc}") from exc


def build_dag(config: SourceConfig) -> Any:
    """The ingestion DAG of one source (see the module docstring)."""
    source = config.name
    alias = asset_alias(source)

    @dag(
        dag_id=config.dag_id,
        schedule=config.schedule,
        start_date=config.start_date,
        end_date=config.end_date,
        catchup=False,
        max_active_runs=1,
        doc_md=__doc__,
        description=f"{config.format} changes of source {source} into Iceberg tables",
        tags=["cdclake", "cdc", "iceberg", f"source:{source}"],
        default_args={
            "owner": "cdclake",
            "retries": config.retries,
            "retry_delay": config.retry_delay,
        },
    )
    def ingest() -> None:
        @task.short_circuit(task_id="land_batch")
        def land_batch() -> dict[str, Any] | None:
            from cdclake import source_tasks

            context = get_current_context()
            start, end = context.get("data_interval_start"), context.get("data_interval_end")
            if start is None or end is None:  # a manual run without a logical date stands for when it runs
                start = end = context.get("logical_date") or context["dag_run"].run_after
            return _call(source_tasks.land_batch, source, interval_start=start, interval_end=end)

        @task(task_id="normalize_batch")
        def normalize_batch(landed: dict[str, Any]) -> list[dict[str, Any]]:
            from cdclake import source_tasks

            return _call(source_tasks.normalize_batch, source, landed)

        @task(task_id="apply_table", outlets=[alias], map_index_template="{{ cdclake_table }}")
        def apply_table(table_id: str, batches: list[str]) -> dict[str, Any]:
            from cdclake import source_tasks
            from cdclake.identity import asset_uri

            context = get_current_context()
            context["cdclake_table"] = table_id  # type: ignore[typeddict-unknown-key]  # names the mapped task
            result = _call(source_tasks.apply_table, source, table_id, batches)
            totals = {k: sum(c[k] for c in result["batches"].values()) for k in ("inserted", "updated", "deleted")}
            if any(totals.values()):  # a re-run that changed nothing must not trigger the table's consumers
                context["outlet_events"][alias].add(Asset(asset_uri(table_id)),
                                                    extra={"batches": batches, "rows": result["rows_after"], **totals})
            return result

        @task(task_id="validate_table", map_index_template="{{ cdclake_table }}")
        def validate_table(applied: dict[str, Any]) -> dict[str, Any]:
            from airflow.sdk.exceptions import AirflowFailException

            from cdclake import source_tasks

            context = get_current_context()
            context["cdclake_table"] = applied["table_id"]  # type: ignore[typeddict-unknown-key]
            try:
                return _call(source_tasks.validate_table, source, applied, run_id=context["run_id"])
            except source_tasks.TableValidationError as exc:
                context["ti"].xcom_push(key="return_value", value=exc.report)
                raise AirflowFailException(str(exc)) from exc

        @task(task_id="mark_applied", trigger_rule="none_failed")
        def mark_applied(landed: dict[str, Any], applied: list[dict[str, Any]] | None) -> dict[str, Any]:
            from airflow.sdk.exceptions import AirflowFailException

            from cdclake import source_tasks

            try:
                return _call(source_tasks.mark_applied, source, landed["batches"], list(applied or []))
            except source_tasks.DdlStoppedError as exc:  # retrying cannot release a stopped table
                raise AirflowFailException(str(exc)) from exc

        landed = land_batch()
        if config.kafka is not None:
            @task(task_id="check_kafka_lag")
            def check_kafka_lag(landed: dict[str, Any]) -> dict[str, Any]:
                from cdclake import source_tasks

                return _call(source_tasks.check_kafka_lag, source, landed, run_id=get_current_context()["run_id"])

            check_kafka_lag(landed)
        applied = apply_table.expand_kwargs(normalize_batch(landed))
        validate_table.expand(applied=applied)
        mark_applied(landed, applied)

    return ingest()


def config_error_dag_id(path: Path) -> str:
    """The id of the placeholder DAG of an invalid source file: ``cdclake_sources__<file stem>``.

    Characters a DAG id cannot hold become ``_``.
    """
    return f"{DAG_ID}__{re.sub(r'[^A-Za-z0-9_.-]', '_', path.stem)}"


def build_config_error_dag(dag_id: str, path: Path, error: str) -> Any:
    """The placeholder DAG of an invalid source file: it shows the file's error and its one task fails with it."""
    message = f"SourceConfigError: {error}\nFix {path}; the source's DAG replaces this one at the next parse."

    @dag(
        dag_id=dag_id,
        schedule=None,
        catchup=False,
        max_active_runs=1,
        doc_md=f"### Invalid source config `{path.name}`\n\nNo ingestion DAG until the file is fixed:\n\n"
               f"```text\n{error}\n```\n",
        description=f"invalid source config {path.name}: {error}",
        tags=["cdclake", "config-error"],
        # retries as every cdclake task has; an AirflowFailException fails the task at once regardless
        default_args={"owner": "cdclake", "retries": 1, "retry_delay": timedelta(seconds=30)},
    )
    def config_error() -> None:
        @task(task_id="config_error")
        def fail() -> None:
            from airflow.sdk.exceptions import AirflowFailException

            raise AirflowFailException(message)

        fail()

    return config_error()


_configs, _errors = read_sources()
for _config in _configs.values():
    globals()[_config.dag_id] = build_dag(_config)
for _path, _error in _errors.items():
    log.error("cdclake source config %s is invalid; its DAG is a placeholder that fails:\n%s", _path, _error)
    _dag_id = config_error_dag_id(_path)
    if _dag_id in globals():  # a valid source's DAG (or another file's placeholder) already has the id
        _dag_id = f"{_dag_id}__config_error"
    globals()[_dag_id] = build_config_error_dag(_dag_id, _path, _error)
