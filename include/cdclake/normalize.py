"""Normalize: a landed batch -> canonical change records per table (staged Parquet) + quarantine.

Steps (one SparkSession, JVM expressions only):

1. Read the batch's raw records with an explicit schema; the format module parses them into parsed records
   (:data:`cdclake.formats.PARSED_COLUMNS`) with an ``ok`` / ``skip`` / ``quarantine`` status.
2. One aggregation brings each table's distinct schemas and a sample key to the driver; the table's columns come
   from the message schema, else from the existing Iceberg table, else from JSON inference over its images. Its
   key comes from the message key, else a declared key (:class:`cdclake.keys.KeySpec`), else the existing table.
3. Each table's records are typed (:func:`canonical_records`) and written to
   ``<lake>/staging/<source>/<batch id>/<table id>/``; a table without a key, a change without key values, or a
   schema cdclake cannot map goes to quarantine with the reason.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    DoubleType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from cdclake import quarantine
from cdclake.catalog import BOOKKEEPING_PREFIX, key_columns_of, table_exists, table_schema
from cdclake.exceptions import SchemaError
from cdclake.formats import Normalizer, get_normalizer
from cdclake.formats.connect import UNAVAILABLE_VALUE, ColumnType, cast_converter
from cdclake.formats.debezium import parse_json_schema
from cdclake.keys import KeySpec
from cdclake.landing import batch_raw_paths
from cdclake.records import position
from cdclake.settings import LakeSettings

if TYPE_CHECKING:
    from cdclake.pipeline import NormalizeResult

log = logging.getLogger(__name__)

RAW_SCHEMA = StructType([
    StructField("input", StringType()),
    StructField("file_index", IntegerType()),
    StructField("index", LongType()),
    StructField("line", LongType()),
    StructField("byte_offset", LongType()),
    StructField("framing", StringType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", LongType()),
    StructField("headers", MapType(StringType(), StringType())),
    StructField("key", StringType()),
    StructField("value", StringType()),
    StructField("error", StringType()),
])
"""Explicit schema of raw records (:data:`cdclake.landing.RAW_FIELDS`)."""

_PLACEHOLDERS = (UNAVAILABLE_VALUE, "X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ==", f'["{UNAVAILABLE_VALUE}"]')
"""The unavailable-value placeholder as text, as base64 (bytes columns) and as a one-element array."""

STAGING_MARKER = "_normalized.json"


@dataclass(frozen=True)
class TableTyping:
    """How one table's images are typed: its columns and its key columns."""

    columns: tuple[ColumnType, ...]
    key: tuple[str, ...]


def staging_dir(settings: LakeSettings, source: str, batch_id: str) -> Path:
    """Where a batch's canonical records are staged."""
    return settings.staging_root / source / batch_id


def canonical_records(parsed: DataFrame, typing: TableTyping, *, batch_id: str, source: str, fmt: str) -> DataFrame:
    """Type one table's parsed records into canonical change records (pure; see :mod:`cdclake.records`).

    Args:
        parsed: Parsed records of one table with status ``ok``.
        typing: The table's columns and key.
        batch_id: Batch id (provenance and position tail).
        source: Source name.
        fmt: Format name.

    Returns:
        Canonical records, plus a boolean ``_key_ok`` (false when a key column has no value).
    """
    as_text = StructType([StructField(c.name, StringType()) for c in typing.columns])
    by_name = {c.name: c for c in typing.columns}
    after_raw = F.from_json(F.col("after_text"), as_text)
    before_raw = F.from_json(F.col("before_text"), as_text)

    def image(raw: Column, text: Column) -> Column:
        values = [
            c.convert(F.when(raw[c.name].isin(*_PLACEHOLDERS), F.lit(None)).otherwise(raw[c.name])).alias(c.name)
            for c in typing.columns
        ]
        return F.when(text.isNull(), F.lit(None)).otherwise(F.struct(*values))

    key_raw = F.from_json(F.col("key_text"), StructType([StructField(k, StringType()) for k in typing.key]))
    key_values = [
        by_name[k].convert(F.coalesce(key_raw[k], after_raw[k], before_raw[k])).alias(k) for k in typing.key
    ]
    key_struct = F.struct(*key_values) if key_values else F.lit(None)
    key_ok = F.lit(True)
    for k in typing.key:
        key_ok = key_ok & F.coalesce(key_raw[k], after_raw[k], before_raw[k]).isNotNull()
    unavailable = F.filter(
        F.array(*[F.when(after_raw[c.name].isin(*_PLACEHOLDERS), F.lit(c.name)) for c in typing.columns]),
        lambda x: x.isNotNull(),
    ) if typing.columns else F.array().cast(ArrayType(StringType()))
    return parsed.select(
        F.col("op"),
        F.col("table_id"),
        key_struct.alias("key"),
        image(before_raw, F.col("before_text")).alias("before"),
        image(after_raw, F.col("after_text")).alias("after"),
        position(F.col("source_pos"), F.lit(batch_id), F.col("file_index"), F.col("index"), F.col("row_index"))
        .alias("position"),
        F.col("source_ts"),
        F.col("snapshot"),
        F.lit(batch_id).alias("batch_id"),
        F.lit(source).alias("source"),
        F.lit(fmt).alias("format"),
        F.col("input").alias("input_file"),
        F.col("line").alias("raw_line"),
        F.coalesce(F.col("offset"), F.col("byte_offset")).alias("raw_offset"),
        unavailable.alias("unavailable"),
        ((F.col("op") == "t") | key_ok).alias("_key_ok"),
        *[F.col(c) for c in parsed.columns if c.startswith("_q_")],
    )


def _merge_columns(variants: list[list[ColumnType]]) -> tuple[ColumnType, ...]:
    merged: dict[str, ColumnType] = {}
    for columns in variants:
        for column in columns:
            merged[column.name] = column
    return tuple(merged.values())


def _infer_columns(spark: SparkSession, texts: DataFrame, sample: str | None) -> list[ColumnType]:
    """Column types of payload-only images by Spark's JSON inference (JVM), in the sample image's column order."""
    encoder = spark._jvm.org.apache.spark.sql.Encoders.STRING()  # type: ignore[union-attr]
    strings = getattr(texts._jdf, "as")(encoder)  # Dataset[String]; `as` is a Python keyword
    jschema = spark._jsparkSession.read().json(strings).schema().json()
    inferred = {f.name: f.dataType for f in StructType.fromJson(json.loads(jschema)).fields}
    order = list(json.loads(sample)) if sample else list(inferred)
    order += [n for n in inferred if n not in order]
    columns = []
    for name in order:
        data_type = inferred.get(name, StringType())
        if not isinstance(data_type, (LongType, DoubleType, StringType)) and data_type.typeName() != "boolean":
            data_type = StringType()  # nested values and all-null columns are kept as JSON text
        columns.append(ColumnType(name, data_type, cast_converter(data_type)))
    return columns


def _existing_columns(spark: SparkSession, tid: str) -> list[ColumnType]:
    return [
        ColumnType(f.name, f.dataType, cast_converter(f.dataType))
        for f in table_schema(spark, tid).fields
        if not f.name.startswith(BOOKKEEPING_PREFIX)
    ]


def _resolve_tables(spark: SparkSession, parsed: DataFrame, normalizer: Normalizer,
                    keys: KeySpec) -> tuple[dict[str, TableTyping], dict[str, str]]:
    """Work out every table's typing; tables that cannot be typed get a quarantine reason instead."""
    rows = (
        parsed.where(F.col("status") == "ok")
        .groupBy("table_id", F.xxhash64("row_schema").alias("h1"), F.xxhash64("key_schema").alias("h2"))
        .agg(
            F.first("row_schema", ignorenulls=True).alias("row_schema"),
            F.first("key_schema", ignorenulls=True).alias("key_schema"),
            F.first("key_text", ignorenulls=True).alias("key_text"),
            F.first(F.coalesce("after_text", "before_text"), ignorenulls=True).alias("sample"),
        )
        .collect()
    )
    by_table: dict[str, list[Any]] = defaultdict(list)
    for row in rows:
        by_table[row["table_id"]].append(row)
    typings: dict[str, TableTyping] = {}
    problems: dict[str, str] = {}
    for tid, variants in sorted(by_table.items()):
        exists = table_exists(spark, tid)
        try:
            schemas = [parse_json_schema(v["row_schema"]) for v in variants if v["row_schema"]]
            columns = _merge_columns([normalizer.table_columns(s) for s in schemas if s])
            if not columns:
                if exists:
                    columns = tuple(_existing_columns(spark, tid))
                else:
                    texts = parsed.where((F.col("table_id") == tid) & (F.col("status") == "ok")).select(
                        F.coalesce("after_text", "before_text").alias("value")).where(F.col("value").isNotNull())
                    sample = next((v["sample"] for v in variants if v["sample"]), None)
                    columns = tuple(_infer_columns(spark, texts, sample))
        except SchemaError as exc:
            problems[tid] = f"table {tid}: {exc}"
            continue
        key: list[str] = []
        for v in variants:
            key = normalizer.key_columns(parse_json_schema(v["key_schema"]), parse_json_schema(v["key_text"]))
            if key:
                break
        key = key or list(keys.for_table(tid)) or (key_columns_of(spark, tid) if exists else [])
        if not key:
            problems[tid] = (
                f"table {tid} has no primary key: the messages carry no key; declare one with "
                f"--key {tid}=COL[,COL...] (or `keys:` in the source config)"
            )
            continue
        names = {c.name for c in columns}
        missing = [k for k in key if k not in names]
        if missing and columns:
            problems[tid] = f"table {tid}: key column(s) {', '.join(missing)} are not columns of the table"
            continue
        if not columns:
            problems[tid] = f"table {tid}: no column types (no schema, no existing table, no row images)"
            continue
        typings[tid] = TableTyping(tuple(columns), tuple(key))
    return typings, problems


def normalize_batch(spark: SparkSession, settings: LakeSettings, *, source: str, batch_id: str, fmt: str,
                    keys: KeySpec | None = None) -> "NormalizeResult":
    """Normalize one landed batch (idempotent: re-running replaces the batch's staging and quarantine rows).

    Args:
        spark: The session.
        settings: The lake.
        source: Source name.
        batch_id: A landed batch of that source.
        fmt: Format name (see :mod:`cdclake.formats`).
        keys: Declared primary keys for streams without keys.

    Returns:
        Staged records per table, quarantined count, skipped counts by reason.
    """
    from cdclake.pipeline import NormalizeResult

    normalizer = get_normalizer(fmt)
    raw = spark.read.schema(RAW_SCHEMA).json(batch_raw_paths(settings, source, batch_id))
    parsed = normalizer.parse(raw).persist()
    try:
        typings, problems = _resolve_tables(spark, parsed, normalizer, keys or KeySpec())
        out = staging_dir(settings, source, batch_id)
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
        staged: dict[str, int] = {}
        rejected: list[DataFrame] = [
            parsed.where(F.col("status") == "quarantine"),
        ]
        if problems:
            reason = F.lit(None).cast("string")
            for tid, why in problems.items():
                reason = F.when(F.col("table_id") == tid, F.lit(why)).otherwise(reason)
            rejected.append(parsed.where((F.col("status") == "ok") & F.col("table_id").isin(*problems))
                            .withColumn("reason", reason))
        for tid, typing in typings.items():
            records = canonical_records(
                parsed.where((F.col("status") == "ok") & (F.col("table_id") == tid))
                .select("*", *[F.col(c).alias(f"_q_{c}") for c in quarantine.PASSTHROUGH]),
                typing, batch_id=batch_id, source=source, fmt=fmt,
            )
            keep = [c for c in records.columns if c != "_key_ok" and not c.startswith("_q_")]
            records.where(F.col("_key_ok")).select(*keep).write.mode("overwrite").parquet(str(out / tid))
            missing_key = f"missing primary-key value (key columns: {', '.join(typing.key)})"
            rejected.append(
                records.where(~F.col("_key_ok"))
                .select(*[F.col(f"_q_{c}").alias(c) for c in quarantine.PASSTHROUGH])
                .withColumn("reason", F.lit(missing_key))
            )
        counts = {
            (r["status"], r["reason"], r["table_id"]): r["count"]
            for r in parsed.groupBy("status", "reason", "table_id").count().collect()
        }
        quarantined = quarantine.record(spark, rejected, source=source, batch_id=batch_id, fmt=fmt)
        skipped: dict[str, int] = defaultdict(int)
        for (status, reason, tid), n in counts.items():
            if status == "ok" and tid in typings:
                staged[tid] = staged.get(tid, 0) + n
            elif status == "skip":
                skipped[reason] += n
        (out / STAGING_MARKER).write_text(json.dumps({
            "tables": {tid: {"key": list(t.key), "columns": [c.name for c in t.columns]}
                       for tid, t in typings.items()},
            "format": fmt,
        }, indent=2))
        result = NormalizeResult(source, batch_id, dict(sorted(staged.items())), quarantined, dict(skipped))
        log.info("normalized batch %s of %r: %s", batch_id, source, result.to_dict())
        return result
    finally:
        parsed.unpersist()


def staged_tables(settings: LakeSettings, source: str, batch_id: str) -> dict[str, dict[str, Any]]:
    """Tables staged for a batch (from the staging marker), or {} when the batch was not normalized."""
    marker = staging_dir(settings, source, batch_id) / STAGING_MARKER
    if not marker.exists():
        return {}
    return json.loads(marker.read_text())["tables"]
