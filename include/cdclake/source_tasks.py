"""Task bodies of the per-source ingestion DAGs (``dags/cdclake_sources.py``): plain functions returning JSON.

One run of a source's DAG covers one data interval::

    land_batch -> normalize_batch -> apply_table[table] (mapped) -> validate_table[table] (mapped)
              \\                                              \\-> mark_applied
               \\-> check_kafka_lag (sources that land from Kafka: the lag as a data-quality result)

**Idempotent per data interval.** The first run of an interval lands what is new (or resumes a landed-but-unapplied
batch) and records the interval's batches in the raw zone (``intervals/<start>--<end>.json``, put-if-absent, next
to the manifests). Any later run of the same interval -- a clear, a retry of the whole run, an ``airflow backfill``
-- finds that record and reprocesses exactly those batches: normalize again, apply again (applying is idempotent
by source position), validate again. An interval that found nothing new records an empty list and stays empty.

**Where Spark runs.** By default inside the task (embedded ``local[*]``, or a client of ``CDCLAKE_SPARK_MASTER``).
With ``CDCLAKE_SPARK_SUBMIT_CONN_ID`` set to an Airflow Spark connection (cluster mode), normalize and apply run
as ``jobs/`` entry points submitted through the Spark provider to ``CDCLAKE_SPARK_MASTER`` (a ``spark://`` master,
the connection's), shipping the package (:mod:`cdclake.cluster`); validation still reads the tables from the task,
and Kafka landing runs in the land task too, as a client of that master (its read tasks run on the executors).

Heavy modules (Spark, Great Expectations) are imported inside the functions, when a task runs.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from cdclake.cluster import run_job, submit_conn_id
from cdclake.config import SourceConfig, load_source, sources_dir
from cdclake.exceptions import CdclakeError, ConfigError, SourceConfigError
from cdclake.settings import LakeSettings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from cdclake.pipeline import LandResult
    from cdclake.quality import ExpectationOutcome

log = logging.getLogger(__name__)

SPARK_APP_NAME = "cdclake-source"
INTERVALS_PREFIX = "intervals/"


class TableValidationError(CdclakeError):
    """A table failed validation under ``dq_policy: fail``; ``report`` is what :func:`validate_table` returns."""

    def __init__(self, message: str, report: dict[str, Any]) -> None:
        super().__init__(message)
        self.report = report


class DdlStoppedError(CdclakeError):
    """Tables of the source are stopped by a DDL statement under ``ddl_policy: fail`` (:mod:`cdclake.ddl_stops`)."""


def source_config(source: str) -> SourceConfig:
    """The config of one source from the sources directory (``CDCLAKE_SOURCES_DIR`` or ``include/sources``).

    Raises:
        SourceConfigError: No such file, or the file is invalid.
    """
    path = sources_dir() / f"{source}.yaml"
    if not path.is_file():
        raise SourceConfigError(f"{path}: no config file for source {source!r}")
    return load_source(path)


def lake_settings() -> LakeSettings:
    """The lake of the DAG runs: ``CDCLAKE_LAKE`` and the other ``CDCLAKE_*`` variables of the worker."""
    return LakeSettings.from_env()


def _spark(settings: LakeSettings) -> SparkSession:
    from cdclake.spark import get_spark

    return get_spark(settings, app_name=SPARK_APP_NAME)


def _stamp(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def interval_key(start: datetime, end: datetime) -> str:
    """Raw-zone key of the record of the batches an interval processed."""
    return f"{INTERVALS_PREFIX}{_stamp(start)}--{_stamp(end)}.json"


def land_batch(source: str, *, interval_start: datetime, interval_end: datetime) -> dict[str, Any] | None:
    """The batches of a data interval: recorded ones on a re-run, else the next batch (resumed or newly landed).

    A source whose config names ``kafka`` lands from its topics (:func:`land_from`); the check for new offsets
    reads the broker's watermarks and the manifests only, so a run with nothing new starts no Spark.

    Args:
        source: Source name.
        interval_start: The run's data interval start.
        interval_end: The run's data interval end.

    Returns:
        ``{"source", "batches", "reprocess", "interval"}``, plus ``"lag"`` for a Kafka source (per topic and
        partition, the offsets not landed yet after this run; absent when the run reprocesses an interval), or
        None when the interval has no batch (the DAG then skips the rest of the run; for a Kafka source that
        means every partition's lag is 0).
    """
    from cdclake.landing import raw_store

    config = source_config(source)
    settings = lake_settings()
    store = raw_store(settings, source)
    key = interval_key(interval_start, interval_end)
    interval = f"{interval_start.isoformat()} -- {interval_end.isoformat()}"
    if store.exists(key):
        batches = json.loads(store.read_bytes(key))["batches"]
        log.info("source %s, interval %s ran before: reprocessing its batches %s", source, interval,
                 batches or "(none)")
        return {"source": source, "batches": batches, "reprocess": True, "interval": interval} if batches else None
    result, where = land_from(config, settings)
    batches = [result.batch_id] if result.batch_id else []
    record = {"source": source, "interval_start": interval_start.isoformat(),
              "interval_end": interval_end.isoformat(), "batches": batches,
              "recorded_at": datetime.now(timezone.utc).isoformat()}
    if not store.write_bytes(key, json.dumps(record, indent=2).encode(), if_absent=True):
        # A concurrent run of the same interval recorded first; follow its record.
        batches = json.loads(store.read_bytes(key))["batches"]
    if not batches:
        log.info("source %s: nothing new in %s for interval %s", source, where, interval)
        return None
    how = "landed" if result.created else "resuming landed-but-unapplied"
    log.info("source %s, interval %s: %s batch %s (%d messages)", source, interval, how, batches[0],
             result.message_count)
    landed = {"source": source, "batches": batches, "reprocess": False, "interval": interval}
    return landed if result.lag is None else {**landed, "lag": result.lag}


def land_from(config: SourceConfig, settings: LakeSettings) -> tuple[LandResult, str]:
    """The next batch of a source from where its config says: its Kafka topics, else its inbox.

    A Kafka source's landing reads the ranges in Spark tasks of this process's session (``CDCLAKE_SPARK_MASTER``;
    on a ``spark://`` master the executors need confluent-kafka), started only when there is something to read.

    Returns:
        The :class:`~cdclake.pipeline.LandResult` (``lag`` set for a Kafka source) and a description of where it
        landed from, for the log.
    """
    from cdclake import pipeline

    if config.kafka is not None:
        kafka = config.kafka.kafka_source(connection=kafka_connection_settings(config.kafka.connection))
        result = pipeline.next_kafka_batch(settings, source=config.name, kafka=kafka, spark=lambda: _spark(settings))
        topics = ", ".join(kafka.topics) if kafka.topics else f"topics matching {kafka.pattern}"
        return result, f"kafka {kafka.bootstrap} ({topics})"
    inbox = config.inbox_location(settings.root)
    return pipeline.next_batch(settings, source=config.name, inbox=inbox), f"inbox {inbox}"


def kafka_connection_settings(conn_id: str | None) -> dict[str, str]:
    """The Kafka client security settings an Airflow connection holds (``{}`` without a connection).

    Its ``extra`` keys ``security.protocol``, ``sasl.*`` and ``ssl.*`` pass through; its login and password become
    ``sasl.username``/``sasl.password`` unless the extra sets them. Other extra keys are refused by name, so a typo
    does not silently drop a setting.

    Raises:
        SourceConfigError: The connection does not exist, or its extra holds settings cdclake does not pass.
    """
    if not conn_id:
        return {}
    from airflow.sdk import BaseHook

    from cdclake.kafka import SECURITY_SETTING

    try:
        conn = BaseHook.get_connection(conn_id)
    except Exception as exc:  # noqa: BLE001 - Airflow raises its own not-found types
        raise SourceConfigError(f"kafka.connection: Airflow connection {conn_id!r} cannot be read: {exc}") from exc
    settings = {str(k): str(v) for k, v in (conn.extra_dejson or {}).items()}
    unknown = sorted(k for k in settings if not SECURITY_SETTING.match(k))
    if unknown:
        raise SourceConfigError(f"kafka.connection {conn_id!r}: extra key(s) {', '.join(unknown)} are not Kafka "
                                "security settings (security.protocol, sasl.*, ssl.*)")
    if conn.login and "sasl.username" not in settings:
        settings["sasl.username"] = conn.login
    if conn.password and "sasl.password" not in settings:
        settings["sasl.password"] = conn.password
    return settings


KAFKA_LAG_EXPECTATION = "kafka_lag"


def kafka_lag_table_id(source: str) -> str:
    """The ``table_id`` under which a Kafka source's lag results are stored in ``cdclake_meta.dq_results``."""
    return f"kafka_lag.{source}"


def kafka_lag_outcome(lag: Mapping[str, Mapping[str, int]], max_lag: int | None) -> ExpectationOutcome:
    """The ``kafka_lag`` expectation's outcome (pure).

    Args:
        lag: Per topic and partition, offsets not landed yet.
        max_lag: The threshold of their sum, or None (the outcome then always holds).

    Returns:
        Observed value ``{"total", "partitions"}``; details ``{"max_lag"}``.
    """
    from cdclake.quality import ExpectationOutcome

    total = sum(behind for parts in lag.values() for behind in parts.values())
    return ExpectationOutcome(KAFKA_LAG_EXPECTATION, None, max_lag is None or total <= max_lag,
                              {"total": total, "partitions": {t: dict(p) for t, p in lag.items()}},
                              {"max_lag": max_lag})


def check_kafka_lag(source: str, landed: Mapping[str, Any], *, run_id: str) -> dict[str, Any]:
    """Record the lag :func:`land_batch` measured as a data-quality result: the freshness of the landing itself.

    One ``kafka_lag`` row per run in ``cdclake_meta.dq_results`` (table ``kafka_lag.<source>``), its observed value
    the lag summed over the partitions and per topic and partition. Over the source's ``kafka.max_lag`` the result
    is ``warned`` (a backlog drains over the next runs; the tables' own freshness SLA fails them when it matters);
    without ``max_lag`` it is only recorded.

    Args:
        source: Source name.
        landed: What :func:`land_batch` returned.
        run_id: The Airflow run id.

    Returns:
        ``{"table_id", "success", "lag_total", "max_lag", "lag"}``; ``lag`` is None (and nothing is recorded) when
        the run reprocessed an interval and measured no lag.
    """
    from cdclake import dq_results
    from cdclake.quality import ValidationSummary, report_path

    config = source_config(source)
    max_lag = config.kafka.max_lag if config.kafka is not None else None
    tid = kafka_lag_table_id(source)
    lag = landed.get("lag")
    if lag is None:
        log.info("source %s: no lag measured (the run reprocesses interval %s); nothing recorded", source,
                 landed.get("interval"))
        return {"table_id": tid, "success": True, "lag_total": None, "max_lag": max_lag, "lag": None}
    outcome = kafka_lag_outcome(lag, max_lag)
    total, success = outcome.observed_value["total"], outcome.success
    settings = lake_settings()
    batch_id = landed["batches"][-1]
    summary = ValidationSummary(table_id=tid, run_id=run_id, batch_id=batch_id, success=success,
                                outcomes=(outcome,), report_json=report_path(settings.dq_root, tid, run_id),
                                data_docs_index=None, suite=f"cdclake.{tid}")
    summary.report_json.parent.mkdir(parents=True, exist_ok=True)
    summary.report_json.write_text(json.dumps({"summary": summary.to_dict()}, indent=2, sort_keys=True))
    status = dq_results.STATUS_PASSED if success else dq_results.STATUS_WARNED
    dq_results.record(_spark(settings), [summary], context=dq_results.RunContext(
        run_id=run_id, source=source, batch_id=batch_id, dag_id=config.dag_id, dag_run_id=run_id),
        policies={tid: "warn"}, statuses={tid: status})
    if success:
        log.info("source %s: kafka lag %d offset(s)%s", source, total,
                 "" if max_lag is None else f", within max_lag {max_lag}")
    else:
        log.warning("source %s: kafka lag %d offset(s) is over max_lag %d (result warned)", source, total, max_lag)
    return {"table_id": tid, "success": success, "lag_total": total, "max_lag": max_lag, "lag": lag}


def normalize_batch(source: str, landed: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Normalize the run's batches (a batch already staged is reused, unless the run reprocesses) and plan one
    apply task per table the source applies. In cluster mode each batch is a ``normalize_batch`` job.

    Returns:
        The mapped apply tasks' arguments, ``[{"table_id", "batches"}]``, sorted by table; tables the config
        excludes (``tables.include``/``exclude``) are logged and left out.
    """
    from cdclake import pipeline
    from cdclake.keys import KeySpec

    config = source_config(source)
    settings = lake_settings()
    keys = KeySpec.parse(config.declared_keys())
    policies = config.ddl_policies()
    staged: set[str] = set()
    for batch_id in landed["batches"]:
        if landed.get("reprocess") or not pipeline.staged_table_ids(settings, source, batch_id):
            conn_id = submit_conn_id()
            if conn_id:
                result = pipeline.NormalizeResult.from_dict(run_job(
                    "normalize_batch", ["--source", source, "--batch-id", batch_id, "--format", config.format,
                                        *(f"--key={k}" for k in keys.to_list()),
                                        *(f"--ddl-policy={p}" for p in policies.to_list()),
                                        f"--time-zone={config.time_zone}"],
                    settings, conn_id=conn_id))
            else:
                result = pipeline.normalize_batch(_spark(settings), settings, source=source, batch_id=batch_id,
                                                  fmt=config.format, keys=keys, ddl_policies=policies,
                                                  time_zone=config.time_zone)
            log.info("normalized batch %s: tables %s, quarantined %d, skipped %s", batch_id,
                     result.tables or "none", result.quarantined, result.skipped or "none")
            for tid, why in result.ddl_stopped.items():
                log.error("batch %s: %s: %s", batch_id, tid, why)
        else:
            log.info("batch %s is already normalized; reusing its staging", batch_id)
        staged.update(pipeline.staged_table_ids(settings, source, batch_id))
    tables = sorted(t for t in staged if config.applies_to(t))
    excluded = sorted(staged - set(tables))
    if excluded:
        log.info("source %s excludes %s (tables.include/exclude)", source, ", ".join(excluded))
    log.info("source %s applies %d table(s): %s", source, len(tables), ", ".join(tables) or "none")
    return [{"table_id": t, "batches": list(landed["batches"])} for t in tables]


def apply_table(source: str, table_id: str, batches: Sequence[str]) -> dict[str, Any]:
    """Apply one table's changes of the run's batches, in batch order (in cluster mode each batch is an
    ``apply_changes --table`` job on the cluster).

    Returns:
        ``{"table_id", "batches": {batch: TableCounts dict}, "rows_after"}``.
    """
    from cdclake import pipeline

    settings = lake_settings()
    options = source_config(source).table_options(table_id).apply_options()
    conn_id = submit_conn_id()
    counts: dict[str, Any] = {}
    for batch_id in batches:
        if conn_id:  # the job reads the same source config for the table's options
            applied = run_job("apply_changes", ["--source", source, "--batch-id", batch_id, "--table", table_id],
                              settings, conn_id=conn_id)
            c = pipeline.TableCounts(**applied["tables"][table_id])
        else:
            c = pipeline.apply_staged_table(_spark(settings), settings, source=source, batch_id=batch_id,
                                            table_id=table_id, options=options)
        counts[batch_id] = c.to_dict()
        log.info("%s, batch %s: +%d inserted, ~%d updated, -%d deleted, %d stale skipped; rows %d -> %d",
                 table_id, batch_id, c.inserted, c.updated, c.deleted, c.skipped_stale, c.rows_before, c.rows_after)
    rows_after = counts[batches[-1]]["rows_after"] if batches else 0
    return {"table_id": table_id, "batches": counts, "rows_after": rows_after}


def mark_applied(source: str, batches: Sequence[str], applied: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Mark the run's batches applied once every table task applied them (``next_batch`` then moves on).

    Returns:
        ``{batch: {table: TableCounts dict}}``.

    Raises:
        DdlStoppedError: After marking, while a table of the source is stopped by a DDL statement under
            ``ddl_policy: fail``: the run fails (every run does until the table is released), naming the tables.
    """
    from cdclake import ddl_stops, pipeline
    from cdclake.pipeline import ApplyResult, TableCounts

    settings = lake_settings()
    out: dict[str, Any] = {}
    for batch_id in batches:
        tables = {a["table_id"]: TableCounts(**a["batches"][batch_id]) for a in applied if batch_id in a["batches"]}
        pipeline.mark_applied(settings, ApplyResult(source, batch_id, tables))
        out[batch_id] = {t: c.to_dict() for t, c in tables.items()}
        log.info("batch %s of %s applied to %d table(s)", batch_id, source, len(tables))
    stops = ddl_stops.stopped_tables(settings, source)
    if stops:
        listed = "; ".join(f"{tid} (by batch {stop.batch_id}: {stop.reason})" for tid, stop in sorted(stops.items()))
        raise DdlStoppedError(
            f"source {source}: {len(stops)} table(s) stopped by a DDL statement under ddl_policy: fail, their changes "
            f"held in quarantine: {listed}. The other tables were applied. After review, replay them with the "
            f"cdclake_replay DAG (mode quarantine-replay, reason ddl_policy=fail, ddl_policy evolve) or `cdclake "
            f"quarantine replay --lake LAKE --source {source} --reason ddl_policy=fail --ddl-policy evolve`")
    return out


def validate_table(source: str, applied: Mapping[str, Any], *, run_id: str,
                   now: datetime | None = None) -> dict[str, Any]:
    """Run the table's data-quality suite (generated and user expectations), the batch suite of each of the run's
    batches on the table's staged changes, check its freshness SLA, store the results and apply its ``dq_policy``:
    ``fail`` raises, ``warn`` logs, ``quarantine`` takes the changes of every batch of the run back out of the table
    and holds them (:func:`cdclake.dq_hold.hold`; ``cdclake dq release`` applies them after a fix).

    Args:
        source: Source name.
        applied: What :func:`apply_table` returned for the table.
        run_id: The Airflow run id (names the report).
        now: The time freshness is measured at (default: now).

    Returns:
        ``{"table_id", "success", "policy", "status" (passed, failed, warned or quarantined),
        "expectations_failed": [...], "stale_by_s", "held_batches", "report_json"}``.

    Raises:
        TableValidationError: A check failed and the table's ``dq_policy`` is ``fail``; the message lists the
            failures and the report.
        ConfigError: Under ``quarantine``, another batch committed to the table on top of the run's batches, so
            their changes cannot be taken back out alone.
    """
    from pyspark.sql import functions as F

    from cdclake import dq_hold, dq_results, dq_suites, pipeline
    from cdclake.apply_options import SOFT_DELETE_COLUMN
    from cdclake.catalog import key_columns_of, table_schema
    from cdclake.dq_config import DqConfig, suites_dir
    from cdclake.identity import spark_table_name
    from cdclake.quality import validate_table as run_suite

    config = source_config(source)
    settings = lake_settings()
    spark = _spark(settings)
    tid = applied["table_id"]
    options = config.table_options(tid)
    batches = list(applied["batches"])
    df = spark.table(spark_table_name(tid))
    if SOFT_DELETE_COLUMN in df.columns:  # soft deletes: the suite and the row count see the live rows
        df = df.where(f"NOT coalesce({SOFT_DELETE_COLUMN}, false)")
    batch_id = batches[-1] if batches else ""
    # The generated suite beyond key and row count (bookkeeping columns, column types, freshness against the
    # config's SLA) and the table's user suite, as in every other path (pipeline.validate_batch): every outcome is
    # stored and shown on the Data Quality pages.
    sla = options.freshness_sla
    moment = now or datetime.now(timezone.utc)
    specs = dq_suites.merge(dq_suites.table_expectations(table_schema(spark, tid), freshness_sla=sla),
                            dq_suites.load_user_suite(suites_dir(), tid))
    summary = run_suite(df, table_id=tid, key_columns=key_columns_of(spark, tid),
                        expected_row_count=applied["rows_after"], dq_root=settings.dq_root, run_id=run_id,
                        batch_id=batch_id, extra_expectations=specs,
                        expectation_parameters=dq_suites.table_parameters(freshness_sla=sla, now=moment))
    stale = [o for o in summary.failed()
             if o.expectation == "expect_column_max_to_be_between" and o.column == "_cdc_source_ts"]
    failures = [f"{o.expectation}({o.column or ''}) observed {o.observed_value!r}" for o in summary.failed()
                if o not in stale]  # the freshness failure is told below, with the age and the SLA
    # The batch suite (ops, positions, source times, quarantined share) of each batch on the table's changes.
    thresholds = DqConfig.from_env()
    batch_summaries = [s for s in (pipeline.validate_batch_changes(spark, settings, source=source, batch_id=b,
                                                                   table_id=tid, run_id=run_id, config=thresholds)
                                   for b in batches) if s is not None]
    failures += [f"batch {s.batch_id}: {o.expectation}({o.column or ''}) observed {o.observed_value!r}"
                 for s in batch_summaries for o in s.failed()]
    stale_by_s = None
    if stale:
        newest = df.agg(F.max("_cdc_source_ts")).first()[0]
        if newest is None:
            failures.append("freshness: the table has no change with a source time")
        else:
            newest = newest if newest.tzinfo else newest.replace(tzinfo=timezone.utc)
            stale_by_s = max(0.0, (moment - newest).total_seconds() - sla.total_seconds()) if sla else None
            failures.append(f"freshness: newest change at {newest.isoformat()} is older than the SLA "
                            f"{sla} by {stale_by_s or 0:.0f}s")
    text = f"validation FAILED for {tid} (dq_policy {options.dq_policy}): " + "; ".join(failures)
    if not failures:
        status = dq_results.STATUS_PASSED
    elif options.dq_policy == "warn":
        status = dq_results.STATUS_WARNED
    elif options.dq_policy == "quarantine":
        # Every batch of the run is held: their commits to the table are undone together (dq_hold finds them by
        # the batch ids in the snapshot summaries, whichever apply attempt made them).
        dq_hold.hold(spark, settings, source=source, batch_ids=batches, table_id=tid, run_id=run_id,
                     reason="; ".join(failures))
        status = dq_results.STATUS_QUARANTINED
        text += (f"; the changes of batch(es) {', '.join(batches)} are taken back out of the table and held; "
                 f"after a fix `cdclake dq release --lake {settings.root} --source {source} --batch BATCH "
                 f"--table {tid}` applies and validates them again")
    else:
        status = dq_results.STATUS_FAILED
    report = {"table_id": tid, "success": not failures, "policy": options.dq_policy, "status": status,
              "expectations_failed": failures, "stale_by_s": stale_by_s,
              "held_batches": batches if status == dq_results.STATUS_QUARANTINED else [],
              "report_json": str(summary.report_json) if summary.report_json else None}
    dq_results.record(spark, [summary, *batch_summaries], context=dq_results.RunContext(
        run_id=run_id, source=source, batch_id=batch_id, dag_id=config.dag_id, dag_run_id=run_id),
        policies={tid: options.dq_policy}, statuses={tid: status})
    if not failures:
        log.info("validation passed for %s (%d expectations)", tid, len(summary.outcomes))
        return report
    if status == dq_results.STATUS_FAILED:
        raise TableValidationError(f"{text}; report {report['report_json']}", report)
    log.warning("%s", text)
    return report


# --- the manual replay DAG (dags/cdclake_replay.py) ---------------------------------------------------------------

REPLAY_MODES = ("replay", "resnapshot", "quarantine-replay")


def select_batches(settings: LakeSettings, source: str, *, batch_from: str = "", batch_to: str = "",
                   time_from: str = "", time_to: str = "") -> list[str]:
    """A source's landed batches within a batch-id range and/or a landing-time range (both inclusive).

    Args:
        settings: The lake.
        source: Source name.
        batch_from: First batch id (``00000003`` or ``3``); empty: from the first.
        batch_to: Last batch id; empty: to the last.
        time_from: ISO-8601 time; batches landed (manifest ``created_at``) at or after it.
        time_to: ISO-8601 time; batches landed at or before it.

    Raises:
        SourceConfigError: A bound is not a batch number or an ISO-8601 time.
    """
    from cdclake.landing import list_batches, read_manifest

    def batch_bound(value: str, name: str) -> str | None:
        if not value:
            return None
        if not value.isdigit():
            raise SourceConfigError(f"param {name}={value!r}: expected a batch id such as 00000003")
        return value.zfill(8)

    def time_bound(value: str, name: str) -> datetime | None:
        if not value:
            return None
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            raise SourceConfigError(f"param {name}={value!r}: expected an ISO-8601 time such as "
                                    "2026-01-31T12:00:00+00:00") from None
        return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)

    low, high = batch_bound(batch_from, "batch_from"), batch_bound(batch_to, "batch_to")
    start, end = time_bound(time_from, "time_from"), time_bound(time_to, "time_to")
    selected = []
    for batch_id in list_batches(settings, source):
        if (low and batch_id < low) or (high and batch_id > high):
            continue
        if start or end:
            landed = datetime.fromisoformat(read_manifest(settings, source, batch_id)["created_at"])
            if (start and landed < start) or (end and landed > end):
                continue
        selected.append(batch_id)
    return selected


def replay(params: Mapping[str, Any]) -> dict[str, Any]:
    """Run the replay DAG's recovery action (see ``dags/cdclake_replay.py``).

    Args:
        params: ``source``, ``mode``, ``tables`` (globs; empty: every table the source applies), ``batch_from``,
            ``batch_to``, ``time_from``, ``time_to``, ``reason`` (quarantine-replay filter), ``ddl_policy``
            (quarantine-replay: overrides the config's DDL policies; empty keeps them).

    Returns:
        ``{"mode", "source", "batches": {batch: {table: counts}}}`` for replay, ``{"mode", "source", "replays":
        [ReplayResult dicts]}`` for quarantine-replay.

    Raises:
        SourceConfigError: Unknown source or mode, bad ranges, no batch selected, or ``resnapshot`` (which the
            source itself must perform; the message says how).
    """
    import fnmatch

    from cdclake import pipeline
    from cdclake.keys import KeySpec
    from cdclake.schema_changes import DdlPolicies

    source = str(params.get("source") or "")
    mode = str(params.get("mode") or "")
    if mode not in REPLAY_MODES:
        raise SourceConfigError(f"param mode={mode!r}: expected one of {', '.join(REPLAY_MODES)}")
    config = source_config(source)
    settings = lake_settings()
    keys = KeySpec.parse(config.declared_keys())
    if mode == "resnapshot":
        raise SourceConfigError(
            f"mode resnapshot: source {source!r} must produce the new snapshot itself -- e.g. a Debezium "
            "'execute-snapshot' signal (signal table or Kafka signal topic) for the tables, a canal/DRS full sync; "
            "the snapshot then lands as ordinary batches, and its rows never override newer streamed changes. "
            "cdclake does not send source signals.")
    if mode == "quarantine-replay":
        override = str(params.get("ddl_policy") or "")
        try:
            policies = DdlPolicies.parse([override]) if override else config.ddl_policies()
        except ConfigError as exc:
            raise SourceConfigError(f"param ddl_policy={override!r}: {exc}") from exc
        results = pipeline.replay_quarantine(_spark(settings), settings, source=source,
                                             reason=str(params.get("reason") or "") or None, keys=keys,
                                             ddl_policies=policies, time_zone=config.time_zone,
                                             options_for=lambda t: config.table_options(t).apply_options())
        log.info("quarantine-replay of %s: %d group(s) replayed", source, len(results))
        return {"mode": mode, "source": source, "replays": [r.to_dict() for r in results]}

    batches = select_batches(settings, source, batch_from=str(params.get("batch_from") or ""),
                             batch_to=str(params.get("batch_to") or ""), time_from=str(params.get("time_from") or ""),
                             time_to=str(params.get("time_to") or ""))
    if not batches:
        raise SourceConfigError(f"no landed batch of source {source!r} matches the given batch/time range")
    patterns = [p for p in params.get("tables") or [] if p]
    spark = _spark(settings)
    out: dict[str, Any] = {}
    for batch_id in batches:
        pipeline.normalize_batch(spark, settings, source=source, batch_id=batch_id, fmt=config.format, keys=keys,
                                 ddl_policies=config.ddl_policies(), time_zone=config.time_zone)
        staged = pipeline.staged_table_ids(settings, source, batch_id)
        tables = [t for t in staged if config.applies_to(t)
                  and (not patterns or any(fnmatch.fnmatchcase(t, p) for p in patterns))]
        result = pipeline.apply_batch(spark, settings, source=source, batch_id=batch_id, tables=tables,
                                      options={t: config.table_options(t).apply_options() for t in tables})
        out[batch_id] = {t: c.to_dict() for t, c in result.tables.items()}
        log.info("replayed batch %s of %s into %s", batch_id, source, ", ".join(tables) or "no table")
    return {"mode": mode, "source": source, "batches": out}
