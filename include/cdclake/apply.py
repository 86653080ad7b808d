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

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, StructField, StructType

from cdclake import docpatch, tombstones
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
    """Canonical records -> one flat row per change: key, user columns (from ``after``), bookkeeping (pure).

    A table column the batch's images do not have (an older batch applied after the table gained a column) is null
    in those changes, as it was in the source before the column existed.
    """
    after_type = changes.schema["after"].dataType
    present = set(after_type.fieldNames()) if isinstance(after_type, StructType) else set()

    def value(f: StructField) -> Column:
        source = F.col("after")[f.name] if f.name in present else F.lit(None)
        return source.cast(f.dataType).alias(f.name)

    return changes.select(
        *[F.col("key")[k].alias(k) for k in key],
        *[value(f) for f in columns if f.name not in key],
        F.col("position").alias("_cdc_position"),
        F.col("op").alias("_cdc_op"),
        F.col("source_ts").alias("_cdc_source_ts"),
        F.col("batch_id").alias("_cdc_batch_id"),
        F.current_timestamp().alias("_cdc_applied_at"),
        F.coalesce(F.col("unavailable"), F.array().cast("array<string>")).alias("_unavailable"),
        (F.col("patch") if "patch" in changes.columns else F.lit(None).cast("string")).alias("_patch"),
    )


def fold_patches(flat: DataFrame, stored: DataFrame, key: Sequence[str]) -> DataFrame:
    """One change per key for tables that receive partial updates of their ``document`` column (pure).

    The key's changes newer than the stored row are folded in position order (:func:`cdclake.docpatch.fold_sql`);
    the result is a full image, a delete, or a pending patch applied here to the stored document (or, for a key
    cdclake has no row of, to ``{"_id": …}``). Changes not newer than the stored row are left out of the fold; a
    key with only such changes keeps its newest one, which apply then classifies as stale.
    """
    column = docpatch.PATCH_COLUMN
    stored = stored.select(*key, F.col("_cdc_position").alias("_sp"), F.col(column).alias("_stored_doc"))
    joined = flat.join(stored, list(key), "left")
    fresh = F.col("_sp").isNull() | (F.col("_cdc_position") > F.col("_sp"))
    element = F.struct(F.col("_cdc_position").alias("position"), F.col("_cdc_op").alias("op"),
                       F.col(column).alias("document"), F.col("_patch").alias("patch"))
    others = [c for c in flat.columns if c not in key]
    grouped = joined.groupBy(*key).agg(
        F.max_by(F.struct(*[F.col(c) for c in others]), F.col("_cdc_position")).alias("_last"),
        F.array_sort(F.collect_list(F.when(fresh, element))).alias("_seq"),
        F.first("_stored_doc", ignorenulls=True).alias("_stored_doc"),
    )
    state = F.expr(docpatch.fold_sql("_seq"))
    base = F.coalesce(F.col("_stored_doc"), F.to_json(F.struct(*[F.col(k) for k in key])))
    pending = F.expr(docpatch.apply_sql(docpatch.doc_map_sql("_base"), "_state.setm", "_state.unset"))
    folded = grouped.withColumn("_state", state).withColumn("_base", base)
    kind = F.col("_state.kind")
    document = (F.when(kind == "full", F.col("_state.doc")).when(kind == "patch", pending)
                .otherwise(F.col(f"_last.{column}")))
    outputs = {c: F.col(f"_last.{c}") for c in others}
    outputs[column] = document
    outputs["_cdc_op"] = F.when(kind == "deleted", F.lit("d")).when(
        kind.isin("full", "patch") & (F.col("_last._cdc_op") == "d"), F.lit("u")).otherwise(F.col("_last._cdc_op"))
    outputs["_unavailable"] = F.when(kind.isin("full", "patch"), F.array().cast("array<string>")).otherwise(
        F.col("_last._unavailable"))
    outputs["_patch"] = F.lit(None).cast("string")
    return folded.select(*key, *[outputs[c].alias(c) for c in others])


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
    has_patch = F.col("patch").isNotNull() if "patch" in changes.columns else F.lit(False)
    truncated_at, patches = changes.agg(F.max(F.when(F.col("op") == "t", F.col("position"))),
                                        F.count_if(has_patch)).first()
    if truncated_at is not None:
        spark.sql(f"DELETE FROM {name} WHERE _cdc_position < '{truncated_at}'")
        tombstones.record_truncate(spark, tid, truncated_at)
        log.info("table %s: truncate at %s", tid, truncated_at)
    changes = changes.where(F.col("op") != "t")
    flat = flatten(changes, key, [f for f in columns if f.name in value_columns])
    if patches:
        flat = fold_patches(flat, spark.table(name), key)
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
