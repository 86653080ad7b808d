"""Normalize: a landed batch -> canonical change records per table (staged Parquet) + quarantine.

Steps (one SparkSession, JVM expressions only):

1. Read the batch's raw records with an explicit schema; the format parses them in one pass into parsed records
   (:data:`cdclake.formats.PARSED_COLUMNS`) with an ``ok`` / ``skip`` / ``ddl`` / ``quarantine`` status.
2. DDL records (rare) are interpreted on the driver (:mod:`cdclake.schema_changes`): keys and types learned from
   CREATE/ALTER TABLE, truncates turned into ``t`` changes, the rest skipped or quarantined with a reason.
3. One aggregation brings each table's distinct schemas and a sample key to the driver; the table's columns come
   from the message schema, else from DDL, else from the existing Iceberg table; columns the images carry beyond
   those are inferred (JVM JSON inference). Its key comes from the message key or ``pkNames``, else a CREATE TABLE,
   else a declared key (:class:`cdclake.keys.KeySpec`), else the existing table.
4. Each table's records are typed (:func:`canonical_records`) and written to
   ``<lake>/staging/<source>/<batch id>/<table id>/``; a table without a key, a change without key values, a value
   that does not convert to its column's type, or a schema cdclake cannot map goes to quarantine with the reason.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from cdclake import ddl_history, ddl_stops, open_snapshots, quarantine, tombstones
from cdclake.catalog import (
    BOOKKEEPING_PREFIX, SOURCE_TABLE_PROPERTY, key_columns_of, qualifies_recorded, recorded_connect_types,
    table_exists, table_properties, table_schema, tables_in,
)
from cdclake.evolution import decimal_target, fits, incompatibility
from cdclake.exceptions import SchemaError
from cdclake.formats import get_normalizer, key_columns, table_columns
from cdclake.formats.canal import SQLTYPES_SCHEMA_PREFIX, arrival_ordered
from cdclake.formats.debezium import AFTER_SNAPSHOT
from cdclake.formats.common import parse_json_schema
from cdclake.formats.connect import (
    CONNECT_DECIMAL,
    UNAVAILABLE_TEXTS,
    ColumnType,
    Converter,
    cast_converter,
    column_type,
    debezium_mysql_field,
    encoded_fields,
    envelope_row_schema,
    mark_json_number,
    unmark_json_number,
    variable_scale_decimal,
)
from cdclake.formats.sqltypes import BARE_DECIMAL, is_zero_datetime, source_time_zone, source_zone
from cdclake.identity import MAX_TABLE_ID_LENGTH
from cdclake.ddl import DEFAULT_NOW
from cdclake.ddl_history import History
from cdclake.schema_changes import (
    SKIP_ALTER,
    SKIP_ALTER_NO_COLUMN,
    SKIP_CREATE,
    SKIP_CREATE_NO_COLUMNS,
    ColumnDefault,
    DdlPolicies,
    Outcome,
    TableDefinition,
    interpret,
)
from cdclake.keys import KeySpec
from cdclake.landing import batch_raw_paths, list_batches
from cdclake.plans import ColumnPlan, cached_plan, plan_key
from cdclake.records import canonical_schema, position
from cdclake.settings import LakeSettings
from cdclake.spark import CASE_SENSITIVE, WHOLE_STAGE_CODEGEN, session_settings

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

STAGING_MARKER = "_normalized.json"

_ANY_SPELLING = ""
"""``table_name`` of the changes the lake itself routes to a table by its id (a DDL statement's truncate, the
changes of a renamed table): they match whichever source table the lake table holds."""

REJECTED = "_rejected"
"""Staged column: why a row change cannot be staged (no key value, a value that does not convert), null for the
staged ones. Rejected rows are written with the rest and go to quarantine; :func:`read_staged` leaves them out."""


@dataclass(frozen=True)
class TableTyping:
    """How one table's images are typed: its columns and its key columns."""

    columns: tuple[ColumnType, ...]
    key: tuple[str, ...]
    aliases: tuple[tuple[str, str], ...] = ()
    """``(old, current)`` column names: images that carry ``old`` (written before a rename, or another spelling of
    the name in case) fill ``current``."""
    cleared: tuple[tuple[str, str], ...] = ()
    """``(column, position)``: the batch dropped the column at that full position and added it again; an image
    written before then carries a value of the dropped column, which the new one does not have."""

    partial_images: tuple[tuple[int, tuple[str, ...], tuple[tuple[str, tuple[str, ...]], ...]], ...] = ()
    """``(xxhash64 of a row schema, columns, unlisted)``: canal-family messages of that schema (``mysqlType``) leave
    those columns of the table out of their row images (MySQL's ``binlog_row_image=NOBLOB`` or ``MINIMAL``): in an
    update they are unavailable, so the stored value stays. ``unlisted``: ``(column, its names in lower case)`` for
    columns the schema does not type that some of its images carry: an update's image without any of those names
    leaves the column out."""
    connect_types: tuple[tuple[str, str], ...] = ()
    """``(column, Connect field schema as JSON)`` for columns whose values Connect messages write encoded: the
    table records them (:data:`cdclake.catalog.CONNECT_TYPES_PROPERTY`) for later payload-only messages."""

    def sources(self, name: str) -> list[str]:
        """The image fields a column is read from: its own name, then the names it had before renames."""
        return [name, *(old for old, current in self.aliases if current == name)]


class _Image:
    """An image's text values (a struct column of strings) by current column name; a renamed column is read
    from its old names too (images written before the rename)."""

    def __init__(self, struct: str, typing: TableTyping, text: str) -> None:
        self.struct = F.col(struct)
        self.name = struct
        self.typing = typing
        self.text = F.col(text)
        self._columns: dict[str, Column] = {}
        self._values: dict[str, Column] = {}

    def field(self, name: str) -> Column:
        return self.struct[name]

    def image_text(self, name: str) -> Column:
        """The JSON text the image field ``name`` is read from."""
        return self.text

    def marked_decimals(self, names: list[str]) -> list[Column]:
        """Columns of a step before typing that carry the texts of Connect Decimal columns ``names`` as
        :func:`mark_json_number` marks them; the image reads those columns from then on. A separate step, so that
        the decoders' many references to a value do not each repeat the check."""
        marked = []
        for i, name in enumerate(names):
            # The field the value is read from (its own name, else an old one), and whether that one is a number.
            is_number = F.coalesce(*[
                F.when(self.field(n).isNotNull(), F.from_json(self.image_text(n), StructType(
                    [StructField(n, DoubleType())]))[n].isNotNull()) for n in self.typing.sources(name)],
                F.lit(False))
            alias = f"_dec{self.name}{i}"
            marked.append(mark_json_number(self[name], is_number).alias(alias))
            self._columns[name] = F.col(alias)
        return marked

    def __getitem__(self, name: str) -> Column:
        # Built once per name: each expression node is a round trip to the JVM, and typing reads every column
        # of an image several times (its value, its failure check, the key, the placeholder list).
        if name not in self._columns:
            fields = [self.field(n) for n in self.typing.sources(name)]
            dropped_at = dict(self.typing.cleared).get(name)
            if dropped_at is not None:  # the image's own field, not a renamed column's old name
                fields[0] = F.when(_position() > F.lit(dropped_at), fields[0])
            self._columns[name] = fields[0] if len(fields) == 1 else F.coalesce(*fields)
        return self._columns[name]

    def value(self, c: ColumnType) -> Column:
        """A column's text, null where the source had no value for it: the unavailable-value placeholders and,
        for dates and timestamps, MySQL's zero date ("no date", null as Debezium makes it, not a value that
        failed to convert)."""
        if c.name not in self._values:
            text = self[c.name]
            blank = text.isin(*UNAVAILABLE_TEXTS)
            if isinstance(c.data_type, (DateType, TimestampType, TimestampNTZType)):
                blank = blank | is_zero_datetime(text)
            self._values[c.name] = F.when(blank, F.lit(None)).otherwise(text)
        return self._values[c.name]


class _Before(_Image):
    """The before image: ``before_text`` (struct ``_br``), else the after image (``_ar``) overlaid with the
    partial ``old_text``, parsed into ``_br`` too, whose field names are ``_ok``."""

    def __init__(self, typing: TableTyping) -> None:
        super().__init__("_br", typing, "before_text")

    def field(self, name: str) -> Column:
        return F.when(self._own(name), self.struct[name]).when(F.col("_ok").isNotNull(), F.col("_ar")[name])

    def image_text(self, name: str) -> Column:
        return F.when(self._own(name), F.coalesce("before_text", "old_text")).otherwise(F.col("after_text"))

    def _own(self, name: str) -> Column:
        """Whether the before image has a value of the column image field ``name`` is read into: under any of
        the column's names (``old`` may spell it another way than ``data``)."""
        is_column = any(c.name == name for c in self.typing.columns)
        names = self.typing.sources(name if is_column else dict(self.typing.aliases).get(name, name))
        listed = (F.array_contains(F.col("_ok"), name) if len(names) == 1
                  else F.arrays_overlap(F.col("_ok"), F.array(*[F.lit(n) for n in names])))
        return F.col("before_text").isNotNull() | listed


def staging_dir(settings: LakeSettings, source: str, batch_id: str) -> Path:
    """Where a batch's canonical records are staged."""
    return settings.staging_root / source / batch_id


def canonical_records(parsed: DataFrame, typing: TableTyping, *, batch_id: str, source: str, fmt: str) -> DataFrame:
    """Type one table's parsed records into canonical change records (pure; see :mod:`cdclake.records`).

    An update whose before image has another primary-key value than its after image (canal/DRS/CKafka report a key
    change that way) becomes a delete of the old key and an upsert of the new one, at the same position.

    The expressions depend on the table's typing, not on the batch: a process builds them once per typing
    (:mod:`cdclake.plans`), and the batch id comes in as a column.

    Args:
        parsed: Parsed records of one table with status ``ok``.
        typing: The table's columns and key.
        batch_id: Batch id (provenance and position tail).
        source: Source name.
        fmt: Format name.

    Returns:
        Canonical records, plus ``_key_ok`` (false when a key column has no value), ``_key_plain`` (the message
        key is not a JSON object) and ``_cast_error`` (null, or which values did not convert to their column's
        type).
    """
    passthrough = tuple(c for c in parsed.columns if c.startswith("_q_"))
    key = plan_key("records", typing, source, fmt, passthrough, source_zone())
    plan = cached_plan(key, lambda: _records_plan(typing, source=source, fmt=fmt, passthrough=passthrough))
    return plan.apply(parsed.select("*", F.lit(batch_id).alias(_BATCH)))


_BATCH = "_cdc_batch"
"""The batch id, as a column of the records being typed (not a literal in the cached expressions)."""


def _position() -> Column:
    """The full position of the records being typed."""
    return position(F.col("source_pos"), F.col(_BATCH), F.col("file_index"), F.col("index"), F.col("row_index"))


def _records_plan(typing: TableTyping, *, source: str, fmt: str, passthrough: tuple[str, ...]) -> ColumnPlan:
    def text_struct(names: list[str]) -> StructType:
        return StructType([StructField(n, StringType()) for n in dict.fromkeys(
            source for name in names for source in typing.sources(name))])

    by_name = {c.name: c for c in typing.columns}
    texts = [
        F.from_json(F.col("after_text"), text_struct(list(by_name))).alias("_ar"),
        F.from_json(F.coalesce("before_text", "old_text"), text_struct(list(by_name))).alias("_br"),
        F.when(F.col("before_text").isNull(), F.json_object_keys("old_text")).alias("_ok"),
        F.from_json(F.col("key_text"), text_struct(list(typing.key))).alias("_kr"),
    ]
    after_raw, before_raw, key_raw = _Image("_ar", typing, "after_text"), _Before(typing), _Image("_kr", typing,
                                                                                                  "key_text")
    decimals = [c.name for c in typing.columns if c.encoding.startswith(CONNECT_DECIMAL)]
    marked = [*after_raw.marked_decimals(decimals), *before_raw.marked_decimals(decimals),
              *key_raw.marked_decimals([k for k in typing.key if k in decimals])]
    has_before = F.col("before_text").isNotNull() | F.col("_ok").isNotNull()

    def image(raw: _Image, present: Column) -> Column:
        values = [c.convert(raw.value(c)).alias(c.name) for c in typing.columns]
        return F.when(present, F.struct(*values))

    # The new row's key is its after image's, where it has one: dtle writes a primary-key change as one update
    # whose message key is the old key (its before image's); a key change is then a delete plus an upsert.
    key_text = [F.coalesce(after_raw[k], key_raw[k], before_raw[k]) for k in typing.key]
    key_ok = F.lit(True)
    for text in key_text:
        key_ok = key_ok & text.isNotNull()
    before_key_ok = F.lit(bool(typing.key))
    for k in typing.key:
        before_key_ok = before_key_ok & before_raw[k].isNotNull()
    typed = [
        image(before_raw, has_before).alias("_before"),
        image(after_raw, F.col("after_text").isNotNull()).alias("_after"),
        (F.struct(*[by_name[k].convert(t).alias(k) for k, t in zip(typing.key, key_text)])
         if typing.key else F.lit(None)).alias("_key"),
        (F.struct(*[by_name[k].convert(before_raw[k]).alias(k) for k in typing.key])
         if typing.key else F.lit(None)).alias("_before_key"),
        ((F.col("op") == "t") | key_ok).alias("_key_ok"),
        # A key the message has but that names no columns (a string converter's `Struct{id=1}`): the reason says so.
        ((F.trim(F.col("key_text")) != "") & ~F.ltrim(F.col("key_text")).startswith("{")).alias("_key_plain"),
    ]
    failures = [
        F.when(raw.value(c).isNotNull() & typed_image[c.name].isNull(),
               F.concat(F.lit(f"{side} column {c.name} ({c.data_type.simpleString()}): "),
                        F.to_json(F.array(F.substring(unmark_json_number(raw[c.name]) if c.name in decimals
                                                      else raw[c.name], 1, 200)))))
        for side, raw, typed_image in (("after", after_raw, F.col("_after")), ("before", before_raw, F.col("_before")))
        for c in typing.columns
    ]
    cast_error = F.concat_ws("; ", *failures) if failures else F.lit("")
    checked = F.when(cast_error != "", F.concat(F.lit("value does not convert to the column type: "), cast_error))
    key_change = (F.col("op") == "u") & before_key_ok & (F.col("_before_key") != F.col("_key"))
    part = F.explode(F.when(key_change, F.array(F.lit(1), F.lit(2))).otherwise(F.array(F.lit(0))))
    old_key_delete = F.col("_part") == 1
    no_names = F.array().cast(ArrayType(StringType()))
    unavailable = no_names
    if typing.columns:
        placeholders = [after_raw[c.name].isin(*UNAVAILABLE_TEXTS) for c in typing.columns]
        any_placeholder = placeholders[0]
        for p in placeholders[1:]:
            any_placeholder = any_placeholder | p
        # The lambda is interpreted (not code-generated): run it only for the rare row that has a placeholder.
        unavailable = F.when(any_placeholder, F.filter(
            F.array(*[F.when(p, F.lit(c.name)) for p, c in zip(placeholders, typing.columns)]),
            lambda x: x.isNotNull())).otherwise(no_names)
    if typing.partial_images:  # an update whose image leaves columns out (canal, binlog_row_image=NOBLOB/MINIMAL)
        schema_hash = F.xxhash64("row_schema")
        left_out = no_names
        for h, names, unlisted in typing.partial_images:
            out = F.array(*[F.lit(n) for n in names]).cast(ArrayType(StringType()))
            if unlisted:  # per row: the names its image carries (rare: a column no mysqlType of the batch lists)
                keys = F.transform(F.json_object_keys("after_text"), F.lower)
                absent = [F.when(~F.arrays_overlap(keys, F.array(*map(F.lit, spellings))), F.lit(c))
                          for c, spellings in unlisted]
                out = F.concat(out, F.filter(F.array(*absent), lambda x: x.isNotNull()))
            left_out = F.when(schema_hash == F.lit(h), out).otherwise(left_out)
        unavailable = F.when(F.col("op") == "u", F.array_union(unavailable, left_out)).otherwise(unavailable)
    batch = F.col(_BATCH)
    marking = [("add", marked)] if marked else []
    return ColumnPlan.of(("add", texts), *marking, ("add", typed), ("add", [checked.alias("_cast_error")]),
                         ("add", [part.alias("_part")]), ("select", [
        F.when(old_key_delete, F.lit("d")).otherwise(F.col("op")).alias("op"),
        F.col("table_id"),
        F.when(old_key_delete, F.col("_before_key")).otherwise(F.col("_key")).alias("key"),
        F.col("_before").alias("before"),
        F.when(old_key_delete, F.lit(None)).otherwise(F.col("_after")).alias("after"),
        _position().alias("position"),
        F.col("source_ts"),
        F.col("snapshot"),
        batch.alias("batch_id"),
        F.lit(source).alias("source"),
        F.lit(fmt).alias("format"),
        F.col("input").alias("input_file"),
        F.col("line").alias("raw_line"),
        F.coalesce(F.col("offset"), F.col("byte_offset")).alias("raw_offset"),
        F.when(old_key_delete, no_names).otherwise(unavailable).alias("unavailable"),
        F.col("patch"),
        F.col("_key_ok"),
        F.col("_key_plain"),
        F.col("_cast_error"),
        *[F.col(c) for c in passthrough],
    ]))


_NOTHING_TO_TRUNCATE = ("TRUNCATE (or DROP TABLE) of a table the lake does not have: nothing to remove (its position "
                        "is kept, so older changes that arrive later stay out)")

AFTER_ROW_CHANGE = "}"
"""Suffix of the source position a statement without one takes from the row change before it (:func:`_ddl_position`):
it sorts after that position followed by any landing tail (and before the next position), so a copy of that row
change delivered again in a later batch is still older than the statement."""

_KEEP_ON_RENORMALIZE = ("_held",)
"""Staging entries of :mod:`cdclake.dq_hold` that outlive a re-normalized batch (held changes are data)."""


def _merge_columns(variants: list[list[ColumnType]]) -> tuple[ColumnType, ...]:
    """Columns of several schemas: a column's later type wins, unless the earlier one holds it without loss (a
    batch whose messages saw the column widened, `int` then `bigint`, types it `bigint` in whichever order) or is
    text, which holds any value as its text (`string` then `int`, as `int` then `string`, is `string`)."""
    merged: dict[str, ColumnType] = {}
    for columns in variants:
        for column in columns:
            known = merged.get(column.name)
            if known is None or not (fits(known.data_type, column.data_type)
                                     or isinstance(known.data_type, StringType)):
                merged[column.name] = column
    return tuple(merged.values())


def _fold_case(columns: list[ColumnType], preferred: list[str]) -> tuple[list[ColumnType], dict[str, str]]:
    """Columns whose names differ only in case (MySQL's names are case-insensitive; a column renamed `k1` -> `K1`)
    folded into one, as Spark resolves names case-insensitively. Its name is the ``preferred`` spelling (the
    table's), else the lower-case one if used, else the first in sort order; its type the wider one
    (:func:`_merge_columns`).

    Returns:
        The folded columns, and ``{other spelling: name}`` for the images that use another spelling.
    """
    spelling = {name.lower(): name for name in preferred}
    for name in sorted({c.name for c in columns}, key=lambda n: (n != n.lower(), n)):
        spelling.setdefault(name.lower(), name)
    spelled: list[ColumnType] = []
    aliases: dict[str, str] = {}
    for column in columns:
        name = spelling[column.name.lower()]
        if name != column.name:
            aliases[column.name] = name
            column = replace(column, name=name)
        spelled.append(column)
    return list(_merge_columns([spelled])), aliases


def _case_clash(columns: list[ColumnType]) -> str | None:
    """Why one schema's columns cannot be typed: two of them differ only in case (PostgreSQL's quoted names can),
    which Spark cannot tell apart; else None."""
    seen: dict[str, str] = {}
    for column in columns:
        other = seen.setdefault(column.name.lower(), column.name)
        if other != column.name:
            return (f"columns {other} and {column.name} differ only in case, which Spark's column names cannot "
                    "tell apart: rename one at the source (or map the table with a view), then replay")
    return None


_VARIABLE_SCALE_SPEC = {"type": "struct", "name": "io.debezium.data.VariableScaleDecimal"}
"""The Connect type a table records for a column inference typed from VariableScaleDecimal objects."""


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
        if isinstance(data_type, StructType) and sorted(data_type.fieldNames()) == ["scale", "value"]:
            # Debezium's VariableScaleDecimal without its schema: the exact decimal text, else the JSON text.
            columns.append(ColumnType(name, StringType(), lambda c: F.coalesce(variable_scale_decimal(c), c),
                                      encoding=_VARIABLE_SCALE_SPEC["name"]))
            continue
        if isinstance(data_type, DecimalType) and data_type.scale == 0:
            data_type = DecimalType(38, 0)  # whole numbers beyond a long (JSON inference reads them as decimals)
        elif not isinstance(data_type, (LongType, DoubleType, StringType)) and data_type.typeName() != "boolean":
            data_type = StringType()  # nested values and all-null columns are kept as JSON text
        columns.append(ColumnType(name, data_type, cast_converter(data_type)))
    return columns


def _existing_columns(spark: SparkSession, tid: str, properties: dict[str, str] | None = None) -> list[ColumnType]:
    """A lake table's columns, decoded as the Connect types it recorded (payload-only messages write a Debezium
    ``Timestamp`` as milliseconds, a ``Decimal`` as base64), else by their Spark type (:func:`cast_converter`).
    ``properties``: the table's, where the caller has them."""
    recorded = recorded_connect_types(properties if properties is not None else table_properties(spark, tid))
    columns = []
    for f in table_schema(spark, tid).fields:
        if f.name.startswith(BOOKKEEPING_PREFIX):
            continue
        spec = recorded.get(f.name)
        typed = _typed_by_connect(f.name, spec, f.dataType) if spec else None
        columns.append(typed or ColumnType(f.name, f.dataType, cast_converter(f.dataType)))
    return columns


def _stage_snapshot_end(spark: SparkSession, tid: str, path: Path) -> tuple[list[str], list[str]]:
    """Stage an empty change set for a lake table (its apply then cuts it where the batch ends its snapshot:
    ``snapshot_ends``); its key and user columns."""
    key = key_columns_of(spark, tid)
    row = StructType([f for f in table_schema(spark, tid).fields if not f.name.startswith(BOOKKEEPING_PREFIX)])
    spark.createDataFrame([], canonical_schema(StructType([row[k] for k in key]), row)).write.parquet(str(path))
    return key, row.fieldNames()


def _typed_by_connect(name: str, spec: dict[str, Any], data_type: DataType) -> ColumnType | None:
    """Column ``name`` of type ``data_type`` decoded as the Connect field schema ``spec`` writes its values, or None
    when that decoding does not give the type."""
    try:
        typed = _as_table_type(column_type({**spec, "field": name}), data_type)
    except (SchemaError, TypeError, ValueError, AttributeError, KeyError):
        return None
    return typed if typed.data_type == data_type else None


def _current_columns(columns: list[ColumnType], renames: dict[str, str], dropped: set[str]) -> list[ColumnType]:
    """Columns under their current names (see :mod:`cdclake.ddl_history`): dropped ones left out, renamed ones
    renamed; where an image has both the old and the current name, the current one's type wins."""
    out: dict[str, ColumnType] = {}
    for column in columns:
        if column.name.lower() in dropped:
            continue
        name = renames.get(column.name.lower(), column.name)
        if name != column.name:
            if name in out:
                continue
            column = replace(column, name=name)
        out[name] = column
    return list(out.values())


Variant = tuple[str, int, int, str | None]
"""A table's changes of one row schema, key schema and spelling of the table's name: ``table_id``, the schemas'
hashes, ``spelling`` (:func:`_spelling`)."""


def _pk_names(key_schema: Any) -> list[str]:
    """The columns a canal-family message's ``pkNames`` names (``[]`` for another key, or none)."""
    names = key_schema.get("pkNames") if isinstance(key_schema, dict) else None
    return [n for n in names if isinstance(n, str)] if isinstance(names, list) else []


def _variant(v: Any) -> Variant:
    return v["table_id"], v["h1"], v["h2"], v["spelling"]


def _spelling() -> Column:
    """The source table a change names, ``namespace.table`` as its stream spells it; null for changes routed by
    the table's id (:data:`_ANY_SPELLING`)."""
    name = F.col("table_name")
    return F.when(name.isNull() | (name != _ANY_SPELLING), F.coalesce(name, F.col("table_id")))


def _one_source_table(tid: str, variants: list[Any], recorded: str | None,
                      rejected: dict[Variant, str]) -> tuple[str | None, list[Any]]:
    """The source table lake table ``tid`` holds, and the variants that are its changes.

    Source names are lower-cased and reduced to ``[a-z0-9_]`` (:mod:`cdclake.identity`), so two source tables can
    map to one id (``gmall-2020-04`` and ``gmall_2020_04``; ``T`` and ``t`` in MySQL on Linux). The table holds the
    one ``recorded`` on it (:data:`~cdclake.catalog.SOURCE_TABLE_PROPERTY`), else the first the batch names; the
    variants of the others go to ``rejected``, so their rows never mix with its rows.
    """
    spellings = list(dict.fromkeys(v["spelling"] for v in variants if v["spelling"] is not None))
    # A DRS relational table recorded before its source table's name held the database: the first spelling that
    # qualifies the recorded name holds it now (apply records that spelling).
    qualified = [name for name in spellings if recorded and qualifies_recorded(name, recorded)]
    owner = (recorded if recorded in spellings or not qualified else qualified[0]) or (
        spellings[0] if spellings else None)
    others = [name for name in spellings if name != owner]
    for name in others:
        log.warning("source table %s maps to lake table %s, which holds source table %s: its changes are "
                    "quarantined", name, tid, owner)
    for v in variants:
        if v["spelling"] in others:
            rejected[_variant(v)] = (
                f"source table {v['spelling']} maps to lake table {tid} ({_why_one_id(v['spelling'], owner)}), "
                f"which holds source table {owner}: its changes are kept out so that the two tables' rows do not mix")
    return owner, [v for v in variants if v["spelling"] not in others]


def _why_one_id(name: str, owner: str | None) -> str:
    """Why source tables ``name`` and ``owner`` map to one lake id, for the quarantine reason: their databases
    differ (``db1.dbo.t``, ``db2.dbo.t``: a table named by its schema leaves the database out of its id), or their
    names differ in case or in characters an id cannot hold."""
    unqualified = name.split(".", 1)[-1]
    if owner and name.count(".") >= 2 and unqualified in (owner, owner.split(".", 1)[-1]) and name != owner:
        return "the lake id of a table named by its schema leaves the database out"
    return "names are lower-cased and reduced to [a-z0-9_]"


def _resolve_tables(spark: SparkSession, parsed: DataFrame, keys: KeySpec,
                    ddl: dict[str, TableDefinition], history: History, refused: dict[str, str],
                    unread: dict[str, str] | None = None, fmt: str = "", policies: DdlPolicies | None = None
                    ) -> tuple[dict[str, TableTyping], dict[str, str], dict[str, str], dict[Variant, str],
                               dict[str, str]]:
    """Work out every table's typing; tables that cannot be typed get a quarantine reason instead, and tables
    the batch only truncates, that the lake does not have, a skip reason (there is nothing to remove). Changes
    of a source table whose name maps to the id of a lake table that holds another source table
    (:func:`_one_source_table`), and changes whose schema cannot be read, are quarantined by their variant. The
    last result is the source table each typed table holds.

    Columns: the messages' own schemas, else what DDL in the batch declared, else the existing table; columns the
    row images carry beyond those are inferred from the images (JVM JSON inference). Key: a key declared for the
    table by name, else the message key or ``pkNames``, else a CREATE TABLE in the batch, else the default
    declared key, else the existing table's. Renamed and
    dropped columns (``history``) are mapped to their current names; ``refused`` tables (a DDL policy stopped
    them, or their DDL was refused) get that reason. ``unread``: why a CREATE TABLE of the batch could not be read,
    by table (a table left without a key says so).
    """
    # Images without a schema, and canal-family images (whose `data` may carry a column `mysqlType` does not list):
    # their field names, so that no value is dropped for want of a type. A Connect schema lists every field.
    untyped = F.col("row_schema").isNull() | F.col("row_schema").startswith(SQLTYPES_SCHEMA_PREFIX)
    untyped_image = F.when(untyped, F.json_object_keys(F.coalesce("after_text", "before_text")))
    # An update's before image (canal's `old`) may spell a column another way than its after image (Debezium's
    # Informix example: `before.id`, `after.ID`): those spellings are read too (a key change is told by them).
    untyped_before = F.when(untyped & F.col("after_text").isNotNull(),
                            F.json_object_keys(F.coalesce("before_text", "old_text")))
    rows = (
        parsed.where(F.col("status") == "ok")
        .groupBy("table_id", F.xxhash64("row_schema").alias("h1"), F.xxhash64("key_schema").alias("h2"),
                 _spelling().alias("spelling"))
        .agg(
            F.first("row_schema", ignorenulls=True).alias("row_schema"),
            F.first("key_schema", ignorenulls=True).alias("key_schema"),
            F.first("key_text", ignorenulls=True).alias("key_text"),
            F.first(F.coalesce("after_text", "before_text"), ignorenulls=True).alias("sample"),
            F.array_distinct(F.flatten(F.collect_set(untyped_image))).alias("untyped_names"),
            F.array_distinct(F.flatten(F.collect_set(untyped_before))).alias("before_names"),
            F.count_if(F.col("op") != "t").alias("changes"),
            F.min(F.struct("file_index", "index")).alias("first_seen"),
        )
        .collect()
    )
    # In arrival order: where two schemas type a column differently, the later one's type wins (_merge_columns).
    rows.sort(key=lambda r: (r["first_seen"]["file_index"] or 0, r["first_seen"]["index"] or 0))
    by_table: dict[str, list[Any]] = defaultdict(list)
    for row in rows:
        by_table[row["table_id"]].append(row)
    for tid in [*ddl, *refused]:
        by_table.setdefault(tid, [])
    typings: dict[str, TableTyping] = {}
    problems: dict[str, str] = {}
    idle: dict[str, str] = {}
    malformed: dict[Variant, str] = {}
    owners: dict[str, str] = {}
    for tid, variants in sorted(by_table.items()):
        if tid in refused:
            problems[tid] = refused[tid]
            continue
        if len(tid) > MAX_TABLE_ID_LENGTH:
            problems[tid] = (f"table {tid[:80]}...: its name is {len(tid)} characters long (namespace.table after "
                             f"sanitizing); the lake takes at most {MAX_TABLE_ID_LENGTH}")
            continue
        usable = []
        for v in variants:
            why = _variant_problem(v)
            if why:
                malformed[_variant(v)] = f"table {tid}: {why}"
            else:
                usable.append(v)
        if variants and not usable:
            continue  # every message of the table carries a schema that cannot be read: all quarantined
        exists = table_exists(spark, tid)
        properties = table_properties(spark, tid) if exists else {}
        owner, variants = _one_source_table(tid, usable, properties.get(SOURCE_TABLE_PROPERTY), malformed)
        if usable and not variants:
            continue  # every change is another source table's: all quarantined
        renames, dropped = history.aliases(tid), history.dropped.get(tid, set())
        declared = ddl.get(tid, TableDefinition())
        # A table the lake does not have, with no row changes and no DDL columns to create it from: its truncates
        # have nothing to remove.
        if not exists and not declared.columns and variants and not sum(v["changes"] for v in variants):
            idle[tid] = _NOTHING_TO_TRUNCATE
            continue
        spellings: dict[str, str] = {}
        try:
            by_schema = {v["h1"]: table_columns(schema) for v in variants if v["row_schema"]
                         for schema in [parse_json_schema(v["row_schema"])] if schema}
            columns = _current_columns(list(_merge_columns(list(by_schema.values()))), renames, dropped)
            current = _existing_columns(spark, tid, properties) if exists else []
            connect_types = _connect_types(declared, variants, fmt)
            known = _current_columns(list(_merge_columns([current, _declared_columns(declared, connect_types)])),
                                     renames, dropped)
            if not columns:
                columns = list(known)
            else:
                # A message type without precision (DRS's bare `decimal`) defers to the DDL's or the table's.
                precise = {c.name: c for c in known}
                columns = [precise[c.name] if c.data_type == BARE_DECIMAL and c.name in precise else c
                           for c in columns]
            # A column added with a constant DEFAULT exists at once: its default fills the older rows (apply).
            present = {c.name.lower() for c in columns}
            defaulted = [declared.columns[d.column] for d in declared.defaults if d.column in declared.columns]
            columns += [c for c in _current_columns(defaulted, renames, dropped) if c.name.lower() not in present]
            columns, spellings = _fold_case(columns, [c.name for c in known])
            columns = _decoded_by_schema(columns, {h: _current_columns(cs, renames, dropped)
                                                   for h, cs in by_schema.items()})
            names = {c.name.lower() for c in columns}
            untyped = sorted({renames.get(n.lower(), n) for v in variants for n in (v["untyped_names"] or [])
                              if n.lower() not in dropped and renames.get(n.lower(), n).lower() not in names})
            if untyped:
                texts = parsed.where((F.col("table_id") == tid) & (F.col("status") == "ok")).select(
                    F.coalesce("after_text", "before_text").alias("value")).where(F.col("value").isNotNull())
                sample = next((v["sample"] for v in variants if v["sample"]), None)
                inferred = _current_columns(_infer_columns(spark, texts, sample), renames, dropped)
                columns += [c for c in inferred if c.name in untyped]
                # A VariableScaleDecimal without its schema is recorded as one, so later batches read it by its
                # digits too: the column is text, and its JSON text would match no row of it (a key's update or
                # delete would miss the row).
                connect_types.update({c.name: dict(_VARIABLE_SCALE_SPEC) for c in inferred
                                      if c.name in untyped and c.encoding == _VARIABLE_SCALE_SPEC["name"]})
                # Images may spell an untyped column two ways (Debezium's Informix example: `before.id`, `after.ID`):
                # one column (inference may or may not have kept both spellings), read from either.
                columns, folded = _fold_case(columns, [c.name for c in known])
                spelled = {c.name.lower(): c.name for c in columns}
                spellings.update({**folded, **{n: spelled[n.lower()] for n in untyped
                                               if n.lower() in spelled and spelled[n.lower()] != n}})
            # Images without a schema that spell a known column another way (the lake table's `V`, a later
            # batch's `v`; an update's `before.id` beside `after.ID`): read from that spelling too.
            spelled = {c.name.lower(): c.name for c in columns}
            spellings.update({m: spelled[m.lower()] for v in variants
                              for n in [*(v["untyped_names"] or []), *(v["before_names"] or [])]
                              for m in [renames.get(n.lower(), n)] if n.lower() not in dropped and m not in spellings
                              and spelled.get(m.lower(), m) != m})
        except SchemaError as exc:
            problems[tid] = f"table {tid}: {exc}"
            continue
        table_types = {c.name: c.data_type for c in current}
        columns = [_as_table_type(c, table_types.get(c.name)) for c in columns]
        conflict = next((r for c in columns if c.name in table_types
                         for r in [incompatibility(c.name, table_types[c.name], c.data_type)] if r), None)
        if conflict:
            problems[tid] = f"table {tid}: {conflict}"
            continue
        key: list[str] = list(keys.override_for(tid))
        for v in variants if not key else ():
            key = key_columns(parse_json_schema(v["key_schema"]), parse_json_schema(v["key_text"]))
            if key:
                break
        # Messages of the batch whose pkNames differ (an ALTER TABLE between them changed the primary key: `DROP
        # PRIMARY KEY, ADD PRIMARY KEY (id, region)`): the batch is keyed by all of their columns, in order. Each
        # key's rows are distinct under it, and a canal-family image carries the whole row, so no change is read
        # as another row's (keyed by the first pkNames alone, `(1, 'b')` after the ALTER overwrote `(1, 'a')`).
        if key and not keys.override_for(tid):
            for v in variants:
                names = _pk_names(parse_json_schema(v["key_schema"]))
                key += [n for n in names if n.lower() not in {k.lower() for k in key}]
        key = [renames.get(k.lower(), k) for k in key] or list(declared.key) or list(keys.for_table(tid)) \
            or (key_columns_of(spark, tid) if exists else []) or list(declared.described_key)
        spelled = {c.name.lower(): c.name for c in columns}
        key = list(dict.fromkeys(spelled.get(k.lower(), k) for k in key))
        if not key:
            unreadable = (unread or {}).get(tid)
            # A message key with no fields (dtle's for a table without a primary key: `"payload": {}`).
            empty_key = any((v["key_text"] or "").replace(" ", "") == "{}" for v in variants)
            # A message key that names no columns: Kafka's StringConverter writes a Struct key as `Struct{id=1}`.
            plain_key = next((v["key_text"] for v in variants
                              if v["key_text"] and not v["key_text"].lstrip().startswith("{")), None)
            if empty_key:
                why = ("its message key has no columns (the source table has no primary key), and no pkNames or "
                       "CREATE TABLE names one")
            elif plain_key is not None:
                why = (f"its message key is not a JSON object ({json.dumps(plain_key[:80])}; a string converter "
                       "writes a key so, the JSON converter names the key's columns), and no pkNames or CREATE "
                       "TABLE names one")
            else:
                why = "no message key, pkNames or CREATE TABLE names one"
            problems[tid] = (
                f"table {tid} has no primary key: " + why
                + f"; declare one with --key {tid}=COL[,COL...] (or `key:` in the source config's `overrides:` "
                "for the table)"
                + (f"; the batch's CREATE TABLE of it could not be read ({unreadable})" if unreadable else "")
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
        unsupported = _unsupported_column_name([c.name for c in columns])
        if unsupported:
            problems[tid] = f"table {tid}: {unsupported}"
            continue
        # A renamed column is read from its old names too, as the images spell them: the history's are in lower case.
        image_names = {*(c.name for cs in by_schema.values() for c in cs),
                       *(n for v in variants for n in [*(v["untyped_names"] or []), *(v["before_names"] or [])])}
        aliases = {**{old: spelled[new.lower()] for old in {*renames, *image_names}
                      for new in [renames.get(old.lower())] if new and new.lower() in spelled}, **spellings}
        recorded = tuple((n, json.dumps(connect_types[n], sort_keys=True)) for n in sorted(names & set(connect_types)))
        # The table's columns no image of the batch lists (every update of the batch left them out) count too, where
        # the lake follows the source's DDL: under `ignore` it may keep a column the source dropped, which images
        # no longer carry (null from then on, as before).
        follows_ddl = (policies or DdlPolicies()).for_table(tid) == "evolve"
        unlisted = [c for c in known if c.name.lower() not in {n.lower() for n in names}] if follows_ddl else []
        typings[tid] = TableTyping(tuple(columns), tuple(key), tuple(aliases.items()),
                                   partial_images=_partial_images(variants, [*columns, *unlisted], aliases),
                                   connect_types=recorded)
        if owner:
            owners[tid] = owner
    return typings, problems, idle, malformed, owners


RESERVED_COLUMNS = frozenset({
    # Iceberg's metadata columns: MERGE cannot tell a data column of the name from them
    "_pos", "_file", "_spec_id", "_partition", "_deleted",
    # the columns apply works with beside a table's own (cdclake.apply)
    "_unavailable", "_patch", "_filled", "_rn", "_again", "_maybe_again", "_tomb_position", "_stored_live",
    "_stored_position", "_run_last", "_run_deletes",
})
"""Column names (compared in lower case) a lake table cannot have, beside names starting ``_cdc_`` (bookkeeping)."""


def _partial_images(variants: list[Any], columns: list[ColumnType], aliases: dict[str, str]
                    ) -> tuple[tuple[int, tuple[str, ...], tuple[tuple[str, tuple[str, ...]], ...]], ...]:
    """For canal-family schemas (``mysqlType``) that leave some of the table's columns out: the schema's hash, the
    columns none of its images carry, and those some of its images carry (:attr:`TableTyping.partial_images`)."""
    found = []
    names_of: dict[str, set[str]] = defaultdict(set)  # column -> its names in images, in lower case
    for c in columns:
        names_of[c.name.lower()].add(c.name.lower())
    for old, new in aliases.items():
        names_of[new.lower()].add(old.lower())
    for v in variants:
        if not (v["row_schema"] or "").startswith(SQLTYPES_SCHEMA_PREFIX):
            continue
        sqltypes = (parse_json_schema(v["row_schema"]) or {}).get("sqltypes")
        types = sqltypes.get("types") if isinstance(sqltypes, dict) else None
        if not isinstance(types, dict):  # a message whose mysqlType is not a map names no columns
            continue
        typed = {n.lower() for n in types if isinstance(n, str)}
        carried = {n.lower() for n in v["untyped_names"] or () if isinstance(n, str)}
        missing, unlisted = [], []
        for c in columns:
            spellings = names_of[c.name.lower()]
            if spellings & typed:
                continue
            if spellings & carried:
                unlisted.append((c.name, tuple(sorted(spellings))))
            else:
                missing.append(c.name)
        if (typed or carried) and (missing or unlisted):
            found.append((int(v["h1"]), tuple(missing), tuple(unlisted)))
    return tuple(found)


def _connect_types(declared: TableDefinition, variants: list[Any], fmt: str) -> dict[str, dict[str, Any]]:
    """Column -> the Connect field schema its values are written in: the batch's message schemas (later ones win),
    else, for Debezium messages, what Debezium's MySQL connector makes of the type the batch's DDL declares."""
    found: dict[str, dict[str, Any]] = {}
    if fmt == "debezium":
        for name, (dialect, type_text) in declared.sql_types.items():
            spec = debezium_mysql_field(type_text) if dialect == "mysql" else None
            if spec:
                found[name] = spec
    for v in variants:
        schema = parse_json_schema(v["row_schema"])
        row = envelope_row_schema(schema) if schema and "fields" in schema else None
        if row:
            found.update(encoded_fields(row))
    return found


def _declared_columns(declared: TableDefinition, connect_types: dict[str, dict[str, Any]]) -> list[ColumnType]:
    """The DDL's columns, decoded as their Connect types where those are known (a Debezium message without its
    schema writes a MySQL ``datetime`` as milliseconds, which the SQL type's text decoder does not read). A column
    Debezium writes as a struct (a MySQL ``geometry``: ``{wkb, srid}``) takes the struct's type, its JSON text."""
    def typed(c: ColumnType) -> ColumnType | None:
        spec = connect_types.get(c.name)
        if spec is None:
            return None
        if str(spec.get("type", "")).lower() == "struct":
            return column_type({**spec, "field": c.name})
        return _typed_by_connect(c.name, spec, c.data_type)

    return [typed(c) or c for c in declared.columns.values()]


def _unsupported_column_name(names: list[str]) -> str | None:
    """Why a table with these columns cannot be written (a column named like one apply adds, or with a dot,
    which Spark reads as a nested field), or None."""
    lowered = {name.lower() for name in names}
    for name in names:
        low = name.lower()
        if "." in name:
            return (f"column {name!r} has a dot in its name, which cdclake cannot write yet (Spark reads it as a "
                    "nested field); rename it at the source or exclude it from capture, then replay")
        if low in RESERVED_COLUMNS or low.startswith("_cdc_") or (low.startswith("_prev_") and low[6:] in lowered):
            return (f"column {name!r} has a name cdclake reserves (Iceberg's metadata columns, its bookkeeping "
                    "`_cdc_*` and working columns: see README, Known limits); rename it at the source or exclude it "
                    "from capture, then replay")
    return None


def _decoded_by_schema(columns: list[ColumnType], by_schema: dict[int, list[ColumnType]]) -> list[ColumnType]:
    """Columns that the batch's schemas write in more than one encoding (a Debezium Decimal whose scale changed,
    ``Timestamp`` millis then ``MicroTimestamp`` micros after a precision change) decode each message's value by
    its own schema (``by_schema``: the columns of each row-schema hash), then convert it to the column's type
    exactly: one decoder for all would read the other schema's values wrongly."""
    spellings: dict[str, list[tuple[int, ColumnType]]] = defaultdict(list)
    for row_hash, schema_columns in by_schema.items():
        for column in schema_columns:
            spellings[column.name.lower()].append((row_hash, column))
    out = []
    for column in columns:
        options = tuple(spellings.get(column.name.lower(), ()))
        if len({c.encoding for _, c in options}) < 2:
            out.append(column)
            continue

        # A Decimal of one schema has its all-digit numbers marked (mark_json_number) for the column: the other
        # schemas' decoders read them unmarked.
        decimal = next((c.encoding for _, c in options if c.encoding.startswith(CONNECT_DECIMAL)), "")

        def own_text(text: Column, encoding: str, marked: bool = bool(decimal)) -> Column:
            return unmark_json_number(text) if marked and not encoding.startswith(CONNECT_DECIMAL) else text

        def convert(text: Column, options: tuple[tuple[int, ColumnType], ...] = options,
                    into: DataType = column.data_type, fallback: Converter = column.convert,
                    fallback_encoding: str = column.encoding) -> Column:
            row_hash = F.xxhash64(F.col("row_schema"))
            value = fallback(own_text(text, fallback_encoding))
            for schema_hash, own in options:
                decoded = own.convert(own_text(text, own.encoding))
                if own.data_type != into:
                    decoded = _exact_cast(decoded, own.data_type, into)
                value = F.when(row_hash == F.lit(schema_hash), decoded).otherwise(value)
            return value

        out.append(replace(column, convert=convert, encoding=column.encoding if column.encoding.startswith(
            CONNECT_DECIMAL) else decimal or column.encoding))
    return out


_NUMERIC = (ByteType, ShortType, IntegerType, LongType, FloatType, DoubleType, DecimalType)
_DATETIME = (DateType, TimestampType, TimestampNTZType)


def _exact_cast(value: Column, source: DataType, target: DataType) -> Column:
    """``value`` (of type ``source``) as ``target`` if nothing is lost (it casts back to itself), else null: a failed
    cast, whose change is quarantined. Types Spark cannot cast between (a date into a bigint) never convert."""
    castable = (isinstance(target, StringType) or (isinstance(source, _NUMERIC) and isinstance(target, _NUMERIC))
                or (isinstance(source, _DATETIME) and isinstance(target, _DATETIME)))
    if not castable:
        return F.lit(None).cast(target)
    return F.when(value.cast(target).cast(source) == value, value.cast(target))


_DECIMAL_TEXTS = ("io.debezium.data.VariableScaleDecimal", "org.apache.kafka.connect.data.Decimal")
"""Connect encodings of decimals that cdclake types as their exact text (:mod:`cdclake.formats.connect`)."""


def _as_table_type(column: ColumnType, table_type: DataType | None) -> ColumnType:
    """A decimal column arriving with more fraction digits than the table's column, or an integer column arriving
    for a decimal one (:func:`decimal_target`), typed as the table's: a value converts only if nothing is lost
    (``2.3000`` -> ``2.30``, ``1004`` -> ``1004`` in ``decimal(9,0)``), else it is null, a failed cast whose change
    is quarantined with the value and the column type. So is a decimal that arrives as its exact text (Debezium's
    ``VariableScaleDecimal``: Oracle ``NUMBER`` without precision, which its CREATE TABLE made a decimal column)."""
    if (isinstance(table_type, DecimalType) and isinstance(column.data_type, StringType)
            and column.encoding.startswith(_DECIMAL_TEXTS)):
        def exact(text: Column, arrived: Converter = column.convert, into: DecimalType = table_type) -> Column:
            # The decoded text is plain notation (``-123.45``); it is read twice, not through decimal_from_text's
            # checks, which would copy the decoder's large expression a dozen times into the plan.
            value = arrived(text)
            fits_scale = value.rlike(rf"^-?\d+(?:\.\d{{0,{into.scale}}}0*)?$")
            return F.when(fits_scale, value.cast(into))

        return replace(column, data_type=table_type, convert=exact)
    if (isinstance(table_type, (DoubleType, FloatType)) and isinstance(column.data_type, StringType)
            and column.encoding.startswith(_DECIMAL_TEXTS)):
        # A floating-point column (Oracle FLOAT by its CREATE TABLE) whose events carry the value's exact text:
        # the column's nearest value, as a floating-point column holds every value.
        def approximate(text: Column, arrived: Converter = column.convert, into: DataType = table_type) -> Column:
            return arrived(text).cast(into)

        return replace(column, data_type=table_type, convert=approximate)
    target = decimal_target(table_type, column.data_type) if table_type is not None else None
    if target is None:
        return column

    def convert(text: Column, arrived: Converter = column.convert, source: DataType = column.data_type,
                into: DecimalType = target) -> Column:
        return _exact_cast(arrived(text), source, into)

    return replace(column, data_type=target, convert=convert)


def _variant_problem(variant: Any) -> str | None:
    """Why the row and key schemas of one group of a table's messages cannot be read (a Connect type cdclake does
    not map, a field of an unexpected JSON type), or None. Only those messages are quarantined; the table's
    messages with other schemas go on."""
    try:
        schema = parse_json_schema(variant["row_schema"])
        columns = table_columns(schema) if schema else []
        clash = _case_clash(columns)
        if clash:
            return clash
        key_columns(parse_json_schema(variant["key_schema"]), parse_json_schema(variant["key_text"]))
    except SchemaError as exc:
        return str(exc)
    return None


def _malformed_reason(malformed: dict[Variant, str]) -> Column:
    """Per parsed record: the reason its variant is quarantined (:func:`_resolve_tables`), else null."""
    reason = F.lit(None).cast("string")
    row_hash, key_hash, spelling = F.xxhash64("row_schema"), F.xxhash64("key_schema"), _spelling()
    for (tid, h1, h2, name), why in malformed.items():
        reason = F.when((F.col("table_id") == tid) & (row_hash == F.lit(h1)) & (key_hash == F.lit(h2))
                        & spelling.eqNullSafe(F.lit(name).cast("string")), F.lit(why)).otherwise(reason)
    return reason


def _remember_truncates(parsed: DataFrame, idle: dict[str, str], *, batch_id: str) -> None:
    """A truncate of a table the lake does not have yet still raises its truncate watermark
    (:mod:`cdclake.tombstones`): changes older than it that arrive in a later batch (delivered out of order) are
    stale when they would create the table."""
    if not idle:
        return
    cuts = (parsed.where((F.col("status") == "ok") & F.col("table_id").isin(*idle) & (F.col("op") == "t"))
            .groupBy("table_id")
            .agg(F.max(position(F.col("source_pos"), F.lit(batch_id), F.col("file_index"), F.col("index"),
                                F.col("row_index"))).alias("cut"))
            .collect())
    for row in cuts:
        tombstones.record_truncate(parsed.sparkSession, row["table_id"], row["cut"])
        log.info("table %s is not in the lake: its truncate at %s is kept as its watermark", row["table_id"],
                 row["cut"])


def _stage_table(parsed: DataFrame, raw: DataFrame, typing: TableTyping, tid: str, path: Path,
                 rejected: list[DataFrame], *, batch_id: str, source: str, fmt: str) -> int:
    """Type one table's records and write them to ``path`` in one pass; rows that fail (no key value, a value that
    does not convert) are written too, with their :data:`REJECTED` reason, and added to ``rejected`` from the
    written files. Returns the number of staged records."""
    spark = parsed.sparkSession
    records = canonical_records(
        parsed.where((F.col("status") == "ok") & (F.col("table_id") == tid))
        .select("*", *[F.col(c).alias(f"_q_{c}") for c in quarantine.PASSTHROUGH]),
        typing, batch_id=batch_id, source=source, fmt=fmt,
    )
    missing_key = f"missing primary-key value (key columns: {', '.join(typing.key)})"
    plain_key = (f"{missing_key}: no row image has it, and the message key is not a JSON object (a string "
                 "converter writes a key so; the JSON converter names the key's columns)")
    reason = (F.when(~F.col("_key_ok") & F.col("_key_plain"), F.lit(plain_key))
              .when(~F.col("_key_ok"), F.lit(missing_key)).otherwise(F.col("_cast_error")))
    records = records.select("*", reason.alias(REJECTED))
    # No filter between the typing and the write: Spark would push it below the typing and run every decoder
    # twice. Where a row is staged, its quarantine columns are null (nothing to store).
    rejects_only = [F.when(F.col(REJECTED).isNotNull(), F.col(f"_q_{c}")).alias(f"_q_{c}")
                    for c in quarantine.PASSTHROUGH]
    keep = [c for c in records.columns if not c.startswith("_")]
    records.select(*keep, REJECTED, *rejects_only).write.mode("overwrite").parquet(str(path))
    written = spark.read.parquet(str(path))
    tally = written.agg(F.count_if(F.col(REJECTED).isNull()).alias("good"),
                        F.count_if(F.col(REJECTED).isNotNull()).alias("bad")).first()
    if tally["bad"]:
        rejected.append(_restore_raw_text(raw, (
            written.where(F.col(REJECTED).isNotNull())
            .dropDuplicates(["_q_input", "_q_index"])
            .select(*[F.col(f"_q_{c}").alias(c) for c in quarantine.PASSTHROUGH], F.col(REJECTED).alias("reason"))
        )))
    return int(tally["good"])


def read_staged(spark: SparkSession, path: Path) -> DataFrame:
    """A table's staged canonical records (rows normalize rejected, kept in the same files, left out)."""
    staged = spark.read.parquet(str(path))
    if REJECTED not in staged.columns:  # staged before rejected rows were kept with the rest, or by hand (tests)
        return staged
    return staged.where(F.col(REJECTED).isNull()).select(*[c for c in staged.columns if not c.startswith("_")])


def _restore_raw_text(raw: DataFrame, rejected: DataFrame) -> DataFrame:
    """Rejected row changes with their raw key and value, fetched back from the raw records by location."""
    texts = raw.select("input", "index", F.col("key").alias("_raw_key"), F.col("value").alias("_raw_value"))
    return (rejected.join(texts, ["input", "index"], "left")
            .withColumn("key", F.col("_raw_key")).withColumn("value", F.col("_raw_value"))
            .drop("_raw_key", "_raw_value"))


def _apply_ddl(spark: SparkSession, parsed: DataFrame, policies: DdlPolicies,
               earlier: Callable[[tuple[str, ...]], str | None]) -> tuple[DataFrame, Outcome]:
    """Interpret the batch's DDL records (driver side) and put their outcomes back into the parsed records.

    A TRUNCATE or DROP TABLE without a source position of its own (canal-format DDL: CKafka's has ``id`` 0) is
    ordered by its table's row change next to it in the batch; without one, after the table's last change in the
    source's earlier batches (``earlier(table_ids)``, only when needed). The table's changes under the names it
    had before renames (in earlier batches, or by the batch's statements before this one) count as its own."""
    ddl_rows = [r.asDict() for r in parsed.where(F.col("status") == "ddl").collect()]
    if not ddl_rows:
        return parsed, Outcome()
    named: dict[str, list[str]] = {}

    def lake_tables(namespace: str) -> list[str]:  # DROP DATABASE: the lake's tables and those the batch's rows name
        if "rows" not in named:  # looked up once, only for a batch that drops a database
            named["rows"] = [r["table_id"] for r in parsed.where((F.col("status") == "ok") & F.col("table_id")
                                                                 .isNotNull()).select("table_id").distinct().collect()]
        return sorted({*tables_in(spark, namespace), *(t for t in named["rows"] if t.startswith(f"{namespace}."))})

    lake_history: list[ddl_history.History] = []

    def history() -> ddl_history.History:  # loaded once, only for a batch with a statement that needs it
        if not lake_history:
            lake_history.append(ddl_history.load(spark))
        return lake_history[0]

    def lake_holds(tid: str) -> bool:  # CREATE TABLE IF NOT EXISTS: a lake table the source has not dropped
        return table_exists(spark, tid) and tid not in history().gone

    outcome = interpret(ddl_rows, policies, lake_tables=lake_tables, lake_holds=lake_holds)

    def former_ids(record: dict[str, Any]) -> tuple[str, ...]:
        names = [record["table_id"]]
        for change in reversed(outcome.changes):  # renamed by the batch's statements before this one
            if change.kind == "rename_table" and change.new == names[-1] and _landed_earlier(
                    change.position, record, outcome):
                names.append(change.old)
        return tuple(dict.fromkeys(n for name in names for n in (name, *history().former_ids(name))))
    for definition in outcome.tables.values():
        if definition.like and table_exists(spark, definition.like):  # CREATE TABLE t LIKE s, s in the lake only
            copied = {c.name: c for c in _existing_columns(spark, definition.like)}
            definition.columns = {**copied, **definition.columns}
            if definition.like_key and not definition.key:
                definition.key = tuple(key_columns_of(spark, definition.like))
    for record in outcome.records:
        record["row_schema"] = None  # it held the DDL's context, not a row schema
        # The statement's text spells the table as its author typed it (MySQL's lower_case_table_names=1 keeps
        # that in the binlog): it reaches the lake table by its id.
        record["table_name"] = _ANY_SPELLING
        if record["status"] == "ok" and record.get("source_pos") is None:
            names = former_ids(record)
            record["source_pos"] = _ddl_position(parsed, record, names, earlier)
            if record["source_pos"] is None and not any(table_exists(spark, name) for name in names):
                record.update(status="skip", reason=_NOTHING_TO_TRUNCATE)
            elif record["source_pos"] is None:
                record.update(status="quarantine", reason=(
                    "TRUNCATE (or DROP TABLE) without a source position, and no row change to order it by (in its "
                    "input file; alone in a landed batch, in the source's earlier batches): land it together with "
                    "the changes around it"))
    rewritten = spark.createDataFrame(outcome.records, schema=parsed.schema)
    return parsed.where(F.col("status") != "ddl").unionByName(rewritten), outcome


_SNAPSHOT_READS = ("true", "first", "first_in_data_collection", "last", "last_in_data_collection")
"""``snapshot`` values of a Debezium snapshot's reads (not of an incremental snapshot's)."""


def _after_snapshot(started: dict[int, list[tuple[int, str]]], earlier: str | None) -> Column:
    """``source_pos`` with PostgreSQL changes streamed without a last commit LSN (:data:`AFTER_SNAPSHOT`) placed
    just above the snapshot they follow: their transaction is the first Debezium streamed after that snapshot, so it
    committed after it, whatever LSNs its changes were written at. The change's own LSN stays the second segment
    (their order within the transaction).

    ``started`` (:func:`_snapshot_starts`) holds the batch's snapshots by file. A change follows the snapshot whose
    reads last started before it in its file (a batch may hold several: ``snapshot.mode=always``); before every read
    of its file, the batch's newest snapshot older than those reads, else ``earlier`` (the newest earlier batch's);
    in a file without reads, the batch's oldest snapshot, else ``earlier``."""
    marked = F.col("source_pos").endswith(AFTER_SNAPSHOT)
    unmarked = F.expr(f"substring(source_pos, 1, length(source_pos) - {len(AFTER_SNAPSHOT)})")
    positions = {p for reads in started.values() for _, p in reads}
    if not positions and earlier is None:
        return F.when(marked, unmarked).otherwise(F.col("source_pos"))

    def above(position: str | None) -> Column:
        return F.lit(f"{int(position[:16], 16) + 1:016x}" if position else None)

    branches: list[tuple[Column, Column]] = []
    for file_index, reads in started.items():
        in_file = F.col("file_index") == file_index
        for first, position in sorted(reads, reverse=True):  # the latest start first: a CASE takes the first branch
            branches.append((in_file & (F.col("index") > first), above(position)))
        oldest = min(reads)[1]
        branches.append((in_file, above(max((p for p in positions if p < oldest), default=earlier))))
    bound = above(min(positions, default=earlier))
    if branches:
        cases = F.when(*branches[0])
        for condition, value in branches[1:]:
            cases = cases.when(condition, value)
        bound = cases.otherwise(bound)
    # greatest() passes over a null bound: a change that follows no snapshot the lake knows keeps its LSN.
    return F.when(marked, F.concat(F.greatest(F.substring(unmarked, 1, 16), bound),
                                   F.substring(unmarked, 17, 16))).otherwise(F.col("source_pos"))


def _snapshot_starts(parsed: DataFrame) -> dict[int, list[tuple[int, str]]]:
    """File index -> ``(index of its first read, position)`` of each snapshot read in that file of the batch."""
    reads = parsed.where((F.col("status") == "ok") & F.col("snapshot").isin(*_SNAPSHOT_READS)
                         & (F.length("source_pos") == 32))
    started: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for row in reads.groupBy("file_index", "source_pos").agg(F.min("index").alias("first")).collect():
        started[int(row["file_index"])].append((int(row["first"]), str(row["source_pos"])))
    return dict(started)


def _earlier_snapshot_position(settings: LakeSettings, source: str, batch_id: str) -> str | None:
    """The snapshot position (:func:`_after_snapshot`) the newest earlier batch of ``source`` that read a snapshot
    recorded in its staging marker, or None."""
    batches = list_batches(settings, source)
    for earlier in reversed(batches[:batches.index(batch_id)] if batch_id in batches else []):
        marker = staging_dir(settings, source, earlier) / STAGING_MARKER
        recorded = json.loads(marker.read_text()).get("snapshot_position") if marker.exists() else None
        if recorded:
            log.info("batch %s: the newest earlier snapshot is batch %s's (position %s); PostgreSQL changes streamed "
                     "without a last commit LSN that follow no snapshot of this batch are ordered after it", batch_id,
                     earlier, recorded)
            return str(recorded)
    return None


def _earlier_position(spark: SparkSession, settings: LakeSettings, source: str, batch_id: str, fmt: str,
                      table_ids: tuple[str, ...]) -> str | None:
    """The highest source position of a table's row changes (under any of ``table_ids``: its id and its ids before
    renames) in the newest earlier batch of ``source`` that has some.

    A message landed in a later batch came after the earlier batches' messages of its table (landing keeps the
    order of each Kafka partition, and a table's changes share one), so an unpositioned TRUNCATE at this position,
    with its batch id as the tie-break, follows them. The raw zone is immutable, so a re-run finds the same
    position. None for a batch of replayed quarantined messages: it was landed after batches that came later at
    the source (replayed batches are passed over for the same reason)."""
    if quarantine.is_replay_batch(settings, source, batch_id):
        return None
    normalizer = get_normalizer(fmt)
    batches = list_batches(settings, source)
    for earlier in reversed(batches[:batches.index(batch_id)] if batch_id in batches else []):
        if quarantine.is_replay_batch(settings, source, earlier):
            continue
        raw = spark.read.schema(RAW_SCHEMA).json(batch_raw_paths(settings, source, earlier))
        # Cached before the filter, as normalize_batch caches its parse: pushed into the parse, the filter would
        # be planned with every shape's expressions inlined into it (with --format auto, a plan too large for the
        # driver's memory).
        parsed = normalizer.parse(raw).select("status", "table_id", "source_pos").persist()
        try:
            row = (parsed.where((F.col("status") == "ok") & F.col("table_id").isin(*table_ids)
                                & F.col("source_pos").isNotNull())
                   .agg(F.max("source_pos")).first())
        finally:
            parsed.unpersist()
        if row is not None and row[0] is not None:
            log.info("batch %s: the unpositioned statement on %s is ordered after batch %s (position %s)",
                     batch_id, table_ids[0], earlier, row[0])
            return str(row[0])
    return None


def _replayed_since(spark: SparkSession, settings: LakeSettings, source: str, batch_id: str) -> DataFrame | None:
    """Where the messages that replay batches landed after ``batch_id`` run again were first landed
    (:data:`cdclake.quarantine.ORIGIN_HEADER`), or None without such batches. A batch run again after its
    quarantined messages were replayed does not quarantine those again."""
    batches = list_batches(settings, source)
    after = batches[batches.index(batch_id) + 1:] if batch_id in batches else []
    later = [b for b in after if quarantine.is_replay_batch(settings, source, b)]
    if not later:
        return None
    origin = F.from_json(F.col("headers")[quarantine.ORIGIN_HEADER], quarantine.ORIGIN_SCHEMA)
    return (spark.read.schema(RAW_SCHEMA).json([p for b in later for p in batch_raw_paths(settings, source, b)])
            .select(origin.alias("o")).where(F.col("o").isNotNull()).select("o.*"))


def _landed_earlier(location: str, record: dict[str, Any], outcome: Outcome) -> bool:
    """Whether the batch's statement at ``location`` (:func:`_landed_before`) was landed before ``record``; a
    statement with a source position counts as earlier."""
    uri, _, index = location.rpartition("#")
    file_indexes = [int(r["file_index"]) for r in outcome.records if r.get("input") == uri]
    if not uri or not index.isdigit() or not file_indexes:
        return True
    return (file_indexes[0], int(index)) < (int(record["file_index"]), int(record["index"]))


def _ddl_position(parsed: DataFrame, record: dict[str, Any], table_ids: tuple[str, ...],
                  earlier: Callable[[tuple[str, ...]], str | None]) -> str | None:
    """The source position of a DDL record without one: that of its table's row change next to it in its batch, in
    landing order (file, then message): the next one, else the previous one's, else that of the table's last
    change in the source's earlier batches (``earlier``). A position taken from a change before the statement gets
    :data:`AFTER_ROW_CHANGE`, unless changes at it keep arrival order (zeros, canal's ``es`` without an ``id``:
    :func:`~cdclake.formats.canal.arrival_ordered`). Only the table's own changes (under any of ``table_ids``: its
    id, then the ids it had before renames) order its statement: they share a Kafka partition, other tables' may
    lag behind in another one (a ``kcat -J`` file holds several)."""
    rows = parsed.where(F.col("table_id").isin(*table_ids) & F.col("source_pos").isNotNull()
                        & (F.col("status") == "ok"))
    file_index, index = F.lit(record["file_index"]), F.lit(record["index"])
    later = (F.col("file_index") > file_index) | ((F.col("file_index") == file_index) & (F.col("index") > index))
    after = rows.where(later).orderBy("file_index", "index").select("source_pos").first()
    if after is not None:
        return str(after[0])
    before = rows.where(~later).orderBy(F.desc("file_index"), F.desc("index")).select("source_pos").first()
    position_before = before[0] if before is not None else earlier(table_ids)
    if position_before is None or arrival_ordered(position_before):
        return position_before  # arrival order among changes at it: its own landing tail places the statement
    return position_before + AFTER_ROW_CHANGE


def _default_fills(spark: SparkSession, parsed: DataFrame, defaults: list[ColumnDefault], typing: TableTyping,
                   table_id: str, *, batch_id: str,
                   earlier: Callable[[tuple[str, ...]], str | None]) -> list[dict[str, str]]:
    """The rows an ``ALTER TABLE .. ADD .. DEFAULT`` fills (:mod:`cdclake.apply`): per default, the column, the
    value as text of the column's type, its type, and the statement's full position (rows written before it get
    the value where the column is null). ``DEFAULT CURRENT_TIMESTAMP`` is the statement's time (a ``datetime``
    column: its wall-clock time in the source's zone). A default that does not convert is logged, not filled."""
    by_name = {c.name.lower(): c for c in typing.columns}
    wanted: list[tuple[ColumnType, str, Column]] = []
    for default in defaults:
        column, record = by_name.get(default.column.lower()), default.record
        at = _statement_position(parsed, record, table_id, batch_id=batch_id, earlier=earlier)
        if column is None or at is None or isinstance(column.data_type, BinaryType):
            log.warning("DDL %r: the default of %s is not filled into older rows (%s)", record.get("ddl"),
                        default.column, "no position" if column is not None and at is None
                        else "not a column of the table" if column is None else "binary")
            continue
        if default.text != DEFAULT_NOW:
            value = column.convert(F.lit(default.text))
        elif isinstance(column.data_type, TimestampType):
            value = F.lit(record.get("source_ts")).cast(TimestampType())
        else:  # DATETIME / DATE: the source's wall-clock time
            value = F.from_utc_timestamp(F.lit(record.get("source_ts")).cast(TimestampType()),
                                         source_zone()).cast(column.data_type)
        wanted.append((column, default.text, F.struct(value.cast("string").alias("value"), at.alias("before"))))
    if not wanted:
        return []
    row = spark.range(1).select(*[v.alias(f"d{i}") for i, (_, _, v) in enumerate(wanted)]).first()
    fills = []
    for i, (column, text, _) in enumerate(wanted):
        value, before = row[f"d{i}"]["value"], row[f"d{i}"]["before"]
        if value is None:
            log.warning("column %s: its DEFAULT %r does not convert to %s: not filled into older rows", column.name,
                        text, column.data_type.simpleString())
            continue
        fills.append({"column": column.name, "value": value, "type": column.data_type.simpleString(),
                      "before": before})
    return fills


def _statement_position(parsed: DataFrame, record: dict[str, Any], table_id: str, *, batch_id: str,
                        earlier: Callable[[tuple[str, ...]], str | None]) -> Column | None:
    """A DDL record's full position, as a constant column: its source position, else :func:`_ddl_position`'s
    (None without one), then its place in the batch."""
    source_pos = record.get("source_pos") or _ddl_position(parsed, record, (table_id,), earlier)
    if source_pos is None:
        return None
    return position(F.lit(source_pos), F.lit(batch_id), F.lit(record["file_index"]), F.lit(record["index"]),
                    F.lit(record["row_index"]))


def _cleared_columns(spark: SparkSession, parsed: DataFrame, declared: TableDefinition | None, typing: TableTyping,
                     table_id: str, *, batch_id: str,
                     earlier: Callable[[tuple[str, ...]], str | None]) -> TableTyping:
    """``typing`` with the columns the batch dropped and added again (``DROP COLUMN v`` .. ``ADD COLUMN v``) in
    :attr:`TableTyping.cleared`: at the source, the rows written before the drop lost their value, and the new
    column starts empty (or with its DEFAULT, which apply fills in where it is null)."""
    if declared is None or not declared.dropped_at:
        return typing
    dropped = {name.lower(): record for name, record in declared.dropped_at.items()}
    cleared = []
    for column in typing.columns:
        record = dropped.get(column.name.lower())
        if record is None:
            continue
        at = _statement_position(parsed, record, table_id, batch_id=batch_id, earlier=earlier)
        if at is None:
            log.warning("DDL %r: no position, so values of %s written before it are kept", record.get("ddl"),
                        column.name)
            continue
        cleared.append((column.name, spark.range(1).select(at.alias("at")).first()["at"]))
    return replace(typing, cleared=tuple(cleared)) if cleared else typing


def _route_tables(parsed: DataFrame, outcome: Outcome, history: History, source: str,
                  batch_id: str) -> tuple[DataFrame, Outcome]:
    """Changes (and DDL knowledge) that name a renamed table, moved to the table's current id; changes of a name
    taken again that are older (by source position; in the ``CREATE``'s own batch, a tie by arrival order; without
    source positions, by landing order) than its new ``CREATE`` go where the old table went."""
    if not history.tables and not history.reused:
        return parsed, outcome
    routed = F.col("table_id")
    if history.tables:
        moves = {old: history.route(old) for old in history.tables}
        mapping = F.create_map(*[F.lit(x) for pair in moves.items() for x in pair])
        routed = F.coalesce(F.try_element_at(mapping, F.col("table_id")), F.col("table_id"))
    for tid, (created, older_to) in history.reused.items():
        if created.source == source and created.is_source_position:
            older = F.col("source_pos") < F.lit(created.position)
            tail = _create_tail(outcome, tid, created.position) if created.batch_id == batch_id else None
            if tail is not None:  # `RENAME t TO u; CREATE TABLE t` within one canal second: the message order
                file_index, index = tail
                older = older | ((F.col("source_pos") == F.lit(created.position)) & (
                    (F.col("file_index") < F.lit(file_index))
                    | ((F.col("file_index") == F.lit(file_index)) & (F.col("index") < F.lit(index)))))
            routed = F.when((F.col("table_id") == tid) & older, F.lit(history.route(older_to))).otherwise(routed)
        elif created.source == source:  # no source position (CKafka's canal-format DDL): by landing order
            older = _landed_before(created.position, outcome) if created.batch_id == batch_id else F.lit(
                created.batch_id > batch_id)  # an older batch normalized again
            routed = F.when((F.col("table_id") == tid) & older, F.lit(history.route(older_to))).otherwise(routed)
    parsed = parsed.withColumns({
        "table_name": F.when(routed != F.col("table_id"), F.lit(_ANY_SPELLING)).otherwise(F.col("table_name")),
        "table_id": routed,
    })
    def owner(tid: str) -> str:
        """The table a definition of the batch's DDL describes: for a name taken again by a ``CREATE`` of an
        earlier batch, the table it named then when every statement of the batch about it is older than that
        ``CREATE`` (an older batch applied again: its columns are the dropped table's, not the new one's)."""
        created, older_to = history.reused.get(tid, (None, ""))
        if created is None or created.source != source or created.batch_id == batch_id:
            return tid
        if not created.is_source_position:  # CKafka's canal-format DDL: by batch
            return older_to if created.batch_id > batch_id else tid
        positions = [r.get("source_pos") for r in outcome.records if r.get("table_id") == tid]
        older = bool(positions) and all(p is not None and p < created.position for p in positions)
        return older_to if older else tid

    tables: dict[str, TableDefinition] = {}
    for tid, definition in outcome.tables.items():
        tables.setdefault(history.route(owner(tid)), definition)
    for tid, definition in outcome.dropped.items():  # dropped and created again in this batch: its older changes
        created, older_to = history.reused.get(tid, (None, ""))
        # A name dropped after it was taken again (`RENAME TABLE a TO b; DROP TABLE b`) is still gone: the dropped
        # definition is the table's own, and no earlier table of the name gets made from it.
        if created is not None and created.source == source and created.batch_id == batch_id \
                and tid not in history.gone:
            tables.setdefault(history.route(older_to), definition)
    stopped = {history.route(tid): why for tid, why in outcome.stopped.items()}
    return parsed, Outcome(tables, outcome.records, outcome.changes, stopped, outcome.dropped)


def _landed_before(location: str, outcome: Outcome) -> Column:
    """Whether a change was landed before the batch's statement at ``location`` (``input#index``, the position
    :mod:`cdclake.schema_changes` gives a statement without a source position): an earlier file of the batch, or
    an earlier message of its file."""
    uri, _, index = location.rpartition("#")
    file_indexes = [int(r["file_index"]) for r in outcome.records if r.get("input") == uri]
    if not index.isdigit() or not file_indexes:
        return F.lit(False)
    return (F.col("file_index") < F.lit(file_indexes[0])) | (
        (F.col("input") == F.lit(uri)) & (F.col("index") < F.lit(int(index))))


def _create_tail(outcome: Outcome, tid: str, source_pos: str) -> tuple[int, int] | None:
    """File and message index of the batch's last ``CREATE TABLE tid`` at ``source_pos``, if the batch has one."""
    tails = [(int(r["file_index"]), int(r["index"])) for r in outcome.records
             if r.get("reason") in (SKIP_CREATE, SKIP_CREATE_NO_COLUMNS) and r.get("table_id") == tid
             and r.get("source_pos") == source_pos]
    return max(tails) if tails else None


def normalize_batch(spark: SparkSession, settings: LakeSettings, *, source: str, batch_id: str, fmt: str,
                    keys: KeySpec | None = None, ddl_policies: DdlPolicies | None = None,
                    time_zone: str | None = None) -> "NormalizeResult":
    """Normalize one landed batch (idempotent: re-running replaces the batch's staging and quarantine rows).

    Args:
        spark: The session.
        settings: The lake.
        source: Source name.
        batch_id: A landed batch of that source.
        fmt: Format name (see :mod:`cdclake.formats`).
        keys: Declared primary keys for streams without keys.
        ddl_policies: Each table's DDL policy (default ``evolve``; see :mod:`cdclake.schema_changes`).
        time_zone: The zone of timestamp texts without an offset (canal's MySQL ``TIMESTAMP``, CKafka's ``TIME``;
            :func:`cdclake.formats.sqltypes.source_time_zone`); None: UTC.

    Returns:
        Staged records per table, quarantined count, skipped counts by reason, tables a DDL policy stopped.
    """
    with source_time_zone(time_zone):
        return _normalize_batch(spark, settings, source=source, batch_id=batch_id, fmt=fmt, keys=keys,
                                ddl_policies=ddl_policies)


def _normalize_batch(spark: SparkSession, settings: LakeSettings, *, source: str, batch_id: str, fmt: str,
                     keys: KeySpec | None, ddl_policies: DdlPolicies | None) -> "NormalizeResult":
    from cdclake.pipeline import NormalizeResult

    normalizer = get_normalizer(fmt)
    raw = spark.read.schema(RAW_SCHEMA).json(batch_raw_paths(settings, source, batch_id))
    # The cache keeps the raw key and value only of messages that are not row changes (the rest are most of the
    # data and are needed again only if they end up quarantined: _restore_raw_text fetches those).
    slim = normalizer.parse(raw)
    for column in ("key", "value"):
        slim = slim.withColumn(column, F.when(F.col("status") != "ok", F.col(column)))
    first = slim.persist()
    parsed = first
    try:
        policies = ddl_policies or DdlPolicies()
        earlier_positions: dict[tuple[str, ...], str | None] = {}

        def earlier(tids: tuple[str, ...]) -> str | None:  # looked up once per table, only where needed
            if tids not in earlier_positions:
                earlier_positions[tids] = _earlier_position(spark, settings, source, batch_id, fmt, tids)
            return earlier_positions[tids]

        parsed, ddl = _apply_ddl(spark, first, policies, earlier=earlier)
        history, refused = ddl_history.apply(spark, ddl.changes, source=source, batch_id=batch_id)
        parsed, ddl = _route_tables(parsed, ddl, history, source, batch_id)
        stops = ddl_stops.stopped(spark, source)
        # A table stopped by an earlier batch stays stopped while its policy is still `fail`.
        held = {tid: stop.hold_reason() for tid, stop in stops.items()
                if policies.for_table(tid) == "fail" and tid not in ddl.stopped}
        typings, problems, idle, malformed, owners = _resolve_tables(
            spark, parsed, keys or KeySpec(), ddl.tables, history, {**held, **refused, **ddl.stopped},
            ddl.unread_creates(), fmt, policies)
        _remember_truncates(parsed, idle, batch_id=batch_id)

        def earlier_renamed(tids: tuple[str, ...]) -> str | None:  # the ids the tables had before renames too
            return earlier(tuple(dict.fromkeys(n for tid in tids for n in (tid, *history.former_ids(tid)))))

        typings = {tid: _cleared_columns(spark, parsed, ddl.tables.get(tid), typing, tid, batch_id=batch_id,
                                         earlier=earlier_renamed)
                   for tid, typing in typings.items()}
        out = staging_dir(settings, source, batch_id)
        if out.exists():  # a re-run: replace the staging, but keep what data quality held back (cdclake.dq_hold)
            for entry in out.iterdir():
                if entry.name in _KEEP_ON_RENORMALIZE:
                    continue
                if entry.is_dir():
                    shutil.rmtree(entry)
                else:
                    entry.unlink()
        out.mkdir(parents=True, exist_ok=True)
        rejected: list[DataFrame] = [
            parsed.where(F.col("status") == "quarantine"),
        ]
        if malformed:  # before the table problems: a message is quarantined once, with its schema's reason
            unreadable = _malformed_reason(malformed)
            is_unreadable = (F.col("status") == "ok") & unreadable.isNotNull()
            rejected.append(_restore_raw_text(raw, (
                parsed.where(is_unreadable).dropDuplicates(["input", "index"]).withColumn("reason", unreadable))))
            parsed = parsed.where(~is_unreadable)
        grouped = parsed.groupBy("status", "reason", "table_id").agg(
            F.count(F.lit(1)).alias("count"),
            F.collect_set(F.when((F.col("status") == "ok") & (F.col("snapshot") == "last"), F.col("source_pos")))
            .alias("snapshot_ends"),
            F.collect_set(F.when((F.col("status") == "ok") & F.col("snapshot").isin(*_SNAPSHOT_READS)
                                 & (F.length("source_pos") == 32), F.col("source_pos")))
            .alias("snapshot_positions"),
            F.count_if(F.col("source_pos").endswith(AFTER_SNAPSHOT)).alias("after_snapshot")).collect()
        counts = {(r["status"], r["reason"], r["table_id"]): r["count"] for r in grouped}
        # Where a snapshot ended (Debezium's "last"): before Debezium 2.x it marks only the snapshot's last record,
        # of whichever table came last, and ends the snapshot of every table read at that position (apply).
        snapshot_ends = sorted({p for r in grouped for p in r["snapshot_ends"] or ()})
        snapshot_positions = {p for r in grouped for p in r["snapshot_positions"] or ()}
        snapshot_position = max(snapshot_positions, default=None)
        if any(r["after_snapshot"] for r in grouped):
            parsed = parsed.withColumn("source_pos", _after_snapshot(
                _snapshot_starts(parsed) if snapshot_positions else {},
                _earlier_snapshot_position(settings, source, batch_id)))
        # A CREATE TABLE the table could not be made from (no key known, a type conflict) is held with the table's
        # rows, and so are the ALTER TABLEs learned beside them, so a replay after the fix (e.g. a declared key)
        # makes the table as the stream describes it (an added column's DEFAULT fills the rows before it).
        holding = {tid for (status, reason, tid), n in counts.items()
                   if tid in problems and n and (status == "ok" or reason == SKIP_CREATE)}
        held_ddl_of = {(SKIP_CREATE, tid) for tid in problems} | {
            (reason, tid) for tid in holding for reason in (SKIP_ALTER, SKIP_ALTER_NO_COLUMN)}
        if problems:
            reason = F.lit(None).cast("string")
            for tid, why in problems.items():
                reason = F.when(F.col("table_id") == tid, F.lit(why)).otherwise(reason)
            held_ddl = (F.col("status") == "skip") & ((F.col("reason") == SKIP_CREATE) | (
                F.col("reason").isin(SKIP_ALTER, SKIP_ALTER_NO_COLUMN) & F.col("table_id").isin(*holding)))
            rejected.append(_restore_raw_text(  # one row per message, not per row of a multi-row message
                raw, parsed.where(((F.col("status") == "ok") | held_ddl) & F.col("table_id").isin(*problems))
                .dropDuplicates(["input", "index"]).withColumn("reason", reason)))
        staged: dict[str, int] = {}
        # Typing fuses every column's decoders (both images, the key, the failure checks) into one stage, whose
        # whole-stage generated method passes the JVM's 64 KB limit already for the benchmark's 8-column tables:
        # Spark would log the failed compile as an error and run the stage without whole-stage code generation.
        # Case-sensitive names while typing: an image struct may hold a column under two spellings (`k1`, `K1`;
        # TableTyping.aliases), read apart and folded into one column.
        with session_settings(spark, {WHOLE_STAGE_CODEGEN: "false", CASE_SENSITIVE: "true"}):
            for tid, typing in typings.items():
                staged[tid] = _stage_table(parsed, raw, typing, tid, out / tid, rejected,
                                           batch_id=batch_id, source=source, fmt=fmt)
        # Tables a snapshot ending here read in earlier batches: an empty change set each, whose apply reconciles.
        ended = {tid: _stage_snapshot_end(spark, tid, out / tid) for tid in open_snapshots.ended_by(
            spark, source, snapshot_ends, exclude={*typings, *stops, *problems})}
        staged.update({tid: 0 for tid in ended})
        skipped: dict[str, int] = defaultdict(int)
        if quarantine.is_replay_batch(settings, source, batch_id):  # where the messages were first landed
            rejected = [quarantine.with_origin(raw, frame) for frame in rejected]
        elif rejected and (replayed := _replayed_since(spark, settings, source, batch_id)) is not None:
            rejected, again = quarantine.without_replayed(rejected, replayed)
            if again:
                skipped[quarantine.REPLAYED] += again
        quarantined = quarantine.record(spark, rejected, source=source, batch_id=batch_id, fmt=fmt)
        for (status, reason, tid), n in counts.items():
            if status == "skip" and (reason, tid) not in held_ddl_of:
                skipped[reason] += n
            elif status == "ok" and tid in idle:
                skipped[idle[tid]] += n
        ddl_stops.record(spark, source,
                         stops={tid: (batch_id, why) for tid, why in ddl.stopped.items() if tid not in stops},
                         releases=[tid for tid in stops if tid in typings and policies.for_table(tid) != "fail"])
        with_changes = {tid for (status, _, tid), n in counts.items() if status == "ok" and n}
        stopped = {**{tid: why for tid, why in held.items() if tid in with_changes}, **ddl.stopped}
        fills = {tid: _default_fills(spark, parsed, ddl.tables[tid].defaults, typing, tid, batch_id=batch_id,
                                     earlier=earlier_renamed)
                 for tid, typing in typings.items() if tid in ddl.tables and ddl.tables[tid].defaults}
        (out / STAGING_MARKER).write_text(json.dumps({
            "tables": {tid: {"key": list(t.key), "columns": [c.name for c in t.columns],
                             **({"source_table": owners[tid]} if tid in owners else {}),
                             **({"defaults": fills[tid]} if fills.get(tid) else {}),
                             **({"connect_types": {n: json.loads(spec) for n, spec in t.connect_types}}
                                if t.connect_types else {}),
                             **({"snapshot_ends": snapshot_ends} if snapshot_ends else {})}
                       for tid, t in typings.items()}
            | {tid: {"key": key, "columns": columns, "snapshot_ends": snapshot_ends}
               for tid, (key, columns) in ended.items()},
            "format": fmt,
            **({"snapshot_position": snapshot_position} if snapshot_position else {}),
        }, indent=2))
        result = NormalizeResult(source, batch_id, dict(sorted(staged.items())), quarantined, dict(skipped),
                                 dict(sorted(stopped.items())))
        log.info("normalized batch %s of %r: %s", batch_id, source, result.to_dict())
        return result
    finally:
        first.unpersist()


def staged_tables(settings: LakeSettings, source: str, batch_id: str) -> dict[str, dict[str, Any]]:
    """Tables staged for a batch (from the staging marker), or {} when the batch was not normalized."""
    marker = staging_dir(settings, source, batch_id) / STAGING_MARKER
    if not marker.exists():
        return {}
    return json.loads(marker.read_text())["tables"]
