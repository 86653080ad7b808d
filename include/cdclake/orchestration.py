"""Task bodies of the ``cdclake_ingest`` DAG: plain functions from DAG params and upstream results to JSON.

The DAG file only wires these together, so it stays cheap to parse; everything heavy (Spark, Great Expectations,
pyiceberg) is imported inside the functions, when a task runs. Every function takes the run's params (a mapping
as Airflow passes it) and the upstream task's result dict, and returns a dict fit for XCom.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

from cdclake.exceptions import CdclakeError, ConfigError
from cdclake.settings import LakeSettings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from cdclake.quality import ExpectationOutcome, ValidationSummary

log = logging.getLogger(__name__)

SPARK_APP_NAME = "cdclake-airflow"


class ValidationFailedError(CdclakeError):
    """Data-quality validation of a batch failed; ``report`` is the compact summary that was also logged.

    Attributes:
        report: The result of :func:`validate_tables` (``success`` False).
    """

    def __init__(self, message: str, report: dict[str, Any]) -> None:
        super().__init__(message)
        self.report = report


def default_lake() -> str:
    """Default of the ``lake`` param: ``CDCLAKE_LAKE``, else ``lake`` (relative to the worker's directory)."""
    return os.environ.get("CDCLAKE_LAKE") or "lake"


@dataclass(frozen=True)
class RunParams:
    """The DAG params of one run, resolved.

    Attributes:
        source: Source name (raw zone prefix, batch ids are per source).
        fmt: Change-stream format of the source (``debezium``, ``canal``, ...).
        lake: Lake root directory.
        inbox: Inbox location (directory or ``s3://`` prefix); empty means ``<lake>/inbox``.
        keys: Declared primary keys, ``[TABLE=]COL[,COL]`` each.
    """

    source: str
    fmt: str
    lake: str
    inbox: str
    keys: tuple[str, ...] = ()

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> RunParams:
        """Read the DAG params (``source``, ``format``, ``lake``, ``inbox``, ``keys``).

        Raises:
            ConfigError: ``keys`` is not a list of strings, or ``source``/``format`` is empty.
        """
        keys = params.get("keys") or []
        if isinstance(keys, str) or not all(isinstance(k, str) for k in keys):
            raise ConfigError(f"param keys={keys!r}: expected a list of [TABLE=]COL[,COL] strings")
        source = str(params.get("source") or "").strip()
        fmt = str(params.get("format") or "").strip()
        if not source or not fmt:
            raise ConfigError(f"params source={source!r}, format={fmt!r}: both must be non-empty")
        return cls(
            source=source,
            fmt=fmt,
            lake=str(params.get("lake") or default_lake()),
            inbox=str(params.get("inbox") or ""),
            keys=tuple(keys),
        )

    def settings(self) -> LakeSettings:
        """The lake's settings (``CDCLAKE_*`` variables still override individual locations)."""
        return LakeSettings.from_env(self.lake)

    def inbox_location(self, settings: LakeSettings) -> str:
        """The inbox to land from: the ``inbox`` param, or ``<lake>/inbox``."""
        return self.inbox or str(settings.root / "inbox")


def _spark(settings: LakeSettings) -> SparkSession:
    from cdclake.spark import get_spark

    return get_spark(settings, app_name=SPARK_APP_NAME)


def land_batch(params: Mapping[str, Any]) -> dict[str, Any] | None:
    """The batch this run processes: a landed-but-unapplied one first, else the inbox's new files as a new batch.

    Args:
        params: The run's DAG params.

    Returns:
        The ``LandResult`` as a dict, or None when the inbox held nothing new (the DAG then skips the rest).
    """
    from cdclake import pipeline

    run = RunParams.from_params(params)
    settings = run.settings()
    inbox = run.inbox_location(settings)
    result = pipeline.next_batch(settings, source=run.source, inbox=inbox)
    if result.batch_id is None:
        log.info("nothing new in inbox %s for source %s", inbox, run.source)
        return None
    if not result.created:
        log.info("resuming batch %s of source %s: landed earlier but never applied", result.batch_id, run.source)
        return result.to_dict()
    log.info("landed batch %s of source %s: %d messages from %s (manifest %s)", result.batch_id, run.source,
             result.message_count, inbox, result.manifest)
    return result.to_dict()


def normalize_batch(params: Mapping[str, Any], landed: Mapping[str, Any]) -> dict[str, Any]:
    """Normalize a landed batch into canonical change records per table.

    Args:
        params: The run's DAG params.
        landed: Result of :func:`land_batch`.

    Returns:
        The ``NormalizeResult`` as a dict.
    """
    from cdclake import pipeline
    from cdclake.keys import KeySpec

    run = RunParams.from_params(params)
    settings = run.settings()
    keys = KeySpec.parse(run.keys)
    result = pipeline.normalize_batch(_spark(settings), settings, source=run.source, batch_id=landed["batch_id"],
                                      fmt=run.fmt, keys=keys)
    tables = ", ".join(f"{t}: {n}" for t, n in sorted(result.tables.items())) or "none"
    log.info("normalized batch %s (%s): %s; quarantined %d; skipped %s", result.batch_id, run.fmt, tables,
             result.quarantined, result.skipped or "none")
    return result.to_dict()


def apply_changes(params: Mapping[str, Any], normalized: Mapping[str, Any]) -> dict[str, Any]:
    """Apply a normalized batch to the Iceberg tables.

    Args:
        params: The run's DAG params.
        normalized: Result of :func:`normalize_batch`.

    Returns:
        The ``ApplyResult`` as a dict.
    """
    from cdclake import pipeline

    run = RunParams.from_params(params)
    settings = run.settings()
    result = pipeline.apply_batch(_spark(settings), settings, source=run.source, batch_id=normalized["batch_id"])
    for table, c in sorted(result.tables.items()):
        log.info("%s: +%d inserted, ~%d updated, -%d deleted, %d stale skipped; rows %d -> %d", table, c.inserted,
                 c.updated, c.deleted, c.skipped_stale, c.rows_before, c.rows_after)
    return result.to_dict()


def validate_tables(params: Mapping[str, Any], applied: Mapping[str, Any], *, run_id: str,
                    dag_id: str | None = None) -> dict[str, Any]:
    """Validate the tables a batch touched, apply each table's policy and store the results.

    Every expectation's outcome goes to ``cdclake_meta.dq_results`` (:mod:`cdclake.dq_results`) and GE's Data
    Docs. A table whose suites failed is then ``failed`` (policy ``fail``), ``warned`` (``warn``) or
    ``quarantined`` (``quarantine``: its changes of the batch are held back, :mod:`cdclake.dq_hold`).

    Args:
        params: The run's DAG params (``dq_policy`` chooses the policies; see :mod:`cdclake.dq_config`).
        applied: Result of :func:`apply_changes`.
        run_id: The Airflow run id; names the validation run in the report.
        dag_id: The Airflow DAG, stored with the results.

    Returns:
        ``{"success", "batch_id", "data_docs_index", "results_table", "tables": {table: {"status", "policy",
        "failed"}}, "summaries": [ValidationSummary.compact(), ...]}`` (failed outcomes only: the full results are
        in the table and the reports); ``success`` is False only when a ``fail`` table failed.

    Raises:
        ValidationFailedError: A table with the ``fail`` policy failed; the message lists the failed expectations
            and names the report.
    """
    from cdclake import dq_hold, dq_results, pipeline
    from cdclake.dq_config import DqConfig, Policy
    from cdclake.pipeline import ApplyResult

    run = RunParams.from_params(params)
    settings = run.settings()
    config = DqConfig.from_env(policy=params.get("dq_policy"))
    result = ApplyResult.from_dict(dict(applied))
    spark = _spark(settings)
    summaries = pipeline.validate_batch(spark, settings, source=run.source, batch_id=result.batch_id,
                                        applied=result, run_id=run_id, config=config)
    tables: dict[str, dict[str, Any]] = {}
    for tid in sorted({s.table_id for s in summaries}):
        own = [s for s in summaries if s.table_id == tid]
        failed = [f"{s.suite}: {_describe_failure(f)}" for s in own for f in s.failed()]
        policy = config.policy.for_table(tid)
        if not failed:
            status = dq_results.STATUS_PASSED
        elif policy is Policy.WARN:
            status = dq_results.STATUS_WARNED
        elif policy is Policy.QUARANTINE:
            dq_hold.hold(spark, settings, source=run.source, batch_id=result.batch_id, table_id=tid, run_id=run_id,
                         reason="; ".join(failed))
            status = dq_results.STATUS_QUARANTINED
        else:
            status = dq_results.STATUS_FAILED
        tables[tid] = {"status": status, "policy": policy.value, "failed": failed}
    context = dq_results.RunContext(run_id=run_id, source=run.source, batch_id=result.batch_id, dag_id=dag_id,
                                    dag_run_id=run_id if dag_id else None)
    dq_results.record(spark, summaries, context=context,
                      policies={t: v["policy"] for t, v in tables.items()},
                      statuses={t: v["status"] for t, v in tables.items()})
    report = {
        "success": all(v["status"] != dq_results.STATUS_FAILED for v in tables.values()),
        "batch_id": result.batch_id,
        "data_docs_index": _data_docs_index(summaries, settings),
        "results_table": dq_results.TABLE,
        "tables": tables,
        "summaries": [s.compact() for s in summaries],
    }
    text = describe_validation(summaries, report["data_docs_index"],
                               statuses={t: v["status"] for t, v in tables.items()})
    if not report["success"]:
        raise ValidationFailedError(text, report)
    if any(v["status"] != dq_results.STATUS_PASSED for v in tables.values()):
        log.warning("%s", text)
    else:
        log.info("%s", text)
    return report


def _data_docs_index(summaries: list[ValidationSummary], settings: LakeSettings) -> str:
    for summary in summaries:
        if summary.data_docs_index:
            return str(summary.data_docs_index)
    return str(settings.dq_root)


_STATUS_WORDS = {"passed": "PASS", "failed": "FAIL", "warned": "WARN", "quarantined": "HELD"}


def describe_validation(summaries: list[ValidationSummary], data_docs_index: str,
                        statuses: Mapping[str, str] | None = None) -> str:
    """A readable account of a batch's validation: one line per suite, one per failed expectation.

    Args:
        summaries: What :func:`cdclake.pipeline.validate_batch` returned.
        data_docs_index: Where the Data Docs are.
        statuses: ``table_id`` -> status after the policy (``passed``, ``failed``, ``warned``, ``quarantined``);
            without it a failed suite reads FAIL.

    Returns:
        Lines of text; the first says whether the batch passed.
    """
    statuses = statuses or {}
    failed_tables = sorted({s.table_id for s in summaries if not s.success})
    tables = sorted({s.table_id for s in summaries})
    head = (f"validation FAILED for {len(failed_tables)} of {len(tables)} table(s)" if failed_tables
            else f"validation passed for {len(tables)} table(s)")
    lines = [head]
    for summary in summaries:
        word = "PASS" if summary.success else _STATUS_WORDS.get(statuses.get(summary.table_id, "failed"), "FAIL")
        suite = f" [{summary.suite}]" if summary.suite else ""
        lines.append(f"  {word} {summary.table_id}{suite}: "
                     f"{len(summary.outcomes) - len(summary.failed())}/{len(summary.outcomes)} expectations held")
        for failure in summary.failed():
            lines.append(f"      failed: {_describe_failure(failure)}")
        if not summary.success:
            lines.append(f"      report: {summary.report_json}")
            if summary.data_docs_page:
                lines.append(f"      Data Docs page: {summary.data_docs_page}")
    for tid in failed_tables:
        if statuses.get(tid) == "quarantined":
            lines.append(f"  {tid}: this batch's changes are held back; after a fix, "
                         "`cdclake dq release` applies them")
    lines.append(f"  Data Docs: {data_docs_index}")
    lines.append("  Data Quality page: <Airflow UI>/cdclake-dq/ (navigation entry 'Data Quality')")
    return "\n".join(lines)


def _describe_failure(outcome: ExpectationOutcome) -> str:
    target = f"({outcome.column})" if outcome.column else ""
    return f"{outcome.expectation}{target}, observed {outcome.observed_value!r}"
