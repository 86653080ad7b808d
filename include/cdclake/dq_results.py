"""Every validation, stored: the Iceberg table ``cdclake_meta.dq_results``, one row per expectation per run.

Written with Spark by the validate task (:func:`record`), read with pyiceberg by the Airflow UI plugin and the CLI
(:func:`read_rows`), so the webserver never starts Spark. A run's rows for a (source, batch) are replaced when the
run validates that batch again (a retried task), so rows never duplicate.

Columns: ``run_id`` (the validation run, e.g. the Airflow run id), ``dag_id`` and ``dag_run_id`` (null outside
Airflow), ``source``, ``batch_id``, ``table_id``, ``suite``, ``policy`` and ``status`` (the table's outcome in the
run: ``passed``, ``failed``, ``warned`` or ``quarantined``), ``suite_success``, ``expectation``, ``column_name``,
``success``, ``observed_value`` (JSON text), ``details`` (JSON text: unexpected counts, sample values, expected
kwargs), ``sample_rows`` (JSON text: up to five offending rows), ``report_json`` (our JSON report),
``data_docs_page`` (this run's Data Docs page), ``validated_at``.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from cdclake.catalog import create_table
from cdclake.identity import meta_table, spark_table_name
from cdclake.catalog import sql_literal
from cdclake.settings import LakeSettings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from cdclake.quality import ValidationSummary

log = logging.getLogger(__name__)

TABLE = meta_table("dq_results")

STATUS_PASSED = "passed"
STATUS_FAILED = "failed"
STATUS_WARNED = "warned"
STATUS_QUARANTINED = "quarantined"

_COLUMNS: tuple[tuple[str, str], ...] = (
    ("run_id", "string"),
    ("dag_id", "string"),
    ("dag_run_id", "string"),
    ("source", "string"),
    ("batch_id", "string"),
    ("table_id", "string"),
    ("suite", "string"),
    ("policy", "string"),
    ("status", "string"),
    ("suite_success", "boolean"),
    ("expectation", "string"),
    ("column_name", "string"),
    ("success", "boolean"),
    ("observed_value", "string"),
    ("details", "string"),
    ("sample_rows", "string"),
    ("report_json", "string"),
    ("data_docs_page", "string"),
    ("validated_at", "timestamp"),
)
_DDL = (f"CREATE TABLE IF NOT EXISTS {{name}} ({', '.join(f'{n} {t}' for n, t in _COLUMNS)}) "
        "USING iceberg TBLPROPERTIES ('format-version'='2')")


@dataclass(frozen=True)
class RunContext:
    """Who ran a validation.

    Attributes:
        run_id: The validation run (GE run name; the Airflow run id under Airflow).
        source: Source name.
        batch_id: The validated batch.
        dag_id: The Airflow DAG, or None outside Airflow.
        dag_run_id: The Airflow DAG run, or None outside Airflow.
    """

    run_id: str
    source: str
    batch_id: str
    dag_id: str | None = None
    dag_run_id: str | None = None


def ensure_table(spark: "SparkSession") -> str:
    """Create ``cdclake_meta.dq_results`` if missing; return its Spark name."""
    name = spark_table_name(TABLE)
    create_table(spark, TABLE, _DDL.format(name=name))
    return name


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True, default=str)


def result_rows(summaries: Sequence["ValidationSummary"], *, context: RunContext, policies: Mapping[str, str],
                statuses: Mapping[str, str], validated_at: datetime | None = None) -> list[tuple[Any, ...]]:
    """The rows of one run's validations, in :data:`_COLUMNS` order (pure).

    Args:
        summaries: The run's validation summaries (table and batch suites). Each row is filed under its
            summary's batch (a per-source run validates each of its batches' changes), else the context's.
        context: Who ran them.
        policies: ``table_id`` -> policy name.
        statuses: ``table_id`` -> the table's status in the run.
        validated_at: Row timestamp (default: now, UTC).
    """
    at = (validated_at or datetime.now(timezone.utc)).astimezone(timezone.utc).replace(tzinfo=None)
    rows = []
    for summary in summaries:
        for outcome in summary.outcomes:
            details = {k: v for k, v in outcome.details.items() if k != "sample_rows"}
            rows.append((
                context.run_id, context.dag_id, context.dag_run_id, context.source,
                summary.batch_id or context.batch_id, summary.table_id, summary.suite,
                policies.get(summary.table_id), statuses.get(summary.table_id),
                summary.success, outcome.expectation, outcome.column, outcome.success, _json(outcome.observed_value),
                _json(details), _json(outcome.details.get("sample_rows")), str(summary.report_json),
                None if summary.data_docs_page is None else str(summary.data_docs_page), at,
            ))
    return rows


def record(spark: "SparkSession", summaries: Sequence["ValidationSummary"], *, context: RunContext,
           policies: Mapping[str, str], statuses: Mapping[str, str]) -> int:
    """Store one run's validations, replacing what the same run stored for those tables and batches before.

    Only the summaries' tables are replaced, so per-table tasks of one run (the per-source DAGs) keep each
    other's rows.

    Returns:
        The number of rows written.
    """
    name = ensure_table(spark)
    rows = result_rows(summaries, context=context, policies=policies, statuses=statuses)
    tables = ", ".join(f"'{sql_literal(t)}'" for t in sorted({s.table_id for s in summaries})) or "''"
    batch_ids = {context.batch_id} | {s.batch_id or context.batch_id for s in summaries}
    batches = ", ".join(f"'{sql_literal(b)}'" for b in sorted(batch_ids))
    spark.sql(f"DELETE FROM {name} WHERE run_id = '{sql_literal(context.run_id)}' "
              f"AND source = '{sql_literal(context.source)}' AND batch_id IN ({batches}) "
              f"AND table_id IN ({tables})")
    if rows:
        schema = ", ".join(f"{n} {t}" for n, t in _COLUMNS)
        spark.createDataFrame(rows, schema).writeTo(name).append()
    log.info("stored %d data-quality result row(s) of run %s (batch %s) in %s", len(rows), context.run_id,
             context.batch_id, TABLE)
    return len(rows)


def read_rows(settings: LakeSettings) -> list[dict[str, Any]]:
    """Every stored result row (JSON text columns decoded), newest first; [] when nothing was validated yet.

    Uses pyiceberg only (no Spark), for the Airflow webserver and the CLI.
    """
    from cdclake.reader import table_rows

    rows = table_rows(settings, TABLE)
    for row in rows:
        for column in ("observed_value", "details", "sample_rows"):
            text = row.get(column)
            row[column] = json.loads(text) if text else None
    rows.sort(key=lambda r: (r["validated_at"] or datetime.min, r["run_id"] or ""), reverse=True)
    return rows
