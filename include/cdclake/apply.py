"""Apply: staged canonical records -> Iceberg tables, with a per-key high-water mark.

For each table of a batch, holding the table's lock (``cdclake.locks``: one apply or maintenance run per table at a
time, so the tombstones and cut a classification read cannot change before its MERGE):

1. **Cut.** A truncate in the batch, or the end of a snapshot (``snapshot`` ``last`` /
   ``last_in_data_collection``: re-snapshot reconciliation), removes every stored row older than it and makes every
   older change stale. A snapshot's cut is just below its own rows (``<source position>/``), so it removes exactly
   the rows the snapshot did not see and nothing changed after the snapshot began. A full sync (DRS/canal ``INIT``
   rows, ``snapshot`` ``init``) has no end marker: the table's first streamed change positioned after its last
   row completes it (table property ``cdclake.open-full-sync`` spans batches), with a cut just below its first row.
2. Every change is classified against the stored row's ``_cdc_position``, the key's tombstone and the table's cut
   watermark: ``insert`` (no live row before, one after), ``update``, ``delete`` (a live row goes),
   ``noop`` (a delete of no live row), ``stale`` (not newer: skipped).
3. Columns a change did not carry (``unavailable``: unchanged TOAST) take the value of the key's previous non-stale
   change in the batch, else keep the stored value. A new key's row with such columns, written with the delete of
   its old key (a primary-key change), takes the old key's values (:func:`fill_moved_rows`; with the delete applied
   by an earlier batch, the values its row had, from the changelog).
4. Per key, the change with the highest position wins; ``MERGE INTO`` performs the actions, re-checking positions in
   its conditions, so a concurrent writer's newer row is never overwritten (commit conflicts are retried). Into an
   empty table, inserts are a plain append (no MERGE).
5. Non-stale changes are appended to the table's changelog (``cdclake_changelog.<namespace>__<table>``), once per
   batch, before the table is changed, each with its action against the key's row just before it.
6. With ``history`` on, the table's SCD type 2 history (``cdclake_history.<namespace>__<table>``) gets one row per
   version: every applied insert/update opens a version (``_cdc_valid_from`` = its position, and its source
   time), which the key's next applied change, its delete, or a cut closes (``_cdc_valid_to``); the current
   version has ``_cdc_valid_to`` null and ``_cdc_current`` true. One MERGE per batch, before the table changes.
   Turned on for a table that already has rows, the history starts with those rows as open versions (from the
   change that produced each); versions closed before that are not recovered.

Deletes: ``hard`` (default) removes the row and keeps its delete position in ``cdclake_meta.tombstones`` (cuts
keep theirs as the table's watermark), so a late or replayed older change cannot resurrect it; ``soft`` keeps the
row with ``_cdc_is_deleted`` true (the row is its own tombstone).

Every commit's snapshot summary records ``cdclake.source``, ``cdclake.batch-id`` and ``cdclake.max-position``. Every
step is idempotent, so a crash anywhere followed by a re-run gives the table a clean run gives.

Target rows carry bookkeeping columns: ``_cdc_position``, ``_cdc_op``, ``_cdc_source_ts``, ``_cdc_batch_id``,
``_cdc_applied_at`` (and ``_cdc_is_deleted`` in soft mode).

Document fields: a table with a JSON ``document`` column (MongoDB collections) can keep top-level fields as typed
columns too (``ApplyOptions.document_fields``). They are computed from the final document of each change (after
``$set``/``$unset`` patches are folded), so they always agree with it; a field that is missing or does not cast to
the column's type is null there (the document keeps the value; uncastable values are counted in the log). A field
configured on a table that already has rows is filled from the stored documents once (one ``UPDATE``), and the
table property ``cdclake.document-fields`` records which fields are filled, so a crash in between is repaired by the
next run.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections import defaultdict
from typing import Any, Mapping, Sequence

from pyspark.sql import Column, DataFrame, Row, SparkSession, Window, WindowSpec
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BooleanType, DataType, DateType, DecimalType, DoubleType, FloatType, IntegerType, LongType, StringType,
    StructField, StructType, TimestampType,
)

from cdclake import docpatch, faults, open_snapshots, tombstones
from cdclake.apply_options import SOFT_DELETE_COLUMN, ApplyOptions
from cdclake.catalog import (
    CHANGELOG_NAMESPACE, CONNECT_TYPES_PROPERTY, HISTORY_NAMESPACE, KEY_COLUMNS_PROPERTY, SOURCE_PROPERTY,
    SOURCE_TABLE_PROPERTY, commit_properties, create_table, qualifies_recorded, recorded_connect_types,
    retry_conflicts, sql_literal, table_exists, table_properties, table_schema,
)
from cdclake.evolution import fits, widening
from cdclake.exceptions import ConfigError
from cdclake.identity import spark_table_name, split_table_id
from cdclake.locks import table_lock
from cdclake.pipeline import TableCounts

log = logging.getLogger(__name__)

BOOKKEEPING: tuple[tuple[str, str], ...] = (
    ("_cdc_position", "string"),
    ("_cdc_op", "string"),
    ("_cdc_source_ts", "timestamp"),
    ("_cdc_batch_id", "string"),
    ("_cdc_applied_at", "timestamp"),
)
DELETE_MODE_PROPERTY = "cdclake.delete-mode"
SNAPSHOT_END_MARKERS = ("last", "last_in_data_collection")
"""``snapshot`` values that end a table's snapshot (Debezium); the end triggers re-snapshot reconciliation."""
SNAPSHOT_READ_MARKERS = ("true", "first", "first_in_data_collection")
"""``snapshot`` values of a Debezium snapshot's other reads (not its incremental snapshots')."""
FULL_SYNC_MARKER = "init"
"""``snapshot`` of a DRS full-sync row (``INIT``). A full sync has no end marker: it is complete at the table's first
streamed change positioned after its rows, which triggers reconciliation like a Debezium snapshot's end."""
FULL_SYNC_PROPERTY = "cdclake.open-full-sync"
"""Table property: the first and last positions (and the last row's source time) of a full sync whose completion
has not been seen yet, as JSON; empty when none is open."""
DEFAULT_FILLS_PROPERTY = "cdclake.default-fills"
"""Table property: the ``ALTER TABLE .. ADD .. DEFAULT`` fills applied to the table (JSON list of ``column``,
``value``, ``type``, ``before``), so a change written before the statement that arrives later (out of order, a
quarantine replay) takes the default too."""
COMMIT_ATTEMPTS = 5
DOCUMENT_FIELDS_PROPERTY = "cdclake.document-fields"
"""Table property: the exposed document fields already filled from the stored documents (comma-separated)."""
_SIMPLE_TYPES: dict[str, DataType] = {
    "string": StringType(), "boolean": BooleanType(), "int": IntegerType(), "bigint": LongType(),
    "double": DoubleType(), "float": FloatType(), "date": DateType(), "timestamp": TimestampType(),
}


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _bookkeeping(soft: bool) -> list[tuple[str, str]]:
    return [*BOOKKEEPING, (SOFT_DELETE_COLUMN, "boolean")] if soft else list(BOOKKEEPING)


def _write_properties(options: ApplyOptions) -> dict[str, str]:
    return {f"write.{kind}.mode": options.write_mode for kind in ("merge", "update", "delete")}


def create_table_sql(name: str, columns: Sequence[StructField], key: Sequence[str],
                     options: ApplyOptions = ApplyOptions(), source_table: str | None = None,
                     source: str | None = None) -> str:
    """``CREATE TABLE`` for a CDC target: user columns, bookkeeping columns, partitioning, v2 properties (and the
    source and source table it holds, when known)."""
    cols = [f"{_q(f.name)} {f.dataType.simpleString()}" for f in columns]
    cols += [f"{_q(n)} {t}" for n, t in _bookkeeping(options.soft)]
    props = {"format-version": "2", **_write_properties(options), KEY_COLUMNS_PROPERTY: ",".join(key),
             DELETE_MODE_PROPERTY: options.delete_mode,
             **({SOURCE_TABLE_PROPERTY: source_table} if source_table else {}),
             **({SOURCE_PROPERTY: source} if source else {})}
    props_sql = ", ".join(f"'{k}'='{sql_literal(v)}'" for k, v in props.items())
    partition = options.partition_for(key, _type_names(columns))
    partitioned = f" PARTITIONED BY ({', '.join(partition)})" if partition else ""
    return (f"CREATE TABLE IF NOT EXISTS {name} ({', '.join(cols)}) USING iceberg{partitioned} "
            f"TBLPROPERTIES ({props_sql})")


def _type_names(columns: Sequence[StructField]) -> dict[str, str]:
    return {f.name: f.dataType.simpleString() for f in columns}


def merge_sql(target: str, source_view: str, *, key: Sequence[str], columns: Sequence[str], soft: bool = False) -> str:
    """The MERGE statement applying classified winners (pure; see the module docstring).

    Args:
        target: Spark name of the Iceberg table.
        source_view: Temp view of winners with ``_action`` and ``_unavailable`` columns.
        key: Primary-key columns.
        columns: Non-key user columns.
        soft: Soft-delete mode (deletes flag the row instead of removing it).

    Returns:
        SQL text.
    """
    on = " AND ".join(f"t.{_q(k)} = s.{_q(k)}" for k in key)
    newer = "s._cdc_position > t._cdc_position"
    values = [
        f"t.{_q(c)} = CASE WHEN array_contains(s._unavailable, '{sql_literal(c)}') THEN t.{_q(c)} ELSE s.{_q(c)} END"
        for c in columns
    ]
    marks = [f"t.{_q(n)} = s.{_q(n)}" for n, _ in _bookkeeping(soft)]
    # Soft mode: a delete that carries the values of an earlier change of the batch (carry_into_soft_deletes) sets
    # them, so the flagged row holds the key's last values.
    kept = [
        f"t.{_q(c)} = CASE WHEN s._carried AND NOT array_contains(s._unavailable, '{sql_literal(c)}') THEN s.{_q(c)} "
        f"ELSE t.{_q(c)} END"
        for c in columns
    ]
    all_cols = [*key, *columns, *(n for n, _ in _bookkeeping(soft))]
    insert = f"INSERT ({', '.join(_q(c) for c in all_cols)}) VALUES ({', '.join('s.' + _q(c) for c in all_cols)})"
    if soft:
        return (
            f"MERGE INTO {target} t USING {source_view} s ON {on}\n"
            f"WHEN MATCHED AND s._action IN ('delete', 'noop') AND {newer} THEN UPDATE SET {', '.join(kept + marks)}\n"
            f"WHEN MATCHED AND s._action IN ('insert', 'update') AND {newer} "
            f"THEN UPDATE SET {', '.join(values + marks)}\n"
            f"WHEN NOT MATCHED AND s._action IN ('insert', 'noop') THEN {insert}"
        )
    return (
        f"MERGE INTO {target} t USING {source_view} s ON {on}\n"
        f"WHEN MATCHED AND s._action = 'delete' AND {newer} THEN DELETE\n"
        f"WHEN MATCHED AND s._action = 'update' AND {newer} THEN UPDATE SET {', '.join(values + marks)}\n"
        f"WHEN NOT MATCHED AND s._action = 'insert' THEN {insert}"
    )


def latest_per_key(changes: DataFrame, key: Sequence[str]) -> DataFrame:
    """Per key, the change with the highest position (pure); of classified changes, the highest that is not stale,
    if any: a copy delivered again (:func:`classify`) is stale and newer than the change it copies."""
    order = [F.col("_cdc_position").desc()]
    if "_action" in changes.columns:
        order.insert(0, (F.col("_action") == "stale").asc())
    w = Window.partitionBy(*key).orderBy(*order)
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
        (F.col("op") == "d").alias(SOFT_DELETE_COLUMN),
        F.coalesce(F.col("unavailable"), F.array().cast("array<string>")).alias("_unavailable"),
        (F.col("patch") if "patch" in changes.columns else F.lit(None).cast("string")).alias("_patch"),
    )


def document_field_columns(options: ApplyOptions) -> list[StructField]:
    """The typed columns of the options' exposed document fields."""
    out = []
    for name, type_name in options.document_fields:
        if type_name.startswith("decimal("):
            precision, scale = (int(x) for x in type_name[len("decimal("):-1].split(","))
            out.append(StructField(name, DecimalType(precision, scale)))
        else:
            out.append(StructField(name, _SIMPLE_TYPES[type_name]))
    return out


def document_field_value(field: StructField) -> Column:
    """A document field's value, from the row's ``document`` JSON text, cast to its column's type."""
    raw = F.get_json_object(F.col(docpatch.PATCH_COLUMN), f"$['{field.name}']")
    return raw.cast(field.dataType)


def _uncastable(field: StructField) -> Column:
    raw = F.get_json_object(F.col(docpatch.PATCH_COLUMN), f"$['{field.name}']")
    return F.count_if(raw.isNotNull() & document_field_value(field).isNull())


def _fill_defaults(spark: SparkSession, tid: str, fills: Sequence[Mapping[str, str]]) -> None:
    """Stored rows written before an ``ADD COLUMN .. DEFAULT`` take the default (idempotent: rows filled already
    are not null, so a re-run finds nothing to do and commits nothing)."""
    name = spark_table_name(tid)
    for fill in fills:
        column, before = _q(fill["column"]), sql_literal(fill["before"])
        condition = f"{column} IS NULL AND _cdc_position < '{before}'"
        if spark.table(name).where(condition).limit(1).count():
            spark.sql(f"UPDATE {name} SET {column} = CAST('{sql_literal(fill['value'])}' AS {fill['type']}) "
                      f"WHERE {condition}")
            log.info("table %s: rows written before position %s take %s's default %r", tid, fill["before"],
                     fill["column"], fill["value"])


def recorded_fills(properties: Mapping[str, str]) -> list[dict[str, str]]:
    """The default fills a table records (:data:`DEFAULT_FILLS_PROPERTY`)."""
    try:
        fills = json.loads(properties.get(DEFAULT_FILLS_PROPERTY) or "[]")
    except ValueError:
        return []
    return [f for f in fills if isinstance(f, dict)] if isinstance(fills, list) else []


def _set_property(spark: SparkSession, tid: str, prop: str, value: str) -> None:
    spark.sql(f"ALTER TABLE {spark_table_name(tid)} SET TBLPROPERTIES ('{prop}'='{sql_literal(value)}')")


def _set_json_property(spark: SparkSession, tid: str, prop: str, value: Any) -> None:
    _set_property(spark, tid, prop, json.dumps(value, sort_keys=True))


def _record_fills(spark: SparkSession, tid: str, fills: Sequence[Mapping[str, str]]) -> None:
    _set_json_property(spark, tid, DEFAULT_FILLS_PROPERTY,
                       list({json.dumps(f, sort_keys=True): dict(f) for f in fills}.values()))


def _record_connect_types(spark: SparkSession, tid: str, properties: Mapping[str, str],
                          connect_types: Mapping[str, Any]) -> None:
    """Record the Connect types of the batch's columns on the table, where they are new or changed."""
    recorded = recorded_connect_types(dict(properties))
    merged = {**recorded, **connect_types}
    if merged != recorded:
        _set_json_property(spark, tid, CONNECT_TYPES_PROPERTY, merged)


def forget_column(spark: SparkSession, tid: str, column: str, renamed_to: str | None = None) -> None:
    """What a table records of a column (its default fills, its Connect type), after ``DROP COLUMN`` (forgotten:
    the values are gone at the source) or ``RENAME COLUMN`` (kept under the new name)."""
    properties = table_properties(spark, tid)
    fills = recorded_fills(properties)
    kept = [f if f["column"] != column else {**f, "column": renamed_to} for f in fills
            if f["column"] != column or renamed_to]
    if kept != fills:
        _record_fills(spark, tid, kept)
    types = recorded_connect_types(properties)
    if column in types:
        spec = types.pop(column)
        if renamed_to:
            types[renamed_to] = spec
        _set_json_property(spark, tid, CONNECT_TYPES_PROPERTY, types)


def _fill_document_fields(spark: SparkSession, tid: str, fields: Sequence[StructField]) -> None:
    """Fill exposed document fields not yet filled from the table's stored documents (idempotent)."""
    name = spark_table_name(tid)
    filled = [f for f in table_properties(spark, tid).get(DOCUMENT_FIELDS_PROPERTY, "").split(",") if f]
    missing = [f for f in fields if f.name not in filled]
    if not missing:
        return
    stored = spark.table(name).where(F.col(docpatch.PATCH_COLUMN).isNotNull())
    if stored.limit(1).count():
        assignments = ", ".join(
            f"{_q(f.name)} = CAST(get_json_object({docpatch.PATCH_COLUMN}, '$[\\'{f.name}\\']') AS "
            f"{f.dataType.simpleString()})" for f in missing)
        spark.sql(f"UPDATE {name} SET {assignments} WHERE {docpatch.PATCH_COLUMN} IS NOT NULL")
        log.info("table %s: filled document field(s) %s from the stored documents", tid,
                 ", ".join(f.name for f in missing))
    spark.sql(f"ALTER TABLE {name} SET TBLPROPERTIES ('{DOCUMENT_FIELDS_PROPERTY}'="
              f"'{','.join([*filled, *(f.name for f in missing)])}')")


def fold_patches(flat: DataFrame, stored: DataFrame, key: Sequence[str]) -> DataFrame:
    """Full images for the changes of tables that receive partial updates of their ``document`` column (pure).

    Each change newer than the stored row becomes what the key's document is just after it: the key's such changes
    up to it, folded in position order in one pass (:func:`cdclake.docpatch.scan_sql`), are a full image, a delete,
    or a pending patch applied here to the stored document (or, for a key cdclake has no row of, to ``{"_id": …}``).
    Every change stays a change of its own, so the changelog, history and counts see each. Changes not newer than
    the stored row are kept as they are, for apply to classify as stale.
    """
    column = docpatch.PATCH_COLUMN
    stored = stored.select(*key, F.col("_cdc_position").alias("_sp"), F.col(column).alias("_stored_doc"))
    stale = F.coalesce(F.col("_cdc_position") <= F.col("_sp"), F.lit(False))
    others = [c for c in flat.columns if c not in key]
    change = F.struct(F.col("_cdc_position").alias("position"), F.col("_cdc_op").alias("op"),
                      F.col(column).alias("document"), F.col("_patch").alias("patch"), stale.alias("stale"),
                      F.struct(*others).alias("row"))
    grouped = flat.join(stored, list(key), "left").groupBy(*key).agg(
        F.collect_list(change).alias("_changes"), F.first("_stored_doc", ignorenulls=True).alias("_stored_doc"))
    in_order = F.expr("array_sort(_changes, (l, r) -> "
                      "CASE WHEN l.position < r.position THEN -1 WHEN l.position > r.position THEN 1 ELSE 0 END)")
    scanned = grouped.withColumn("_changes", in_order).withColumn(
        "_states", F.expr(docpatch.scan_sql("_changes", "stale")))
    rows = scanned.select(*key, "_stored_doc", F.inline(F.arrays_zip("_changes", "_states")))
    base = F.coalesce(F.col("_stored_doc"), F.to_json(F.struct(*[F.col(k) for k in key])))
    pending = F.expr(docpatch.apply_sql(docpatch.doc_map_sql("_base"), "_states.setm", "_states.unset"))
    folded = rows.withColumn("_base", base)
    kind = F.col("_states.kind")
    outputs = {c: F.col(f"_changes.row.{c}") for c in others}
    outputs[column] = F.when(kind == "full", F.col("_states.doc")).when(kind == "patch", pending).otherwise(
        outputs[column])
    outputs["_cdc_op"] = F.when(kind == "deleted", F.lit("d")).otherwise(outputs["_cdc_op"])
    outputs["_unavailable"] = F.when(kind.isin("full", "patch"), F.array().cast("array<string>")).otherwise(
        outputs["_unavailable"])
    outputs["_patch"] = F.when(kind.isNull(), outputs["_patch"])
    return folded.select(*key, *[outputs[c].alias(c) for c in others]).select(*flat.columns)


def classify(changes: DataFrame, stored: DataFrame, tombstones: DataFrame, key: Sequence[str],
             watermark: str | None = None, *, soft: bool = False, value_columns: Sequence[str] = ()) -> DataFrame:
    """Add ``_action`` (insert/update/delete/noop/stale) to each change, against the stored row (pure).

    A change delivered again (at-least-once delivery) is stale although its position is newer: only its landing
    tail is (:func:`_redelivered`). Several changes of a key can share a source position (canal's binlog second
    and batch id, a TiCDC transaction's commit_ts), so what is compared with the stored row is the key's *run*:
    its changes in the batch at that source position, of which the last says where the run leaves the row.
    - A run at the source position of the key's tombstone (or of its soft-deleted row) that ends with a delete is
      that delete, and what led to it, delivered again: stale.
    - A run at the source position of a live stored row is flagged ``_maybe_again``: if its last change has the
      row's op and values, the run is a copy and stale (:func:`settle_redelivered`; the comparison reads every
      column of the table, which the classification otherwise does not). A genuine change that repeats the
      stored row's values after another change of the run (``b`` then ``a`` again) is not one: the run ends
      elsewhere or the table is left as it is.
    - A change whose source position, op and values are those of the key's change before it in the batch is a
      copy of that change: stale.

    Args:
        changes: Flat changes (any number per key), with ``_key_json``.
        stored: The table (key columns, ``_cdc_position``, and ``_cdc_is_deleted`` in soft mode).
        tombstones: Deleted keys of the table: ``_key_json``, ``_tomb_position``.
        key: Key columns.
        watermark: The table's cut (latest truncate or snapshot end), or None.
        soft: Soft-delete mode (a stored row may be a deleted one).
        value_columns: The other columns, compared to tell a copy delivered again within the batch.
    """
    live = ~F.coalesce(F.col(SOFT_DELETE_COLUMN), F.lit(False)) if soft else F.lit(True)
    stored = stored.select(*key, F.col("_cdc_position").alias("_stored_position"), live.alias("_stored_live"))
    changes = changes.withColumn("_content", _sent_content(value_columns))
    changes = _mark_runs(_mark_redelivered_in_batch(changes, key), key)
    joined = changes.join(stored, list(key), "left").join(tombstones, "_key_json", "left")
    is_delete = F.col("_cdc_op") == "d"
    pos = F.col("_cdc_position")
    not_newer_than_cut = pos <= F.lit(watermark) if watermark is not None else F.lit(False)
    tombstoned = F.col("_tomb_position").isNotNull() & (
        (pos <= F.col("_tomb_position")) | (F.col("_run_deletes") & _redelivered(pos, F.col("_tomb_position"))))
    at_stored = _redelivered(pos, F.col("_stored_position"))
    action = (
        F.when(not_newer_than_cut | F.col("_again"), "stale")
        .when(F.col("_stored_position").isNull(),
              F.when(tombstoned, "stale").when(is_delete, "noop").otherwise("insert"))
        .when((pos <= F.col("_stored_position")) | (F.col("_run_deletes") & at_stored & ~F.col("_stored_live")),
              "stale")
        .when(F.col("_stored_live"), F.when(is_delete, "delete").otherwise("update"))
        .when(is_delete, "noop")
        .otherwise("insert")
    )
    maybe_again = action.isin("update", "delete") & at_stored & F.col("_run_content").isNotNull()
    return (joined.withColumn("_action", action).withColumn("_maybe_again", maybe_again)
            .drop("_stored_position", "_stored_live", "_tomb_position", "_again", "_run_deletes"))


def settle_redelivered(classified: DataFrame, stored: DataFrame, key: Sequence[str],
                       value_columns: Sequence[str]) -> DataFrame:
    """The ``_maybe_again`` changes (:func:`classify`) whose run ends with the stored row's op and values: stale
    (pure)."""
    rows = stored.select(*key, _content(value_columns).alias("_stored_content"))
    candidates = classified.where(F.col("_maybe_again")).select(*key).distinct()
    rows = rows.join(candidates, list(key), "left_semi")
    again = F.col("_maybe_again") & F.coalesce(F.col("_run_content") == F.col("_stored_content"), F.lit(False))
    return (classified.join(rows, list(key), "left")
            .withColumn("_action", F.when(again, F.lit("stale")).otherwise(F.col("_action")))
            .drop("_stored_content"))


def _content(value_columns: Sequence[str]) -> Column:
    """A hash of a row's op and values: equal for a change and its copy delivered again."""
    return F.xxhash64(F.col("_cdc_op"), *[F.col(c) for c in value_columns])


def _sent_content(value_columns: Sequence[str]) -> Column:
    """:func:`_content` of a change, null for a partial one (a column unavailable: its stored value is not what
    was sent, so such a change is never taken for a copy)."""
    return F.when(F.size(F.col("_unavailable")) == 0, _content(value_columns))


def _redelivered(position: Column, other: Column) -> Column:
    """Whether two positions have the same source position, a real one (not the zeros of a stream without
    positions, whose order is their arrival): they differ in the landing tail only."""
    source = F.substring_index(position, "/", 1)
    return F.coalesce((source == F.substring_index(other, "/", 1)) & source.rlike("[1-9a-f]"), F.lit(False))


def _mark_redelivered_in_batch(changes: DataFrame, key: Sequence[str]) -> DataFrame:
    """``_again``: the key's change before this one in the batch is the same change (:func:`_redelivered`, same op
    and values; ``_content``): a copy delivered again within one batch."""
    w = Window.partitionBy(*key).orderBy("_cdc_position")
    again = _redelivered(F.col("_cdc_position"), F.lag("_cdc_position").over(w)) & (
        F.lag("_content").over(w) == F.col("_content"))
    return changes.withColumn("_again", F.coalesce(again, F.lit(False)))


def _mark_runs(changes: DataFrame, key: Sequence[str]) -> DataFrame:
    """The key's run of a change: its changes in the batch at the change's source position. ``_run_content`` is
    the :func:`_content` of the run's last change, ``_run_deletes`` whether that change is a delete.

    (Partitioned by the key and the source position: the key's partitioning of :func:`_mark_redelivered_in_batch`
    already places a run together, so this adds a sort, not a shuffle.)"""
    run = Window.partitionBy(*key, F.substring_index(F.col("_cdc_position"), "/", 1))
    last = F.max_by(F.struct(F.col("_content").alias("content"), (F.col("_cdc_op") == "d").alias("deletes")),
                    F.col("_cdc_position")).over(run)
    return (changes.withColumn("_run_last", last)
            .withColumn("_run_content", F.col("_run_last.content"))
            .withColumn("_run_deletes", F.col("_run_last.deletes"))
            .drop("_run_last"))


def _earlier_in_batch(key: Sequence[str]) -> WindowSpec:
    """A key's changes of the batch before the current one, in position order."""
    return Window.partitionBy(*key).orderBy("_cdc_position").rowsBetween(Window.unboundedPreceding, -1)


def _carries_values() -> Column:
    """Whether a classified change brings row values (not stale, not a delete)."""
    return F.col("_action").isin("insert", "update")


def carry_into_soft_deletes(classified: DataFrame, key: Sequence[str], columns: Sequence[str]) -> DataFrame:
    """Soft mode: a flagged row keeps the key's last values. A delete whose key had an earlier change in the batch
    that carried values (an insert or update, not stale) takes them, with that change's unavailable columns, and
    ``_carried`` true; other rows get ``_carried`` false (pure)."""
    w, carried = _earlier_in_batch(key), _carries_values()
    previous = F.last(F.when(carried, F.struct(*[F.col(c).alias(c) for c in columns],
                                               F.col("_unavailable").alias("_unavailable"))),
                      ignorenulls=True).over(w)
    out = classified.withColumn("_prev", previous)
    take = F.col("_action").isin("delete", "noop") & F.col("_prev").isNotNull()
    out = out.withColumn("_carried", take)
    for c in [*columns, "_unavailable"]:
        out = out.withColumn(c, F.when(F.col("_carried"), F.col("_prev")[c]).otherwise(F.col(c)))
    return out.drop("_prev")


def fill_unavailable(classified: DataFrame, key: Sequence[str], columns: Sequence[str]) -> DataFrame:
    """Unavailable columns take the value of the key's previous non-stale change in the batch that carried one (pure).

    What stays unavailable after this keeps the stored value (MERGE).
    """
    w, carried = _earlier_in_batch(key), _carries_values()
    filled: list[Column] = []
    out = classified
    for c in columns:
        missing = F.array_contains(F.col("_unavailable"), c)
        previous = F.last(F.when(carried & ~missing, F.struct(F.col(c).alias("v"))), ignorenulls=True).over(w)
        out = out.withColumn(f"_prev_{c}", previous)
        filled.append(F.when(missing & F.col(f"_prev_{c}").isNotNull(), F.lit(c)))
    out = out.withColumn("_filled", F.filter(F.array(*filled), lambda x: x.isNotNull()))
    for c in columns:
        out = out.withColumn(c, F.when(F.array_contains(F.col("_filled"), c), F.col(f"_prev_{c}.v"))
                             .otherwise(F.col(c)))
    return (out.withColumn("_unavailable", F.array_except(F.col("_unavailable"), F.col("_filled")))
            .drop("_filled", *[f"_prev_{c}" for c in columns]))


def fill_moved_rows(classified: DataFrame, stored: DataFrame, key: Sequence[str], columns: Sequence[str],
                    earlier_deletes: DataFrame | None = None) -> DataFrame:
    """A primary-key change written as a delete of the old key and an insert of the new one at one source position
    (Debezium PostgreSQL's ``d`` + ``c``; canal's update whose ``old`` image has another key): the insert's
    unavailable columns (an unchanged TOAST value, a column a partial image left out) take the old key's values, of
    its last change in the batch before the delete that carried them, else of its stored row (pure).

    The insert and the delete pair up when they come from one message (the same full position), or when they are
    the only delete and the only such insert of the table at their source position (one WAL record in PostgreSQL).
    Where that is not certain (a canal message changing several keys in one binlog second), nothing is filled.

    ``earlier_deletes`` (:func:`remembered_deletes`) are deletes an earlier batch applied, with the values their
    rows had: the delete of a key change landed in a batch before its insert pairs up the same way.
    """
    source = F.substring_index(F.col("_cdc_position"), "/", 1)
    missing = {c: F.array_contains(F.col("_unavailable"), c) for c in columns}
    w = _earlier_in_batch(key)
    before_delete = classified.withColumns({
        f"_mv_prev_{c}": F.last(F.when(_carries_values() & ~missing[c], F.struct(F.col(c).alias("v"))),
                                ignorenulls=True).over(w) for c in columns})
    old_rows = stored.select(*key, F.lit(True).alias("_mv_stored"),
                             *[F.col(c).alias(f"_mv_stored_{c}") for c in columns])
    movers = (before_delete.where((F.col("_cdc_op") == "d") & (F.col("_action") != "stale"))
              .join(old_rows, list(key), "left")
              .select(source.alias("_mv_from"), F.col("_cdc_position").alias("_mv_position"),
                      F.col("_key_json").alias("_mv_key"),
                      F.struct(*[F.coalesce(F.col(f"_mv_prev_{c}"), F.when(F.col("_mv_stored"), F.struct(
                          F.col(f"_mv_stored_{c}").alias("v")))).alias(c) for c in columns]).alias("_mv_values")))
    if earlier_deletes is not None:  # (a delete delivered again is the one an earlier batch applied)
        movers = movers.join(earlier_deletes.select("_mv_from", "_mv_key"), ["_mv_from", "_mv_key"],
                             "left_anti").unionByName(earlier_deletes)
    movers = movers.withColumn("_mv_movers", F.count(F.lit(1)).over(Window.partitionBy("_mv_from")))
    gap = (F.col("_action") == "insert") & (F.size("_unavailable") > 0)
    gaps = (classified.where(gap).withColumn("_mv_source", source)
            .withColumn("_mv_gaps", F.count(F.lit(1)).over(Window.partitionBy("_mv_source"))))
    # (The zeros of a stream without source positions are not one position.)
    only_pair = (F.col("_mv_movers") == 1) & (F.col("_mv_gaps") == 1) & F.col("_mv_from").rlike("[1-9a-f]")
    paired = gaps.join(movers, (F.col("_mv_from") == F.col("_mv_source")) & (F.col("_mv_key") != F.col("_key_json"))
                       & ((F.col("_mv_position") == F.col("_cdc_position")) | only_pair), "left")
    # (At most one delete pairs with a change: each change has its own full position, and `only_pair` means one.)
    filled = F.filter(F.array(*[F.when(missing[c] & F.col("_mv_values")[c].isNotNull(), F.lit(c)) for c in columns]),
                      lambda x: x.isNotNull())
    out = paired.withColumn("_filled", F.coalesce(filled, F.array().cast("array<string>")))
    out = out.withColumns({c: F.when(F.array_contains(F.col("_filled"), c), F.col("_mv_values")[c]["v"])
                           .otherwise(F.col(c)) for c in columns})
    out = out.withColumn("_unavailable", F.array_except(F.col("_unavailable"), F.col("_filled")))
    return classified.where(~gap).unionByName(out.select(*classified.columns))


def remembered_deletes(spark: SparkSession, tid: str, gaps: DataFrame, stored: DataFrame, key: Sequence[str],
                       columns: Sequence[str], *, soft: bool) -> DataFrame | None:
    """The deletes earlier batches applied at the source positions of ``gaps`` (inserts with unavailable columns),
    as :func:`fill_moved_rows` takes them, each with the values its row had: a soft-deleted row's own; for a hard
    delete (a tombstone), per column, those of the key's newest change before the delete that carried it, from the
    table's changelog (None without one).

    Only creates look for them (Debezium's second event of a key change): a partial update of a key the lake does
    not have (canal's NOBLOB image) is no key change, and canal's position (a second and a batch id) is shared by
    other rows."""
    at = (gaps.where(F.col("_cdc_op") == "c")
          .select(F.substring_index(F.col("_cdc_position"), "/", 1).alias("_mv_from")).distinct())
    types = {c: gaps.schema[c].dataType for c in columns}
    if soft:
        flagged = (stored.where(F.col(SOFT_DELETE_COLUMN) & (F.col("_cdc_op") == "d"))
                   .withColumn("_mv_from", F.substring_index(F.col("_cdc_position"), "/", 1))
                   .join(at, "_mv_from", "left_semi"))
        # (A null is no value the old row had: an unchanged TOAST value is never null, and the delete of a key the
        # lake did not have flagged a row of nulls.)
        return flagged.select("_mv_from", F.col("_cdc_position").alias("_mv_position"),
                              F.to_json(F.struct(*key)).alias("_mv_key"),
                              F.struct(*[F.when(F.col(c).isNotNull(), F.struct(F.col(c).alias("v"))).alias(c)
                                         for c in columns]).alias("_mv_values"))
    cid = changelog_table_id(tid)
    if not table_exists(spark, cid):
        return None
    deletes = (tombstones.of_table(spark, tid)
               .withColumn("_mv_from", F.substring_index(F.col("_tomb_position"), "/", 1))
               .join(at, "_mv_from", "left_semi")
               .join(stored.select(F.to_json(F.struct(*key)).alias("_key_json")), "_key_json", "left_anti"))
    changelog = spark.table(spark_table_name(cid))
    logged = set(changelog.columns)
    log_rows = (changelog.where(F.col("_cdc_op") != "d")
                .withColumn("_key_json", F.to_json(F.struct(*key)))
                .join(deletes, "_key_json")
                .where(F.col("_cdc_position") < F.col("_tomb_position")))
    # (A column this batch adds is not in the changelog yet: the old row had no value of it.)
    last = {c: F.max_by(F.struct(F.col(c).cast(types[c]).alias("v")), F.when(
        ~F.coalesce(F.array_contains(F.col("_cdc_unavailable"), c), F.lit(False)), F.col("_cdc_position")))
        if c in logged else F.lit(None).cast(StructType([StructField("v", types[c])])) for c in columns}
    values = log_rows.groupBy("_key_json").agg(*[v.alias(c) for c, v in last.items()])
    return (deletes.join(values, "_key_json", "left")
            .select("_mv_from", F.col("_tomb_position").alias("_mv_position"), F.col("_key_json").alias("_mv_key"),
                    F.struct(*[F.col(c) for c in columns]).alias("_mv_values")))


def _check_source(tid: str, properties: Mapping[str, str], source: str) -> None:
    """Refuse ``source``'s changes of a lake table that holds another source's (:data:`SOURCE_PROPERTY`).

    Raises:
        ConfigError: The table holds another source's changes.
    """
    holder = properties.get(SOURCE_PROPERTY)
    if holder is not None and holder != source:
        raise ConfigError(
            f"lake table {tid} holds the changes of source {holder}, and source {source} has changes of a table "
            f"with the same name: the two sources' positions cannot be compared, so they are not applied. Give "
            f"each source its own lake (--lake, CDCLAKE_LAKE), or leave the table out of one source "
            f"(tables.exclude); if {source} now feeds the table in {holder}'s place (the same database), set the "
            f"table property {SOURCE_PROPERTY}={source}")


def _ensure_table(spark: SparkSession, tid: str, columns: Sequence[StructField], key: Sequence[str],
                  options: ApplyOptions, source_table: str | None,
                  source: str | None = None) -> tuple[dict[str, DataType], bool, dict[str, str]]:
    """Create the table, or evolve it: add columns it lacks, widen types; return its user column types, whether
    it was created, and its properties. A table that does not record the source table it holds (made before cdclake
    recorded it) gets ``source_table``."""
    name = spark_table_name(tid)
    created = create_table(spark, tid, create_table_sql(name, columns, key, options, source_table, source))
    if created:
        if key:
            spark.sql(f"ALTER TABLE {name} WRITE ORDERED BY {', '.join(_q(k) for k in key)}")
        log.info("created table %s (key %s, %s deletes, %s, partitioned by %s)", tid, ",".join(key),
                 options.delete_mode, options.write_mode,
                 ", ".join(options.partition_for(key, _type_names(columns))) or "nothing")
        props = table_properties(spark, tid)
    else:
        props = table_properties(spark, tid)
        if source is not None:  # before the table is evolved for these changes
            _check_source(tid, props, source)
        created_soft = props.get(DELETE_MODE_PROPERTY) == "soft"
        if created_soft and not options.soft:
            raise ConfigError(f"table {tid} keeps soft-deleted rows (delete mode soft); switching it to hard deletes "
                              "would drop them silently: purge them yourself, then set the table property "
                              f"{DELETE_MODE_PROPERTY}=hard")
        wanted = dict(_write_properties(options), **({DELETE_MODE_PROPERTY: "soft"} if options.soft else {}))
        changed = {k: v for k, v in wanted.items() if props.get(k) != v}
        recorded = props.get(SOURCE_TABLE_PROPERTY)
        if source_table and qualifies_recorded(source_table, recorded) and recorded != source_table:
            changed[SOURCE_TABLE_PROPERTY] = source_table  # unrecorded, or recorded without its database (DRS)
        if changed:
            spark.sql(f"ALTER TABLE {name} SET TBLPROPERTIES ("
                      + ", ".join(f"'{k}'='{sql_literal(v)}'" for k, v in changed.items()) + ")")
            log.info("table %s: properties %s", tid, changed)
            props = {**props, **changed}
    existing = {f.name: f.dataType for f in table_schema(spark, tid).fields}
    for f in columns:
        if f.name not in existing:
            spark.sql(f"ALTER TABLE {name} ADD COLUMN {_q(f.name)} {f.dataType.simpleString()}")
            log.info("table %s: added column %s %s", tid, f.name, f.dataType.simpleString())
            existing[f.name] = f.dataType
        elif widening(existing[f.name], f.dataType):
            spark.sql(f"ALTER TABLE {name} ALTER COLUMN {_q(f.name)} TYPE {f.dataType.simpleString()}")
            log.info("table %s: widened column %s %s -> %s", tid, f.name, existing[f.name].simpleString(),
                     f.dataType.simpleString())
            existing[f.name] = f.dataType
    if options.soft and SOFT_DELETE_COLUMN not in existing:
        spark.sql(f"ALTER TABLE {name} ADD COLUMN {SOFT_DELETE_COLUMN} boolean")
    return {n: t for n, t in existing.items() if not n.startswith("_cdc_")}, created, props


def changelog_table_id(tid: str) -> str:
    """``namespace.table`` of a table's changelog: ``cdclake_changelog.<namespace>__<table>``."""
    namespace, table = split_table_id(tid)
    return f"{CHANGELOG_NAMESPACE}.{namespace}__{table}"


def _committed_batch(spark: SparkSession, tid: str, source: str, batch_id: str) -> bool:
    """Whether a table has a commit recorded for (source, batch)."""
    if not table_exists(spark, tid):
        return False
    return bool(spark.sql(
        f"SELECT 1 FROM {spark_table_name(tid)}.snapshots "
        f"WHERE summary['cdclake.batch-id'] = '{sql_literal(batch_id)}' "
        f"AND summary['cdclake.source'] = '{sql_literal(source)}' LIMIT 1").collect())


def _side_table(spark: SparkSession, side: str, columns: Sequence[StructField],
                bookkeeping: Sequence[tuple[str, str]], key: Sequence[str], layout: str) -> list[StructField]:
    """Create a table's changelog or history table if missing, or add the table's new columns to it and widen the
    columns the table widened.

    Args:
        side: ``namespace.table`` of the side table (its namespace is created when missing).
        columns: The table's columns.
        bookkeeping: The side table's own columns, ``(name, SQL type)``.
        key: The table's key (recorded as a property).
        layout: Extra DDL between ``USING iceberg`` and ``TBLPROPERTIES`` (e.g. ``PARTITIONED BY ..``).

    Returns:
        The side table's fields before new columns were added (after a column of another type was renamed aside).
    """
    name = spark_table_name(side)
    cols = [f"{_q(f.name)} {f.dataType.simpleString()}" for f in columns]
    cols += [f"{_q(n)} {t}" for n, t in bookkeeping]
    create_table(spark, side, f"CREATE TABLE IF NOT EXISTS {name} ({', '.join(cols)}) USING iceberg {layout} "
                 f"TBLPROPERTIES ('format-version'='2', 'write.merge.mode'='merge-on-read', "
                 f"'{KEY_COLUMNS_PROPERTY}'='{','.join(key)}')")
    present = {f.name: f.dataType for f in table_schema(spark, side).fields}
    for f in columns:
        if f.name in present and not fits(present[f.name], f.dataType) and not widening(present[f.name], f.dataType):
            # The table's column was dropped and added again with another type: the side table keeps the old
            # column's history under another name, and starts the new one.
            aside = next(n for n in (f"{f.name}__{i}" for i in range(1, 1000)) if n not in present)
            spark.sql(f"ALTER TABLE {name} RENAME COLUMN {_q(f.name)} TO {_q(aside)}")
            log.warning("%s: column %s is now %s in the table; its %s history is kept as %s", side, f.name,
                        f.dataType.simpleString(), present[f.name].simpleString(), aside)
            present[aside] = present.pop(f.name)
    existing = list(table_schema(spark, side).fields)
    for f in columns:
        if f.name not in present:
            spark.sql(f"ALTER TABLE {name} ADD COLUMN {_q(f.name)} {f.dataType.simpleString()}")
        elif widening(present[f.name], f.dataType):
            spark.sql(f"ALTER TABLE {name} ALTER COLUMN {_q(f.name)} TYPE {f.dataType.simpleString()}")
            log.info("%s: widened column %s %s -> %s", side, f.name, present[f.name].simpleString(),
                     f.dataType.simpleString())
    return existing


def changelog_actions(changes: DataFrame, key: Sequence[str]) -> DataFrame:
    """Each non-stale change's ``_action`` against its key's row just before it (pure).

    Classification judges every change against the table before the batch, which is what the MERGE of the key's
    newest change needs. In the changelog, a key's later change follows the key's change before it in the batch: a
    delete leaves no live row (the next change is an ``insert``, the next delete a ``noop``), anything else a live
    one (``update``, ``delete``). A key's first change keeps its classification.
    """
    before = F.lag("_cdc_op").over(Window.partitionBy(*key).orderBy("_cdc_position"))
    is_delete = F.col("_cdc_op") == "d"
    action = (F.when(before.isNull(), F.col("_action"))
              .when(before == "d", F.when(is_delete, "noop").otherwise("insert"))
              .otherwise(F.when(is_delete, "delete").otherwise("update")))
    return changes.withColumn("_action", action)


def _append_changelog(spark: SparkSession, tid: str, rows: DataFrame, columns: Sequence[StructField],
                      key: Sequence[str], *, source: str, batch_id: str, one_per_key: bool = False) -> None:
    """Append a batch's non-stale changes to the table's changelog (:func:`changelog_actions`; with
    ``one_per_key``, known to hold one change per key, their classification as it is), unless this batch already
    did."""
    cid = changelog_table_id(tid)
    name = spark_table_name(cid)
    if _committed_batch(spark, cid, source, batch_id):
        log.info("changelog %s already holds batch %s", cid, batch_id)
        return
    layout = list(columns)
    existing = _side_table(spark, cid, layout, [*BOOKKEEPING, ("_cdc_action", "string"),
                                                ("_cdc_unavailable", "array<string>")],
                           key, "PARTITIONED BY (days(_cdc_applied_at))")
    # Columns the table no longer has (a DDL drop or rename) stay in the changelog, with nulls from now on.
    written = {f.name for f in layout} | {n for n, _ in BOOKKEEPING} | {"_cdc_action", "_cdc_unavailable"}
    gone = [F.lit(None).cast(f.dataType).alias(f.name) for f in existing if f.name not in written]
    sequenced = rows if one_per_key else changelog_actions(rows, key)
    (sequenced.select(*[F.col(f.name) for f in layout], *[F.col(n) for n, _ in BOOKKEEPING],
                      F.col("_action").alias("_cdc_action"), F.col("_unavailable").alias("_cdc_unavailable"), *gone)
     .writeTo(name).append())


HISTORY_COLUMNS: tuple[tuple[str, str], ...] = (
    ("_cdc_valid_from", "string"),
    ("_cdc_valid_to", "string"),
    ("_cdc_valid_from_ts", "timestamp"),
    ("_cdc_valid_to_ts", "timestamp"),
    ("_cdc_current", "boolean"),
    ("_cdc_op", "string"),
    ("_cdc_batch_id", "string"),
)
"""Bookkeeping columns of a history table (positions are :mod:`cdclake.records` positions)."""


def history_table_id(tid: str) -> str:
    """``namespace.table`` of a table's SCD type 2 history: ``cdclake_history.<namespace>__<table>``."""
    namespace, table = split_table_id(tid)
    return f"{HISTORY_NAMESPACE}.{namespace}__{table}"


def history_changes(classified: DataFrame, stored: DataFrame, key: Sequence[str], value_columns: Sequence[str],
                    *, open_versions: DataFrame, cut: str | None,
                    cut_ts: dt.datetime | None = None) -> DataFrame:
    """The batch's history rows (pure): versions to insert, and one closer per key whose open version ends.

    Args:
        classified: The batch's classified changes (TOAST already filled within the batch).
        stored: The table before the batch (a column still unavailable keeps its stored value).
        key: Key columns.
        value_columns: The other columns.
        open_versions: The history's open versions (key columns, ``_cdc_valid_from``).
        cut: The batch's cut, if it removes rows: it closes the open versions older than it.
        cut_ts: The cut's source time (the truncate's, or the snapshot end's): the closed versions' end time.

    Returns:
        Rows with ``_kind`` (``version`` | ``close``), the key, values and history bookkeeping.
    """
    # A delete classified "noop" (no row before the batch) still ends a version opened earlier in the batch.
    applied = classified.where(F.col("_action") != "stale")
    w = Window.partitionBy(*key).orderBy("_cdc_position")
    prior = stored.select(*key, *[F.col(c).alias(f"_stored_{c}") for c in value_columns])
    values = [F.when(F.array_contains(F.col("_unavailable"), c), F.col(f"_stored_{c}")).otherwise(F.col(c)).alias(c)
              for c in value_columns]
    sequence = applied.join(prior, list(key), "left").select(
        *key, *values, "_cdc_position", "_cdc_source_ts", "_cdc_op", "_cdc_batch_id",
        F.lead("_cdc_position").over(w).alias("_next"), F.lead("_cdc_source_ts").over(w).alias("_next_ts"))
    versions = sequence.where(F.col("_cdc_op") != "d").select(
        F.lit("version").alias("_kind"), *key, *value_columns,
        F.col("_cdc_position").alias("_cdc_valid_from"), F.col("_next").alias("_cdc_valid_to"),
        F.col("_cdc_source_ts").alias("_cdc_valid_from_ts"), F.col("_next_ts").alias("_cdc_valid_to_ts"),
        F.col("_next").isNull().alias("_cdc_current"), "_cdc_op", "_cdc_batch_id")
    ends = sequence.select(*key, F.struct(F.col("_cdc_position").alias("at"),
                                          F.col("_cdc_source_ts").alias("ts")).alias("_end"))
    if cut is not None:
        ends = ends.unionByName(open_versions.where(F.col("_cdc_valid_from") < F.lit(cut)).select(
            *key, F.struct(F.lit(cut).alias("at"), F.lit(cut_ts).cast("timestamp").alias("ts")).alias("_end")))
    first_end = ends.groupBy(*key).agg(F.min("_end").alias("_end"))
    closers = first_end.select(
        F.lit("close").alias("_kind"), *key, *[F.lit(None).alias(c) for c in value_columns],
        F.lit(None).cast("string").alias("_cdc_valid_from"), F.col("_end.at").alias("_cdc_valid_to"),
        F.lit(None).cast("timestamp").alias("_cdc_valid_from_ts"), F.col("_end.ts").alias("_cdc_valid_to_ts"),
        F.lit(False).alias("_cdc_current"), F.lit(None).cast("string").alias("_cdc_op"),
        F.lit(None).cast("string").alias("_cdc_batch_id"))
    return versions.unionByName(closers, allowMissingColumns=True)


def _merge_history(spark: SparkSession, tid: str, classified: DataFrame, columns: Sequence[StructField],
                   key: Sequence[str], value_columns: Sequence[str], *, cut: str | None,
                   cut_ts: dt.datetime | None, source: str, batch_id: str) -> None:
    """Close and open the batch's versions in the table's history, in one MERGE, unless this batch already did."""
    hid = history_table_id(tid)
    name = spark_table_name(hid)
    if _committed_batch(spark, hid, source, batch_id):
        log.info("history %s already holds batch %s", hid, batch_id)
        return
    _side_table(spark, hid, columns, HISTORY_COLUMNS, key, "")
    _seed_history(spark, tid, hid, columns)
    history = spark.table(name)
    rows = history_changes(classified, spark.table(spark_table_name(tid)), key, value_columns,
                           open_versions=history.where(F.col("_cdc_valid_to").isNull()), cut=cut, cut_ts=cut_ts)
    view = f"cdclake_hist_{abs(hash((tid, id(rows))))}"
    rows.createOrReplaceTempView(view)
    inserted = [*[f.name for f in columns], *(n for n, _ in HISTORY_COLUMNS)]
    on = " AND ".join(f"t.{_q(k)} = s.{_q(k)}" for k in key)
    try:
        spark.sql(
            f"MERGE INTO {name} t USING {view} s ON {on} AND t._cdc_valid_to IS NULL AND s._kind = 'close' "
            "WHEN MATCHED THEN UPDATE SET t._cdc_valid_to = s._cdc_valid_to, "
            "t._cdc_valid_to_ts = s._cdc_valid_to_ts, t._cdc_current = false "
            f"WHEN NOT MATCHED AND s._kind = 'version' THEN INSERT ({', '.join(_q(c) for c in inserted)}) "
            f"VALUES ({', '.join('s.' + _q(c) for c in inserted)})")
    finally:
        spark.catalog.dropTempView(view)


def _seed_history(spark: SparkSession, tid: str, hid: str, columns: Sequence[StructField]) -> None:
    """A history that never had a commit, of a table that has rows (``history`` turned on later): the rows become
    its open versions, from the change that produced each (soft-deleted rows have none). One commit, so a re-run
    after a crash either finds it or seeds again."""
    name = spark_table_name(hid)
    if spark.sql(f"SELECT 1 FROM {name}.snapshots LIMIT 1").collect():
        return
    stored = spark.table(spark_table_name(tid))
    if SOFT_DELETE_COLUMN in stored.columns:
        stored = stored.where(~F.coalesce(F.col(SOFT_DELETE_COLUMN), F.lit(False)))
    if _is_empty(stored):
        return
    versions = stored.select(
        *[F.col(f.name) for f in columns], F.col("_cdc_position").alias("_cdc_valid_from"),
        F.lit(None).cast("string").alias("_cdc_valid_to"), F.col("_cdc_source_ts").alias("_cdc_valid_from_ts"),
        F.lit(None).cast("timestamp").alias("_cdc_valid_to_ts"), F.lit(True).alias("_cdc_current"),
        "_cdc_op", "_cdc_batch_id")
    existing = {f.name for f in spark.table(name).schema.fields}
    versions.select(*[c for c in versions.columns if c in existing]).writeTo(name).append()
    log.info("history %s: seeded with the current rows of %s (history turned on for a table with rows)", hid, tid)


def apply_table(spark: SparkSession, changes: DataFrame, *, tid: str, key: Sequence[str],
                options: ApplyOptions = ApplyOptions(), source: str | None = None,
                batch_id: str | None = None, defaults: Sequence[Mapping[str, str]] = (),
                source_table: str | None = None, connect_types: Mapping[str, Any] | None = None,
                snapshot_ends: Sequence[str] = ()) -> TableCounts:
    """Apply one table's canonical records of one batch; see the module docstring.

    Args:
        spark: The session.
        changes: Canonical change records of the table.
        tid: ``namespace.table``.
        key: Primary-key columns.
        options: Delete mode, write mode, partitioning, reconciliation, changelog.
        source: Source name (commit bookkeeping); default: the records' ``source``.
        batch_id: Batch id (commit bookkeeping); default: the records' ``batch_id``.
        defaults: Columns an ``ALTER TABLE .. ADD .. DEFAULT`` of the batch added (``column``, ``value`` text,
            ``type``, ``before``: the statement's position): rows written before it get the value where the column
            is null, as the source filled its existing rows.
        source_table: The source table the records are changes of, as its stream spells it (normalize's staging
            entry ``source_table``): recorded on the table (:data:`~cdclake.catalog.SOURCE_TABLE_PROPERTY`).
        connect_types: Column -> the Connect field schema the batch's messages write it in (normalize's staging
            entry): recorded on the table (:data:`~cdclake.catalog.CONNECT_TYPES_PROPERTY`).
        snapshot_ends: Source positions where the batch (any of its tables) ends a Debezium snapshot (``last``):
            the table's snapshot reads at such a position end its snapshot too (Debezium 1.x marks only the
            snapshot's last record ``last``, and the snapshot's reads of every table share its position).

    Returns:
        What the batch did to the table.

    Raises:
        TableLockTimeout: Another apply or maintenance run of the table held its lock too long (``cdclake.locks``).
    """
    with table_lock(spark, tid, f"apply of batch {batch_id}" if batch_id else "apply"):
        return _apply_table(spark, changes, tid=tid, key=key, options=options, source=source, batch_id=batch_id,
                            defaults=defaults, source_table=source_table, connect_types=connect_types or {},
                            snapshot_ends=snapshot_ends)


def _apply_table(spark: SparkSession, changes: DataFrame, *, tid: str, key: Sequence[str], options: ApplyOptions,
                 source: str | None, batch_id: str | None, defaults: Sequence[Mapping[str, str]],
                 source_table: str | None, connect_types: Mapping[str, Any],
                 snapshot_ends: Sequence[str] = ()) -> TableCounts:
    name = spark_table_name(tid)
    after_type = changes.schema["after"].dataType
    assert isinstance(after_type, StructType)
    exposed = document_field_columns(options)
    if exposed and docpatch.PATCH_COLUMN not in after_type.fieldNames():
        log.warning("table %s: document_fields %s ignored: the table has no %s column (only MongoDB collections "
                    "have one)", tid, ", ".join(f.name for f in exposed), docpatch.PATCH_COLUMN)
        exposed = []
    types, created, properties = _ensure_table(spark, tid, [*after_type.fields, *exposed], key, options,
                                               source_table, source)
    columns = [StructField(n, t) for n, t in types.items()]
    value_columns = [f.name for f in columns if f.name not in key]
    tombstones.ensure_table(spark)

    has_patch = F.col("patch").isNotNull() if "patch" in changes.columns else F.lit(False)
    ends_snapshot = F.col("snapshot").isin(*SNAPSHOT_END_MARKERS)
    if snapshot_ends:  # a snapshot read at a position where the batch ends a (Debezium 1.x) snapshot
        ends_snapshot = ends_snapshot | (F.col("snapshot").isin(*SNAPSHOT_READ_MARKERS) & F.substring_index(
            "position", "/", 1).isin(*snapshot_ends))
    if not options.reconcile_snapshots:
        ends_snapshot = F.lit(False)
    reads = F.col("snapshot").isin(*SNAPSHOT_READ_MARKERS)
    full_sync = (F.col("snapshot") == FULL_SYNC_MARKER) if options.reconcile_snapshots else F.lit(False)
    # A new table's first batch is likely a bulk load, which needs to know whether every key has one change: the
    # stats pass counts the distinct keys too (one job, where a separate check reads the batch again).
    changed = F.col("op") != "t"
    distinct_keys = [F.count_if(changed).alias("changes"),
                     F.count_distinct(F.when(changed, F.struct(*[F.col("key")[k] for k in key]))).alias("keys")]
    stats = changes.agg(
        F.max(F.when(F.col("op") == "t", F.col("position"))).alias("truncate"),
        F.max_by("source_ts", F.when(F.col("op") == "t", F.col("position"))).alias("truncate_ts"),
        F.max(F.when(ends_snapshot, F.concat(F.substring_index("position", "/", 1), F.lit("/")))).alias("snapshot"),
        F.max_by("source_ts", F.when(ends_snapshot, F.col("position"))).alias("snapshot_ts"),
        F.max(F.when(reads, F.substring_index("position", "/", 1))).alias("snapshot_read"),
        F.min(F.when(full_sync, F.col("position"))).alias("full_sync_first"),
        F.max(F.when(full_sync, F.col("position"))).alias("full_sync_last"),
        F.max_by("source_ts", F.when(full_sync, F.col("position"))).alias("full_sync_last_ts"),
        F.max(F.when(F.col("snapshot").isNull(), F.col("position"))).alias("streamed_last"),
        F.count_if(has_patch).alias("patches"),
        F.count_if(F.col("op") == "d").alias("deletes"),
        F.count_if(F.size(F.coalesce("unavailable", F.array())) > 0).alias("partial"),
        F.max("position").alias("max_position"),
        F.first("source", ignorenulls=True).alias("source"),
        F.first("batch_id", ignorenulls=True).alias("batch_id"),
        *(distinct_keys if created and key else []),
    ).first()
    source = source or stats["source"] or "default"
    batch_id = batch_id or stats["batch_id"] or "unknown"
    _check_source(tid, properties, source)
    if SOURCE_PROPERTY not in properties:  # a new table, or one made before cdclake recorded its source
        spark.sql(f"ALTER TABLE {name} SET TBLPROPERTIES ('{SOURCE_PROPERTY}'='{sql_literal(source)}')")
    _record_connect_types(spark, tid, properties, {c: spec for c, spec in connect_types.items() if c in types})
    full_sync_before = properties.get(FULL_SYNC_PROPERTY, "") if options.reconcile_snapshots else ""
    full_sync_cut, full_sync_after = _full_sync(full_sync_before, stats)
    if full_sync_after and full_sync_after != full_sync_before:
        # Recorded before the table changes: a re-run after a crash finds it (or records it again).
        _set_full_sync(spark, tid, full_sync_after)
    open_before = properties.get(open_snapshots.PROPERTY, "") if options.reconcile_snapshots else ""
    # A snapshot that read the table in earlier batches and ends in this one (Debezium 1.x): cut below its rows.
    open_cut = f"{open_before}/" if open_before and open_before in snapshot_ends else None
    if stats["snapshot"] is not None or open_cut or not options.reconcile_snapshots:
        open_after = ""  # ended here (or not tracked)
    elif created:  # a new table holds no row older than the snapshot: nothing to reconcile
        open_after = open_before
    else:
        open_after = stats["snapshot_read"] or open_before
    if open_after and open_after != open_before:  # recorded before the table changes, as a full sync is
        open_snapshots.record(spark, source, tid, open_after)
        _set_property(spark, tid, open_snapshots.PROPERTY, open_after)
    cut, cut_ts = max(((p, ts) for p, ts in ((stats["truncate"], stats["truncate_ts"]),
                                              (stats["snapshot"], stats["snapshot_ts"]),
                                              (open_cut, None), full_sync_cut) if p is not None),
                      default=(None, None), key=lambda pair: pair[0])
    props = {"cdclake.source": source, "cdclake.batch-id": batch_id,
             "cdclake.max-position": stats["max_position"] or ""}

    flat = flatten(changes.where(F.col("op") != "t"), key, [f for f in columns if f.name in value_columns])
    if stats["patches"]:
        flat = fold_patches(flat, spark.table(name), key).withColumn(SOFT_DELETE_COLUMN, F.col("_cdc_op") == "d")
    if exposed:
        with commit_properties(spark, props):
            _fill_document_fields(spark, tid, exposed)
        flat = flat.withColumns({f.name: document_field_value(f) for f in exposed})
        bad = flat.agg(*[_uncastable(f).alias(f.name) for f in exposed]).first()
        for f in exposed:
            if bad[f.name]:
                log.warning("table %s: %d change(s) have a %s field that does not cast to %s: the column is null "
                            "there (the document keeps the value)", tid, bad[f.name], f.name,
                            f.dataType.simpleString())
    new_fills = [dict(d) for d in defaults if d["column"] in types]
    all_fills = [*recorded_fills(properties), *new_fills]
    if new_fills:
        with commit_properties(spark, props):
            _fill_defaults(spark, tid, new_fills)
        _record_fills(spark, tid, all_fills)
    # Per column, the newest statement's fill (a column dropped since forgot the older ones: forget_column).
    newest: dict[str, Mapping[str, str]] = {}
    for fill in all_fills:
        if fill["column"] in types and fill["before"] >= newest.get(fill["column"], {}).get("before", ""):
            newest[fill["column"]] = fill
    fills = list(newest.values())
    if fills:
        flat = flat.withColumns({d["column"]: F.when(
            F.col(d["column"]).isNull() & (F.col("_cdc_position") < F.lit(d["before"])) & (F.col("_cdc_op") != "d"),
            F.lit(d["value"]).cast(d["type"])).otherwise(F.col(d["column"])) for d in fills})
    flat = flat.withColumn("_key_json", F.to_json(F.struct(*key)))

    def attempt() -> TableCounts:
        with commit_properties(spark, props):
            counts = _apply_classified(spark, flat, tid=tid, name=name, key=key, columns=columns,
                                       value_columns=value_columns, options=options, cut=cut,
                                       partial=bool(stats["partial"]), source=source, batch_id=batch_id,
                                       truncated_at=stats["truncate"], cut_ts=cut_ts,
                                       upserts_only=not (stats["deletes"] or stats["patches"]),
                                       one_per_key=created and bool(key) and stats["changes"] == stats["keys"])
        if full_sync_before and not full_sync_after:
            _set_full_sync(spark, tid, "")
        if open_before and not open_after:
            _set_property(spark, tid, open_snapshots.PROPERTY, "")
        return counts

    return retry_conflicts(attempt, what=f"table {tid}", attempts=COMMIT_ATTEMPTS, again="re-classifying")


def _full_sync(recorded: str, stats: Row) -> tuple[tuple[str | None, dt.datetime | None], str]:
    """A table's open full sync (DRS ``INIT`` rows) after this batch: ``(cut, its time)`` when the batch completes
    it, and the JSON to record (empty when none stays open).

    A full sync spans its first to its last row, over batches; a streamed change positioned after its last row
    completes it. The cut is just below its first row (``<source position>/``), as a Debezium snapshot's end is.
    """
    state = json.loads(recorded) if recorded else {}
    first, last, last_ts = state.get("first"), state.get("last"), state.get("last_ts")
    if stats["full_sync_first"] is not None:
        first = min(p for p in (first, stats["full_sync_first"]) if p is not None)
        if last is None or stats["full_sync_last"] > last:
            last = stats["full_sync_last"]
            last_ts = stats["full_sync_last_ts"].isoformat() if stats["full_sync_last_ts"] else None
    if first is None:
        return (None, None), ""
    if stats["streamed_last"] is not None and stats["streamed_last"] > last:
        return (first.split("/", 1)[0] + "/", dt.datetime.fromisoformat(last_ts) if last_ts else None), ""
    return (None, None), json.dumps({"first": first, "last": last, "last_ts": last_ts}, sort_keys=True)


def _set_full_sync(spark: SparkSession, tid: str, value: str) -> None:
    _set_property(spark, tid, FULL_SYNC_PROPERTY, value)
    log.info("table %s: %s", tid, f"full sync open: {value}" if value else "full sync complete")


def _apply_classified(spark: SparkSession, flat: DataFrame, *, tid: str, name: str, key: Sequence[str],
                      columns: Sequence[StructField], value_columns: Sequence[str], options: ApplyOptions,
                      cut: str | None, partial: bool, source: str, batch_id: str,
                      truncated_at: str | None, cut_ts: dt.datetime | None = None,
                      upserts_only: bool = False, one_per_key: bool = False) -> TableCounts:
    """Classify against the table as it is now, then changelog, cut, MERGE and tombstones (one attempt).
    ``one_per_key``: no key has more than one change in the batch (false: not known)."""
    soft = options.soft
    live = ~F.coalesce(F.col(SOFT_DELETE_COLUMN), F.lit(False)) if soft else F.lit(True)
    previous = tombstones.watermark(spark, tid)
    if (upserts_only and previous is None and not partial and not options.history
            and _is_empty(spark.table(name)) and _is_empty(tombstones.of_table(spark, tid))):
        return _bulk_load(spark, flat, tid=tid, name=name, key=key, columns=columns, value_columns=value_columns,
                          options=options, source=source, batch_id=batch_id, cut=cut, one_per_key=one_per_key)
    watermark = max((p for p in (previous, cut) if p is not None), default=None)
    stored = spark.table(name)
    if cut is not None:
        stored = stored.where(F.col("_cdc_position") >= F.lit(cut))
    classified = classify(flat, stored, tombstones.of_table(spark, tid), key, watermark=watermark, soft=soft,
                          value_columns=value_columns)
    if partial and value_columns:
        classified = fill_unavailable(classified, key, value_columns)
    # Materialized now: the steps below change the table the classification read.
    classified = classified.localCheckpoint(eager=True)
    gaps = classified.where((F.col("_action") == "insert") & (F.size("_unavailable") > 0))
    if partial and value_columns and not _is_empty(gaps):  # rare: a key change with a gap
        earlier = remembered_deletes(spark, tid, gaps, stored, key, value_columns, soft=soft) \
            if options.changelog or soft else None
        moved = fill_unavailable(fill_moved_rows(classified, stored, key, value_columns, earlier), key,
                                 value_columns)
        moved = moved.localCheckpoint(eager=True)
        classified.unpersist()
        classified = moved
    if not _is_empty(classified.where(F.col("_maybe_again"))):  # rare: a batch with copies delivered again
        # (A copy has no unavailable column, and its values are the stored row's: filling from it or from the
        # stored row is the same.)
        checked = settle_redelivered(classified, stored, key, value_columns).localCheckpoint(eager=True)
        classified.unpersist()
        classified = checked
    try:
        if options.changelog:
            _append_changelog(spark, tid, classified.where(F.col("_action") != "stale"), columns, key,
                              source=source, batch_id=batch_id)
            faults.point("apply:after-changelog")
        if options.history:
            cuts = cut if cut is not None and (previous is None or cut > previous) else None
            _merge_history(spark, tid, classified, columns, key, value_columns, cut=cuts, cut_ts=cut_ts,
                           source=source, batch_id=batch_id)
            faults.point("apply:after-history")
        winners = latest_per_key(carry_into_soft_deletes(classified, key, value_columns) if soft else classified, key)
        cut_rows = resent = gone_again = 0
        if cut is not None and (previous is None or cut > previous):
            doomed = spark.table(name).where((F.col("_cdc_position") < F.lit(cut)) & live)
            cut_rows = doomed.count()
            if cut != truncated_at:
                # A completed snapshot replaces the rows it read again: they count as updated, not as removed by
                # the reconciliation and inserted by the snapshot.
                resent = doomed.join(winners.where(F.col("_action") == "insert").select(*key), list(key),
                                     "left_semi").count()
                # A row the snapshot read again and the stream then deleted: deleted, not removed by the cut.
                gone_again = doomed.join(winners.where((F.col("_cdc_op") == "d") & (F.col("_action") == "noop"))
                                         .select(*key), list(key), "left_semi").count()
            if soft:
                spark.sql(f"UPDATE {name} SET {SOFT_DELETE_COLUMN} = true, _cdc_op = 't', "
                          f"_cdc_position = '{sql_literal(cut)}', _cdc_batch_id = '{sql_literal(batch_id)}', "
                          f"_cdc_applied_at = current_timestamp() "
                          f"WHERE _cdc_position < '{sql_literal(cut)}' AND NOT coalesce({SOFT_DELETE_COLUMN}, false)")
            else:
                spark.sql(f"DELETE FROM {name} WHERE _cdc_position < '{sql_literal(cut)}'")
            tombstones.record_truncate(spark, tid, cut)
            log.info("table %s: %s at %s removed %d rows (%d of them read again by the snapshot)", tid,
                     "truncate" if cut == truncated_at else "snapshot reconciliation", cut, cut_rows, resent)
            faults.point("apply:after-cut")
        gap = (F.size("_unavailable") > 0) if partial else F.lit(False)
        by_action = winners.groupBy("_action", gap.alias("_gap")).count().collect()
        counts: dict[str, int] = defaultdict(int)
        for r in by_action:
            counts[r["_action"]] += r["count"]
        unknown = sum(r["count"] for r in by_action if r["_gap"] and r["_action"] == "insert")
        if unknown:
            log.warning("table %s: %d inserted row(s) lack a value the change did not carry (an unchanged TOAST "
                        "column of a row the lake does not have, e.g. from before the snapshot): stored as null",
                        tid, unknown)
        inserted, updated, deleted = counts.get("insert", 0), counts.get("update", 0), counts.get("delete", 0)
        noop = counts.get("noop", 0)
        stored_rows = spark.table(name).agg(F.count(F.lit(1)).alias("all"), F.count_if(live).alias("live")).first()
        rows_before = stored_rows["live"]
        acting = ("insert", "update", "delete", "noop") if soft else ("insert", "update", "delete")
        keep = [*key, *value_columns, *(n for n, _ in _bookkeeping(soft))]
        if inserted + updated + deleted + (noop if soft else 0):
            if stored_rows["all"] == 0 and not (updated or deleted):
                winners.where(F.col("_action").isin("insert", "noop" if soft else "insert")).select(*keep) \
                    .writeTo(name).append()
            else:
                view = f"cdclake_src_{abs(hash((tid, id(classified))))}"
                winners.where(F.col("_action").isin(*acting)).createOrReplaceTempView(view)
                try:
                    spark.sql(merge_sql(name, view, key=key, columns=value_columns, soft=soft))
                finally:
                    spark.catalog.dropTempView(view)
            faults.point("apply:after-merge")
        if not soft and (deleted or noop):
            tombstones.record_deletes(spark, tid, winners.where(
                (F.col("_cdc_op") == "d") & F.col("_action").isin("delete", "noop")))
        faults.point("apply:after-tombstones")
        result = TableCounts(
            inserted=inserted - resent, updated=updated + resent, deleted=deleted + gone_again,
            skipped_stale=classified.where(F.col("_action") == "stale").count(),
            rows_before=rows_before + resent + gone_again, rows_after=rows_before + inserted - deleted,
            truncated=cut_rows - resent - gone_again, unknown_values=unknown,
        )
        log.info("applied to %s: %s", tid, result.to_dict())
        if result.skipped_stale:
            _warn_positions_went_back(spark, tid, name, classified, key)
        return result
    finally:
        classified.unpersist()


REUSED_POSITION_SLACK_SECONDS = 60
"""A stale change this much newer by source time than its row hints that the source's positions went back."""


def _warn_positions_went_back(spark: SparkSession, tid: str, name: str, classified: DataFrame,
                              key: Sequence[str]) -> None:
    """Log the stale changes (not snapshot reads, whose time is the read's) whose source time is newer than their
    row's by over :data:`REUSED_POSITION_SLACK_SECONDS`: a copy delivered again or an old batch replayed has the
    time of the change it repeats, so these are more likely a source whose positions went backwards."""
    stored = spark.table(name).select(*key, F.col("_cdc_source_ts").alias("_stored_ts"))
    late = (classified.where((F.col("_action") == "stale") & (F.col("_cdc_op") != "r"))
            .join(stored, list(key))
            .where(F.col("_cdc_source_ts") > F.col("_stored_ts")
                   + F.expr(f"INTERVAL {REUSED_POSITION_SLACK_SECONDS} SECONDS")))
    found = late.agg(F.count(F.lit(1)).alias("n"), F.min_by("_cdc_position", "_cdc_position").alias("position"),
                     F.min_by("_cdc_source_ts", "_cdc_position").alias("ts")).first()
    if found["n"]:
        log.warning(
            "table %s: %d change(s) skipped as stale (their position is not newer than their row's) have a source "
            "time over %d s newer than that row's (e.g. position %s at %s): the source's positions may have gone "
            "back (a re-created database server or replication slot, a failover to another server, a reset "
            "binlog). If these changes are real, load the table from a new snapshot into a new lake (README, "
            "known limitations)", tid, found["n"], REUSED_POSITION_SLACK_SECONDS, found["position"], found["ts"])


def _is_empty(frame: DataFrame) -> bool:
    return not frame.limit(1).count()


def _one_change_per_key(flat: DataFrame, key: Sequence[str]) -> bool:
    """Whether no key has more than one change in the batch."""
    return _is_empty(flat.groupBy(*key).count().where(F.col("count") > 1))


def _bulk_load(spark: SparkSession, flat: DataFrame, *, tid: str, name: str, key: Sequence[str],
               columns: Sequence[StructField], value_columns: Sequence[str], options: ApplyOptions, source: str,
               batch_id: str, cut: str | None, one_per_key: bool = False) -> TableCounts:
    """Inserts and updates into an empty table that never had rows deleted or cut: every change classifies as an
    insert, so the newest change per key is appended as it is (no classification, no MERGE). A cut in the batch (a
    snapshot's end, a truncate) makes the changes at or below it stale and becomes the table's watermark.

    A re-run after a crash finds the table non-empty (or still empty) and takes the regular path (or this one):
    the same rows either way.
    """
    stale = 0
    if cut is not None:
        older = F.col("_cdc_position") <= F.lit(cut)
        stale = flat.where(older).count()
        flat = flat.where(~older)
    # A snapshot holds one change per key: finding that out (in the stats pass, for a new table) shuffles only the
    # key columns, where the newest-change window and the changelog's sequencing shuffle and sort whole rows (the
    # window twice: the write's range partitioning samples its output).
    one_per_key = one_per_key or _one_change_per_key(flat, key)
    classified = flat.withColumn("_action", F.lit("insert"))
    marked = None
    if not one_per_key:  # copies delivered again within the batch are stale (classify)
        marked = _mark_redelivered_in_batch(flat.withColumn("_content", _sent_content(value_columns)), key)
        marked = (marked.withColumn("_action", F.when(F.col("_again"), "stale").otherwise("insert"))
                  .drop("_content", "_again").localCheckpoint(eager=True))
        stale += marked.where(F.col("_action") == "stale").count()
        classified = marked.where(F.col("_action") != "stale")
    try:
        if options.changelog:
            _append_changelog(spark, tid, classified, columns, key, source=source, batch_id=batch_id,
                              one_per_key=one_per_key)
            faults.point("apply:after-changelog")
        keep = [*key, *value_columns, *(n for n, _ in _bookkeeping(options.soft))]
        newest = classified if one_per_key else latest_per_key(classified, key)
        newest.select(*keep).writeTo(name).append()
        faults.point("apply:after-merge")
    finally:
        if marked is not None:
            marked.unpersist()
    if cut is not None:
        tombstones.record_truncate(spark, tid, cut)
    faults.point("apply:after-tombstones")
    inserted = spark.table(name).count()
    result = TableCounts(inserted=inserted, updated=0, deleted=0, skipped_stale=stale, rows_before=0,
                         rows_after=inserted, truncated=0)
    log.info("applied to %s (bulk load into an empty table): %s", tid, result.to_dict())
    return result
