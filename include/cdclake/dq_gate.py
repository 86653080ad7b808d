"""The data-quality gate of a batch: validate the tables it touched, apply each table's policy, store the results.

One function, :func:`gate_batch`, for every path that validates a batch: the ``cdclake_ingest`` DAG's
``validate_tables`` task (:func:`cdclake.orchestration.validate_tables`), the spark-submit job
``jobs/validate_tables.py`` and ``cdclake dq release`` (:func:`release`). A table whose suites failed is then

* ``failed`` (policy ``fail``): :class:`ValidationFailedError`, whose message lists the failed expectations and
  where the reports are;
* ``warned`` (``warn``): the run succeeds;
* ``quarantined`` (``quarantine``): the batch's changes to the table are held back (:mod:`cdclake.dq_hold`).

Every outcome goes to ``cdclake_meta.dq_results`` (:mod:`cdclake.dq_results`), the JSON reports and GE's Data Docs.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Mapping

from cdclake.exceptions import CdclakeError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from cdclake.apply_options import ApplyOptions
    from cdclake.dq_config import DqConfig
    from cdclake.pipeline import ApplyResult
    from cdclake.quality import ExpectationOutcome, ValidationSummary
    from cdclake.settings import LakeSettings

log = logging.getLogger(__name__)

DATA_QUALITY_PAGE = "<Airflow UI>/cdclake-dq/ (navigation entry 'Data Quality')"


class ValidationFailedError(CdclakeError):
    """Data-quality validation of a batch failed under the ``fail`` policy (or a release failed again).

    Attributes:
        report: What :func:`gate_batch` would have returned (``success`` False), also logged.
    """

    def __init__(self, message: str, report: dict[str, Any]) -> None:
        super().__init__(message)
        self.report = report


def gate_batch(spark: "SparkSession", settings: "LakeSettings", *, source: str, applied: "ApplyResult",
               run_id: str, config: "DqConfig", dag_id: str | None = None) -> dict[str, Any]:
    """Validate the tables a batch touched, apply each table's policy and store the results.

    Args:
        spark: The session.
        settings: The lake.
        source: Source name.
        applied: What applying the batch did (its tables and row counts).
        run_id: Names the validation run (the Airflow run id under Airflow).
        config: Policies, SLAs, thresholds and user suites.
        dag_id: The Airflow DAG, stored with the results (the run id is then also the DAG run id).

    Returns:
        ``{"success", "batch_id", "data_docs_index", "results_table", "tables": {table: {"status", "policy",
        "failed"}}, "summaries": [ValidationSummary.compact(), ...]}`` (failed outcomes only: the full results are
        in the table and the reports); ``success`` is False only when a ``fail`` table failed.

    Raises:
        ValidationFailedError: A table with the ``fail`` policy failed; the message lists the failed expectations
            and names the reports.
        ConfigError: A user suite is malformed, or a quarantined table's changes cannot be taken back out.
    """
    from cdclake import dq_hold, dq_results, pipeline
    from cdclake.dq_config import Policy

    summaries = pipeline.validate_batch(spark, settings, source=source, batch_id=applied.batch_id, applied=applied,
                                        run_id=run_id, config=config)
    tables: dict[str, dict[str, Any]] = {}
    for tid in sorted({s.table_id for s in summaries}):
        failed = [f"{s.suite}: {describe_failure(f)}" for s in summaries if s.table_id == tid for f in s.failed()]
        policy = config.policy.for_table(tid)
        if not failed:
            status = dq_results.STATUS_PASSED
        elif policy is Policy.WARN:
            status = dq_results.STATUS_WARNED
        elif policy is Policy.QUARANTINE:
            dq_hold.hold(spark, settings, source=source, batch_ids=[applied.batch_id], table_id=tid, run_id=run_id,
                         reason="; ".join(failed))
            status = dq_results.STATUS_QUARANTINED
        else:
            status = dq_results.STATUS_FAILED
        tables[tid] = {"status": status, "policy": policy.value, "failed": failed}
    statuses = {t: v["status"] for t, v in tables.items()}
    context = dq_results.RunContext(run_id=run_id, source=source, batch_id=applied.batch_id, dag_id=dag_id,
                                    dag_run_id=run_id if dag_id else None)
    dq_results.record(spark, summaries, context=context, policies={t: v["policy"] for t, v in tables.items()},
                      statuses=statuses)
    report = {
        "success": all(s != dq_results.STATUS_FAILED for s in statuses.values()),
        "batch_id": applied.batch_id,
        "data_docs_index": _data_docs_index(summaries, settings),
        "results_table": dq_results.TABLE,
        "tables": tables,
        "summaries": [s.compact() for s in summaries],
    }
    text = describe_validation(summaries, report["data_docs_index"], statuses=statuses)
    if not report["success"]:
        raise ValidationFailedError(text, report)
    if any(s != dq_results.STATUS_PASSED for s in statuses.values()):
        log.warning("%s", text)
    else:
        log.info("%s", text)
    return report


def release(spark: "SparkSession", settings: "LakeSettings", *, source: str, batch_id: str, table_id: str,
            config: "DqConfig", options: "ApplyOptions | None" = None, run_id: str | None = None) -> dict[str, Any]:
    """Apply a table's held changes of a batch (after a fix) and validate them again through :func:`gate_batch`.

    The release is judged under the ``quarantine`` policy, unless the table's policy in ``config`` is now ``warn``:
    changes that still fail are taken back out and held again, and the new results are stored either way.

    Args:
        spark, settings, source, batch_id, table_id, options: As :func:`cdclake.dq_hold.release` takes them.
        config: Data-quality configuration (suites, SLAs; the table's policy decides only warn or not).
        run_id: Names the validation run; default ``release-<batch>-<UTC time>``.

    Returns:
        :func:`gate_batch`'s report plus ``"counts"``, what applying the held changes did; the table's status is
        ``passed`` or ``warned``.

    Raises:
        ValidationFailedError: The changes failed validation again and are held again; the message lists the
            failed expectations and the reports.
        ConfigError: Nothing is held for that (source, batch, table).
    """
    from cdclake import dq_hold, dq_results
    from cdclake.dq_config import DqPolicy, Policy
    from cdclake.pipeline import ApplyResult

    run_id = run_id or f"release-{batch_id}-{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%SZ')}"
    counts = dq_hold.release(spark, settings, source=source, batch_id=batch_id, table_id=table_id, options=options)
    policy = Policy.WARN if config.policy.for_table(table_id) is Policy.WARN else Policy.QUARANTINE
    gated = replace(config, policy=DqPolicy(default=config.policy.default, tables={table_id: policy}))
    report = gate_batch(spark, settings, source=source, applied=ApplyResult(source, batch_id, {table_id: counts}),
                        run_id=run_id, config=gated)
    report["counts"] = counts.to_dict()
    if report["tables"][table_id]["status"] == dq_results.STATUS_QUARANTINED:
        failed = "; ".join(report["tables"][table_id]["failed"])
        raise ValidationFailedError(
            f"release of batch {batch_id} of {source!r} into {table_id} failed validation again, so its changes "
            f"are held again: {failed}. Reports: {_reports(report, table_id)}; results: `cdclake dq results "
            f"--lake {settings.root} --table {table_id} --run {run_id}`", {**report, "success": False})
    log.info("released batch %s of %s into %s (%s)", batch_id, source, table_id,
             report["tables"][table_id]["status"])
    return report


def table_settings(source: str, table_id: str, *, env: Mapping[str, str] | None = None
                   ) -> tuple["DqConfig", "ApplyOptions"]:
    """The data-quality configuration and apply options a table of a source is validated and applied with.

    ``CDCLAKE_DQ_*`` (:meth:`cdclake.dq_config.DqConfig.from_env`), where the source's config file
    (``include/sources/<source>.yaml``, ``CDCLAKE_SOURCES_DIR``), when it has one, sets the table's policy,
    freshness SLA and apply options.

    Raises:
        ConfigError: A malformed ``CDCLAKE_DQ_*`` variable or an invalid source config file.
    """
    from cdclake.apply_options import ApplyOptions
    from cdclake.config import load_sources
    from cdclake.dq_config import DqConfig, Policy

    config = DqConfig.from_env(env)
    source_config = load_sources().get(source)
    if source_config is None:
        return config, ApplyOptions()
    options = source_config.table_options(table_id)
    freshness = dict(config.freshness)
    if options.freshness_sla is not None:
        freshness[table_id] = options.freshness_sla
    policy = replace(config.policy, tables={**config.policy.tables, table_id: Policy(options.dq_policy)})
    return replace(config, policy=policy, freshness=freshness), options.apply_options()


def _reports(report: Mapping[str, Any], table_id: str) -> str:
    return ", ".join(s["report_json"] for s in report["summaries"] if s["table_id"] == table_id and not s["success"])


def _data_docs_index(summaries: list["ValidationSummary"], settings: "LakeSettings") -> str:
    for summary in summaries:
        if summary.data_docs_index:
            return str(summary.data_docs_index)
    return str(settings.dq_root)


_STATUS_WORDS = {"passed": "PASS", "failed": "FAIL", "warned": "WARN", "quarantined": "HELD"}


def describe_validation(summaries: list["ValidationSummary"], data_docs_index: str,
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
            lines.append(f"      failed: {describe_failure(failure)}")
        if not summary.success:
            lines.append(f"      report: {summary.report_json}")
            if summary.data_docs_page:
                lines.append(f"      Data Docs page: {summary.data_docs_page}")
    for tid in failed_tables:
        if statuses.get(tid) == "quarantined":
            lines.append(f"  {tid}: this batch's changes are held back; after a fix, "
                         "`cdclake dq release` applies them")
    lines.append(f"  Data Docs: {data_docs_index}")
    lines.append(f"  Data Quality page: {DATA_QUALITY_PAGE}")
    return "\n".join(lines)


def describe_failure(outcome: "ExpectationOutcome") -> str:
    """One failed expectation as ``expectation(column), observed VALUE``."""
    target = f"({outcome.column})" if outcome.column else ""
    return f"{outcome.expectation}{target}, observed {outcome.observed_value!r}"
