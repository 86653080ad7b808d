"""Debezium change events (PostgreSQL, SQL Server, MySQL connectors; dtle's Debezium-compatible output).

Accepts values with the JSON converter's ``schema`` + ``payload`` envelope and payload-only values, keys likewise
(or no key). Mapping onto the canonical record:

- ``op``: c/u/d/r/t as given; ``c`` with a truthy ``source.snapshot`` (older connectors) is a snapshot read ``r``.
  ``m`` (logical-decoding message) and tombstones (null value) are skipped with a counted reason.
- quarantined: a value or key that is not valid JSON (or, for a value, not a JSON object); a schema change
  event (``ddl``, as on Debezium's/dtle's schema-change topic), which is not a row change and is not applied.
- table: ``source.db`` / ``source.schema`` / ``source.table`` (:func:`cdclake.identity.table_id`).
- source position, by what ``source`` carries:
  PostgreSQL ``lsn`` (16 hex digits);
  SQL Server ``commit_lsn`` + ``change_lsn`` (20 hex digits each, colons dropped) + ``event_serial_no`` (16);
  MySQL/dtle binlog file sequence number + ``pos`` + ``row`` (16 hex digits each).
- ``source_ts``: ``source.ts_us`` / ``ts_ms`` / ``ts_sec``; ``snapshot``: ``source.snapshot`` unless false.
"""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from cdclake.formats.connect import ColumnType, envelope_row_schema, field_name, struct_columns
from cdclake.identity import sanitize
from cdclake.records import hex_segment

NAME = "debezium"

_SOURCE_FIELDS = (
    "version", "connector", "name", "ts_ms", "ts_us", "ts_ns", "ts_sec", "snapshot", "db", "schema", "table",
    "txId", "lsn", "xmin", "sequence", "change_lsn", "commit_lsn", "event_serial_no",
    "file", "pos", "row", "gtid", "server_id", "thread",
)
_SOURCE = StructType([StructField(f, StringType()) for f in _SOURCE_FIELDS])
_BODY_FIELDS = [
    StructField("op", StringType()),
    StructField("before", StringType()),
    StructField("after", StringType()),
    StructField("source", _SOURCE),
    StructField("ts_ms", StringType()),
    StructField("ddl", StringType()),
]
_CORRUPT = "_corrupt_record"
"""from_json puts the whole text of a malformed (or non-object) JSON value here; Spark 3 otherwise returns a struct of
nulls for it, indistinguishable from a valid object without those fields."""
_FROM_JSON_OPTIONS = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": _CORRUPT}
VALUE_SCHEMA = StructType(
    [StructField("schema", StringType()), StructField("payload", StructType(_BODY_FIELDS)), *_BODY_FIELDS,
     StructField(_CORRUPT, StringType())]
)
KEY_SCHEMA = StructType(
    [StructField("schema", StringType()), StructField("payload", StringType()), StructField(_CORRUPT, StringType())]
)
SNAPSHOT_TRUE = ("true", "first", "last", "first_in_data_collection", "last_in_data_collection", "incremental")


def _unquote_json_text(c: Column) -> Column:
    """A JSON ``null`` kept as text by Spark reads back as the string ``null``; make it a real null."""
    return F.when(c.isNull() | (F.lower(F.trim(c)) == "null"), F.lit(None)).otherwise(c)


def _source_position(src: Column) -> Column:
    lsn = src["lsn"]
    commit_lsn = src["commit_lsn"]
    change_lsn = src["change_lsn"]
    binlog_seq = F.regexp_extract(src["file"], r"(\d+)$", 1)

    def lsn_hex(c: Column) -> Column:
        return F.lpad(F.lower(F.regexp_replace(F.coalesce(c, F.lit("")), ":", "")), 20, "0")

    return (
        F.when(lsn.isNotNull() & lsn.rlike(r"^\d+$"), hex_segment(lsn))
        .when(commit_lsn.isNotNull() | change_lsn.isNotNull(),
              F.concat(lsn_hex(commit_lsn), lsn_hex(change_lsn),
                       hex_segment(F.coalesce(src["event_serial_no"], F.lit("0")))))
        .when(src["file"].isNotNull() & src["pos"].isNotNull() & (binlog_seq != ""),
              F.concat(hex_segment(binlog_seq), hex_segment(src["pos"]),
                       hex_segment(F.coalesce(src["row"], F.lit("0")))))
    )


def _source_ts(src: Column, envelope_ts: Column) -> Column:
    return F.coalesce(
        F.timestamp_micros(src["ts_us"].cast("long")),
        F.timestamp_millis(src["ts_ms"].cast("long")),
        F.when(src["ts_sec"].cast("long") > 0, F.timestamp_seconds(src["ts_sec"].cast("long"))),
        F.timestamp_millis(envelope_ts.cast("long")),
    )


class DebeziumNormalizer:
    """Debezium envelopes -> parsed records."""

    name = NAME

    def parse(self, raw: DataFrame) -> DataFrame:
        """Raw records -> parsed records (see :data:`cdclake.formats.PARSED_COLUMNS`)."""
        v = F.from_json(F.col("value"), VALUE_SCHEMA, _FROM_JSON_OPTIONS)
        k = F.from_json(F.col("key"), KEY_SCHEMA, _FROM_JSON_OPTIONS)
        df = raw.withColumn("_v", v).withColumn("_k", k)
        enveloped = F.col("_v.payload").isNotNull()
        body = F.when(enveloped, F.col("_v.payload")).otherwise(
            F.struct(*[F.col(f"_v.{f.name}").alias(f.name) for f in _BODY_FIELDS])
        )
        df = df.withColumn("_b", body)
        src = F.col("_b.source")
        key_enveloped = F.col("_k.payload").isNotNull() & F.col("_k.schema").isNotNull()
        raw_op = F.lower(F.trim(F.col("_b.op")))
        snapshot_flag = F.lower(F.trim(src["snapshot"]))
        snapshot = (
            F.when(snapshot_flag.isin(*SNAPSHOT_TRUE), snapshot_flag)
            .when(raw_op == "r", F.lit("true"))
        )
        op = F.when((raw_op == "c") & snapshot.isNotNull() & (snapshot != "incremental"), F.lit("r")).otherwise(raw_op)
        table_name = F.coalesce(src["table"], F.lit(""))
        namespace = F.coalesce(F.nullif(src["schema"], F.lit("")), F.nullif(src["db"], F.lit("")), F.lit("default"))
        table_id = F.when(
            table_name != "",
            F.concat_ws(".", _sanitize(namespace), _sanitize(table_name)),
        )
        value_schema = F.when(enveloped, F.col("_v.schema"))
        source_pos = _source_position(src)
        after_text = _unquote_json_text(F.col("_b.after"))
        before_text = _unquote_json_text(F.col("_b.before"))
        status, reason = _status(
            (F.col("error").isNotNull(), F.concat(F.lit("unframed message: "), F.col("error")), "quarantine"),
            (F.col("value").isNull(), F.lit("tombstone (null value)"), "skip"),
            (F.col(f"_v.{_CORRUPT}").isNotNull(), F.lit("message value is not valid JSON (or not a JSON object)"),
             "quarantine"),
            # A damaged JSON key must not fall back silently to the row image's key columns. Keys that are not
            # JSON at all (a string converter's key) still do.
            (F.col("key").rlike(r"^\s*\{") & F.col(f"_k.{_CORRUPT}").isNotNull(),
             F.lit("message key is not valid JSON"), "quarantine"),
            (F.col("_b.ddl").isNotNull() & F.col("_b.op").isNull(),
             F.lit("schema change event (DDL), not a row change: cdclake takes table schemas from the change "
                   "events and does not apply DDL"), "quarantine"),
            (F.col("_v").isNull() | F.col("_b.op").isNull() & F.col("_b.source").isNull(),
             F.lit("not a Debezium change event: value is not JSON or has no payload/op"), "quarantine"),
            (raw_op.isNull(), F.lit("missing field payload.op"), "quarantine"),
            (raw_op == "m", F.lit("logical decoding message (op=m)"), "skip"),
            (~raw_op.isin("c", "u", "d", "r", "t"),
             F.concat(F.lit("unknown op '"), F.col("_b.op"), F.lit("' (expected c, u, d, r, t or m)")), "quarantine"),
            (src.isNull(), F.lit("missing field payload.source"), "quarantine"),
            (table_id.isNull(), F.lit("missing field payload.source.table"), "quarantine"),
            (source_pos.isNull(),
             F.lit("no source position: payload.source has no lsn, commit_lsn/change_lsn or file+pos"), "quarantine"),
            (op.isin("c", "u", "r") & after_text.isNull(),
             F.concat(F.lit("op="), op, F.lit(" without an after image (payload.after is null)")), "quarantine"),
        )
        return df.select(
            "input", "file_index", "index", F.lit(0).alias("row_index"), "line", "byte_offset", "offset",
            "key", "value",
            table_id.alias("table_id"),
            op.alias("op"),
            source_pos.alias("source_pos"),
            _source_ts(src, F.col("_b.ts_ms")).alias("source_ts"),
            snapshot.alias("snapshot"),
            F.when(key_enveloped, _unquote_json_text(F.col("_k.payload")))
            .otherwise(_unquote_json_text(F.col("key"))).alias("key_text"),
            before_text.alias("before_text"),
            after_text.alias("after_text"),
            value_schema.alias("row_schema"),
            F.when(key_enveloped, F.col("_k.schema")).alias("key_schema"),
            status.alias("status"),
            reason.alias("reason"),
        )

    def table_columns(self, row_schema: dict[str, Any]) -> list[ColumnType]:
        """Columns from a Debezium value envelope schema (its ``after``/``before`` struct)."""
        row = envelope_row_schema(row_schema)
        return struct_columns(row) if row else []

    def key_columns(self, key_schema: dict[str, Any] | None, key_sample: dict[str, Any] | None) -> list[str]:
        """Key columns from the key's Connect schema, else from a sample key payload's field names."""
        if key_schema and key_schema.get("fields"):
            return [field_name(f) for f in key_schema["fields"]]
        if isinstance(key_sample, dict):
            return list(key_sample)
        return []


def _sanitize(c: Column) -> Column:
    """Column form of :func:`cdclake.identity.sanitize` (kept in step with it by tests)."""
    cleaned = F.regexp_replace(F.lower(F.trim(c)), r"[^a-z0-9_]", "_")
    return F.when(cleaned == "", F.lit("_")).otherwise(cleaned)


def _status(*rules: tuple[Column, Column, str]) -> tuple[Column, Column]:
    """First matching rule wins: (condition, reason, status); otherwise ``ok``."""
    status: Column = F.lit("ok")
    reason: Column = F.lit(None).cast("string")
    for condition, why, outcome in reversed(rules):
        status = F.when(condition, F.lit(outcome)).otherwise(status)
        reason = F.when(condition, why).otherwise(reason)
    return status, reason


def parse_json_schema(text: str | None) -> dict[str, Any] | None:
    """A schema's JSON text -> dict (None for null or unparsable text)."""
    if not text:
        return None
    try:
        parsed = json.loads(text)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


NORMALIZER = DebeziumNormalizer()
_ = sanitize  # the Python twin of _sanitize
