"""Apply: staged canonical records -> Iceberg tables, with a per-key high-water mark.

For each table of a batch:

1. A truncate in the batch removes every stored row older than it, and every change of the batch before it.
2. Per key, the change with the highest position in the batch wins.
3. Each winner is classified against the stored row's ``_cdc_position``: ``insert`` (no row; not a delete),
   ``update`` / ``delete`` (newer than the row), ``stale`` (not newer: skipped), ``noop`` (delete of no row).
4. ``MERGE INTO`` performs the actions, re-checking positions in its conditions, so a concurrent writer's newer
   row is never overwritten. Into an empty table, the inserts are a plain append (no MERGE).

Deleted keys keep their delete position in ``cdclake_meta.tombstones`` (and a truncate its position as the
table's watermark), so a late or replayed older change cannot resurrect a deleted row: a change is applied only
if it is newer than the stored row, the key's tombstone and the truncate watermark.

Target rows carry bookkeeping columns: ``_cdc_position``, ``_cdc_op``, ``_cdc_source_ts``, ``_cdc_batch_id``,
``_cdc_applied_at``. Columns the source did not send (``unavailable``, e.g. unchanged TOAST) keep their stored value.
"""

from __future__ import annotations

import logging
from typing import Sequence

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, StructField, StructType

from cdclake import tombstones
from cdclake.catalog import KEY_COLUMNS_PROPERTY, ensure_namespace, table_exists, table_schema
from cdclake.identity import spark_table_name, split_table_id
from cdclake.normalize import staged_tables, staging_dir
from cdclake.pipeline import ApplyResult, TableCounts
from cdclake.settings import LakeSettings

log = logging.getLogger(__name__)

BOOKKEEPING: tuple[tuple[str, str], ...] = (
    ("_cdc_position", "string"),
    ("_cdc_op", "string"),
    ("_cdc_source_ts", "timestamp"),
    ("_cdc_batch_id", "string"),
    ("_cdc_applied_at", "timestamp"),
)
TABLE_PROPERTIES = {
    "format-version": "2",
    "write.merge.mode": "merge-on-read",
    "write.update.mode": "merge-on-read",
    "write.delete.mode": "merge-on-read",
}


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def create_table_sql(name: str, columns: Sequence[StructField], key: Sequence[str]) -> str:
    """``CREATE TABLE`` for a CDC target: user columns, bookkeeping columns, v2 merge-on-read properties."""
    cols = [f"{_q(f.name)} {f.dataType.simpleString()}" for f in columns]
    cols += [f"{_q(n)} {t}" for n, t in BOOKKEEPING]
    props = dict(TABLE_PROPERTIES, **{KEY_COLUMNS_PROPERTY: ",".join(key)})
    props_sql = ", ".join(f"'{k}'='{v}'" for k, v in props.items())
    return f"CREATE TABLE IF NOT EXISTS {name} ({', '.join(cols)}) USING iceberg TBLPROPERTIES ({props_sql})"


def merge_sql(target: str, source_view: str, *, key: Sequence[str], columns: Sequence[str]) -> str:
    """The MERGE statement applying classified changes (pure; see the module docstring).

    Args:
        target: Spark name of the Iceberg table.
        source_view: Temp view of winners with ``_action`` and ``_unavailable`` columns.
        key: Primary-key columns.
        columns: Non-key user columns.

    Returns:
        SQL text.
    """
    on = " AND ".join(f"t.{_q(k)} = s.{_q(k)}" for k in key)
    newer = "s._cdc_position > t._cdc_position"
    sets = [
        f"t.{_q(c)} = CASE WHEN array_contains(s._unavailable, '{c}') THEN t.{_q(c)} ELSE s.{_q(c)} END"
        for c in columns
    ]
    sets += [f"t.{_q(n)} = s.{_q(n)}" for n, _ in BOOKKEEPING]
    all_cols = [*key, *columns, *(n for n, _ in BOOKKEEPING)]
    return (
        f"MERGE INTO {target} t USING {source_view} s ON {on}\n"
        f"WHEN MATCHED AND s._action = 'delete' AND {newer} THEN DELETE\n"
        f"WHEN MATCHED AND s._action = 'update' AND {newer} THEN UPDATE SET {', '.join(sets)}\n"
        f"WHEN NOT MATCHED AND s._action = 'insert' THEN INSERT ({', '.join(_q(c) for c in all_cols)}) "
        f"VALUES ({', '.join('s.' + _q(c) for c in all_cols)})"
    )


def latest_per_key(changes: DataFrame, key: Sequence[str]) -> DataFrame:
    """Per key, the change with the highest position (pure)."""
    w = Window.partitionBy(*key).orderBy(F.col("_cdc_position").desc())
    return changes.withColumn("_rn", F.row_number().over(w)).where(F.col("_rn") == 1).drop("_rn")


def flatten(changes: DataFrame, key: Sequence[str], columns: Sequence[StructField]) -> DataFrame:
    """Canonical records -> one flat row per change: key, user columns (from ``after``), bookkeeping (pure)."""
    return changes.select(
        *[F.col("key")[k].alias(k) for k in key],
        *[F.col("after")[f.name].cast(f.dataType).alias(f.name) for f in columns if f.name not in key],
        F.col("position").alias("_cdc_position"),
        F.col("op").alias("_cdc_op"),
        F.col("source_ts").alias("_cdc_source_ts"),
        F.col("batch_id").alias("_cdc_batch_id"),
        F.current_timestamp().alias("_cdc_applied_at"),
        F.coalesce(F.col("unavailable"), F.array().cast("array<string>")).alias("_unavailable"),
    )


def classify(winners: DataFrame, stored: DataFrame, tombstones: DataFrame, key: Sequence[str],
             watermark: str | None = None) -> DataFrame:
    """Add ``_action`` (insert/update/delete/stale/noop) by comparing winners with stored positions (pure).

    Args:
        winners: One change per key, with ``_key_json``.
        stored: The table (key columns and ``_cdc_position``).
        tombstones: Deleted keys of the table: ``_key_json``, ``_tomb_position``.
        key: Key columns.
        watermark: Position of the table's latest truncate, or None.
    """
    stored = stored.select(*key, F.col("_cdc_position").alias("_stored_position"))
    joined = winners.join(stored, list(key), "left").join(tombstones, "_key_json", "left")
    is_delete = F.col("_cdc_op") == "d"
    pos = F.col("_cdc_position")
    not_newer_than_truncate = pos <= F.lit(watermark) if watermark is not None else F.lit(False)
    action = (
        F.when(not_newer_than_truncate, "stale")
        .when(F.col("_stored_position").isNull(),
              F.when(F.col("_tomb_position").isNotNull() & (pos <= F.col("_tomb_position")), "stale")
              .when(is_delete, "noop").otherwise("insert"))
        .when(pos <= F.col("_stored_position"), "stale")
        .when(is_delete, "delete")
        .otherwise("update")
    )
    return joined.withColumn("_action", action).drop("_stored_position", "_tomb_position")


def _ensure_table(spark: SparkSession, tid: str, columns: Sequence[StructField], key: Sequence[str]) -> dict[str, DataType]:
    """Create the table, or add columns it lacks; return the table's user column types."""
    name = spark_table_name(tid)
    if not table_exists(spark, tid):
        ensure_namespace(spark, split_table_id(tid)[0])
        spark.sql(create_table_sql(name, columns, key))
        log.info("created table %s (key %s)", tid, ",".join(key))
    existing = {f.name: f.dataType for f in table_schema(spark, tid).fields}
    for f in columns:
        if f.name not in existing:
            spark.sql(f"ALTER TABLE {name} ADD COLUMN {_q(f.name)} {f.dataType.simpleString()}")
            log.info("table %s: added column %s %s", tid, f.name, f.dataType.simpleString())
            existing[f.name] = f.dataType
    return {n: t for n, t in existing.items() if not n.startswith("_cdc_")}


def apply_table(spark: SparkSession, changes: DataFrame, *, tid: str, key: Sequence[str]) -> TableCounts:
    """Apply one table's canonical records of one batch; see the module docstring.

    Args:
        spark: The session.
        changes: Canonical change records of the table.
        tid: ``namespace.table``.
        key: Primary-key columns.

    Returns:
        What the batch did to the table.
    """
    name = spark_table_name(tid)
    after_type = changes.schema["after"].dataType
    assert isinstance(after_type, StructType)
    types = _ensure_table(spark, tid, after_type.fields, key)
    columns = [StructField(n, t) for n, t in types.items()]
    value_columns = [f.name for f in columns if f.name not in key]

    tombstones.ensure_table(spark)
    truncated_at = changes.where(F.col("op") == "t").agg(F.max("position")).first()[0]
    if truncated_at is not None:
        spark.sql(f"DELETE FROM {name} WHERE _cdc_position < '{truncated_at}'")
        tombstones.record_truncate(spark, tid, truncated_at)
        log.info("table %s: truncate at %s", tid, truncated_at)
    changes = changes.where(F.col("op") != "t")
    flat = flatten(changes, key, [f for f in columns if f.name in value_columns])
    winners = latest_per_key(flat, key).withColumn("_key_json", F.to_json(F.struct(*key)))
    rows_before = spark.table(name).count()
    classified = classify(winners, spark.table(name), tombstones.of_table(spark, tid), key,
                          watermark=tombstones.watermark(spark, tid)).persist()
    try:
        counts = {r["_action"]: r["count"] for r in classified.groupBy("_action").count().collect()}
        inserted, updated, deleted = counts.get("insert", 0), counts.get("update", 0), counts.get("delete", 0)
        if inserted + updated + deleted:
            if rows_before == 0 and not (updated or deleted):
                keep = [*key, *value_columns, *(n for n, _ in BOOKKEEPING)]
                classified.where(F.col("_action") == "insert").select(*keep).writeTo(name).append()
            else:
                view = f"cdclake_src_{abs(hash((tid, id(classified))))}"
                classified.where(F.col("_action").isin("insert", "update", "delete")).createOrReplaceTempView(view)
                spark.sql(merge_sql(name, view, key=key, columns=value_columns))
                spark.catalog.dropTempView(view)
        tombstones.record_deletes(spark, tid, classified.where(
            (F.col("_cdc_op") == "d") & F.col("_action").isin("delete", "noop")))
        result = TableCounts(
            inserted=inserted, updated=updated, deleted=deleted, skipped_stale=counts.get("stale", 0),
            rows_before=rows_before, rows_after=rows_before + inserted - deleted,
        )
        log.info("applied to %s: %s", tid, result.to_dict())
        return result
    finally:
        classified.unpersist()


def apply_batch(spark: SparkSession, settings: LakeSettings, *, source: str, batch_id: str) -> ApplyResult:
    """Apply every table staged for a batch (normalize it first).

    Returns:
        Counts per table.
    """
    tables = staged_tables(settings, source, batch_id)
    results: dict[str, TableCounts] = {}
    for tid, info in sorted(tables.items()):
        path = staging_dir(settings, source, batch_id) / tid
        if not path.exists():
            continue
        results[tid] = apply_table(spark, spark.read.parquet(str(path)), tid=tid, key=info["key"])
    return ApplyResult(source, batch_id, results)
