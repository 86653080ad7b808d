"""Iceberg table maintenance with Iceberg's Spark procedures, per-table thresholds from the source configs.

For one table, in this order (each step reports what it did):

1. ``rewrite_data_files`` (bin-pack compaction) when the table has at least ``min_data_files`` data files; file
   groups of at least ``min_input_files`` files are rewritten towards ``target_file_size_mb``, and position deletes
   that apply to rewritten files are applied on the way.
2. ``rewrite_position_delete_files`` when at least ``min_delete_files`` position-delete files remain (compacts
   them and drops dangling deletes).
3. ``expire_snapshots`` older than ``expire_older_than``, always keeping the last ``retain_last`` snapshots (and
   the files only they reference are deleted).
4. ``remove_orphan_files`` older than ``orphan_older_than`` (files no snapshot references: failed writes).
5. With ``tombstone_retention`` set, the table's hard-delete tombstones recorded longer ago than that are
   forgotten (``cdclake_meta.tombstones``; the truncate watermark stays).

Compaction and expiry never change a table's rows: the current snapshot's contents are the same before and after.
A run holds the table's lock (``cdclake.locks``), so it waits for an apply of the table rather than conflicting
with it.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Mapping

from cdclake.catalog import sql_literal
from cdclake.config import MaintenanceOptions, SourceConfig
from cdclake.identity import spark_table_name, split_table_id
from cdclake.locks import table_lock
from cdclake.settings import CATALOG_NAME

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FileCounts:
    """Live files and snapshots of a table's current state."""

    data_files: int
    position_delete_files: int
    equality_delete_files: int
    snapshots: int


@dataclass(frozen=True)
class MaintenanceReport:
    """What maintenance did to one table.

    Attributes:
        table_id: ``namespace.table``.
        before: Files and snapshots before.
        after: Files and snapshots after.
        steps: Per procedure, its output row (counts of rewritten/added/deleted files), or the reason it was skipped.
        orphan_files: Locations ``remove_orphan_files`` deleted.
    """

    table_id: str
    before: FileCounts
    after: FileCounts
    steps: dict[str, dict[str, Any]] = field(default_factory=dict)
    orphan_files: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (for XCom and logs)."""
        return asdict(self)

    def describe(self) -> str:
        """One readable line per step."""
        lines = [f"{self.table_id}: data files {self.before.data_files} -> {self.after.data_files}, "
                 f"position-delete files {self.before.position_delete_files} -> {self.after.position_delete_files}, "
                 f"snapshots {self.before.snapshots} -> {self.after.snapshots}"]
        for step, outcome in self.steps.items():
            lines.append(f"  {step}: " + ", ".join(f"{k}={v}" for k, v in outcome.items()))
        return "\n".join(lines)


def file_counts(spark: SparkSession, tid: str) -> FileCounts:
    """Live data and delete files of the current snapshot, and the number of snapshots kept."""
    name = spark_table_name(tid)
    by_content = {r["content"]: r["n"] for r in
                  spark.sql(f"SELECT content, count(*) AS n FROM {name}.files GROUP BY content").collect()}
    snapshots = spark.sql(f"SELECT count(*) AS n FROM {name}.snapshots").first()["n"]
    return FileCounts(by_content.get(0, 0), by_content.get(1, 0), by_content.get(2, 0), snapshots)


def _procedure_table(tid: str) -> str:
    namespace, table = split_table_id(tid)
    return f"`{namespace}`.`{table}`"


def _ts(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")


def _call(spark: SparkSession, procedure: str, args: str) -> list[dict[str, Any]]:
    statement = f"CALL {CATALOG_NAME}.system.{procedure}({args})"
    log.info("%s", statement)
    return [r.asDict() for r in spark.sql(statement).collect()]


def maintain_table(spark: SparkSession, tid: str, options: MaintenanceOptions, *,
                   now: datetime | None = None) -> MaintenanceReport:
    """Compact, expire and clean one table according to its thresholds (see the module docstring).

    Args:
        spark: A session with the lake catalog (Iceberg SQL extensions enabled).
        tid: ``namespace.table``.
        options: The table's thresholds.
        now: The moment ages are measured from (default: the moment each step starts, UTC, so the commits of
            the compaction steps count too).

    Returns:
        What was done.

    Raises:
        TableLockTimeout: An apply of the table held its lock too long (maintenance takes the same lock).
    """
    with table_lock(spark, tid, "maintenance"):
        return _maintain_table(spark, tid, options, now=now)


def _maintain_table(spark: SparkSession, tid: str, options: MaintenanceOptions, *,
                    now: datetime | None) -> MaintenanceReport:
    def moment() -> datetime:
        return now or datetime.now(timezone.utc)

    table = _procedure_table(tid)
    literal = f"'{sql_literal(table)}'"  # the procedures take the table name as a string literal
    before = file_counts(spark, tid)
    steps: dict[str, dict[str, Any]] = {}

    if before.data_files >= options.min_data_files:
        target = options.target_file_size_mb * 1024 * 1024
        rows = _call(spark, "rewrite_data_files",
                     f"table => {literal}, options => map('min-input-files', '{options.min_input_files}', "
                     f"'target-file-size-bytes', '{target}', 'delete-file-threshold', '1')")
        steps["rewrite_data_files"] = rows[0] if rows else {}
    else:
        steps["rewrite_data_files"] = {"skipped": f"{before.data_files} data file(s) < {options.min_data_files}"}

    deletes = file_counts(spark, tid).position_delete_files
    if deletes >= options.min_delete_files:
        rows = _call(spark, "rewrite_position_delete_files",
                     f"table => {literal}, options => map('rewrite-all', 'true')")
        steps["rewrite_position_delete_files"] = rows[0] if rows else {}
    else:
        steps["rewrite_position_delete_files"] = {
            "skipped": f"{deletes} position-delete file(s) < {options.min_delete_files}"}

    rows = _call(spark, "expire_snapshots",
                 f"table => {literal}, older_than => TIMESTAMP '{_ts(moment() - options.expire_older_than)}', "
                 f"retain_last => {options.retain_last}")
    steps["expire_snapshots"] = rows[0] if rows else {}

    rows = _call(spark, "remove_orphan_files",
                 f"table => {literal}, older_than => TIMESTAMP '{_ts(moment() - options.orphan_older_than)}'")
    orphans = sorted(str(r.get("orphan_file_location")) for r in rows)
    steps["remove_orphan_files"] = {"removed": len(orphans)}

    if options.tombstone_retention is not None:
        steps["expire_tombstones"] = {"removed": expire_tombstones(spark, tid,
                                                                   moment() - options.tombstone_retention)}

    report = MaintenanceReport(tid, before, file_counts(spark, tid), steps, orphans)
    log.info("%s", report.describe())
    return report


def expire_tombstones(spark: SparkSession, tid: str, older_than: datetime) -> int:
    """Forget a table's delete tombstones recorded before ``older_than`` (its truncate watermark stays).

    Returns:
        How many were removed.
    """
    from cdclake import tombstones
    from cdclake.catalog import table_exists

    if not table_exists(spark, tombstones.TABLE):
        return 0
    name = spark_table_name(tombstones.TABLE)
    where = (f"table_id = '{sql_literal(tid)}' AND key_json <> '{tombstones.TRUNCATE_KEY}' "
             f"AND deleted_at < TIMESTAMP '{_ts(older_than)}'")
    doomed = spark.sql(f"SELECT count(*) AS n FROM {name} WHERE {where}").first()["n"]
    if doomed:
        spark.sql(f"DELETE FROM {name} WHERE {where}")
    log.info("table %s: %d tombstone(s) older than %s expired", tid, doomed, _ts(older_than))
    return doomed


def table_thresholds(sources: Mapping[str, SourceConfig], tid: str) -> tuple[str | None, MaintenanceOptions]:
    """The thresholds of a table: those of the first source (by name) that applies it, else the defaults.

    Returns:
        ``(source name or None, options)``.
    """
    for name, config in sorted(sources.items()):
        if config.applies_to(tid):
            return name, config.table_options(tid).maintenance
    return None, MaintenanceOptions()



# --- task bodies of dags/cdclake_maintenance.py ------------------------------------------------------------------

def plan_tables(patterns: list[str] | None = None) -> list[str]:
    """The lake's tables to maintain (cdclake's own ``cdclake_meta`` tables included), filtered by globs.

    Args:
        patterns: ``namespace.table`` globs; empty or None means every table.
    """
    import fnmatch

    from cdclake.catalog import pyiceberg_catalog
    from cdclake.settings import LakeSettings

    catalog = pyiceberg_catalog(LakeSettings.from_env())
    tables = sorted(".".join(ident) for ns in catalog.list_namespaces() for ident in catalog.list_tables(ns))
    if patterns:
        tables = [t for t in tables if any(fnmatch.fnmatchcase(t, p) for p in patterns)]
    log.info("maintaining %d table(s): %s", len(tables), ", ".join(tables) or "none")
    return tables


def maintain(tid: str) -> dict[str, Any]:
    """Maintain one table of the lake (``CDCLAKE_*`` settings) with its source's thresholds.

    Returns:
        ``MaintenanceReport.to_dict()`` plus ``source`` (the config the thresholds came from, or None).
    """
    from cdclake.config import load_sources
    from cdclake.settings import LakeSettings
    from cdclake.spark import get_spark

    source, options = table_thresholds(load_sources(), tid)
    spark = get_spark(LakeSettings.from_env(), app_name="cdclake-maintenance")
    report = maintain_table(spark, tid, options)
    return {**report.to_dict(), "source": source, "summary": report.describe()}
