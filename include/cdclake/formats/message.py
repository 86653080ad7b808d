"""One pass over raw messages of any supported dialect: parse once, recognize the shape, map to parsed records.

Every message value is parsed by a single ``from_json`` with :data:`MESSAGE_SCHEMA`, the union of the fields of
all dialects (field names are matched case-sensitively, so canal's ``type`` and CKafka's ``TYPE`` coexist). Its
*shape* is then recognized from which fields are present (:class:`Shape`), and every parsed-record column is one
``CASE`` over the shapes. A format (``--format``) is the set of shapes it accepts; ``auto`` accepts all. Multi-row
messages (canal ``data[]``) are exploded once, with the row's index kept for ordering.

Outcome per message (``status``): ``ok`` (a row change), ``skip`` (recognized, not a change: counted by reason),
``ddl`` (a schema statement; :mod:`cdclake.normalize` interprets it on the driver, DDL is rare), or
``quarantine`` with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, StringType, StructField, StructType

from cdclake.formats.common import CORRUPT, FROM_JSON_OPTIONS, null_string, shorter_than, status
from cdclake.formats.sqltypes import source_zone
from cdclake.plans import ColumnPlan, cached_plan
from cdclake.quarantine import VALUE_NOT_JSON

SHAPE_COLUMNS = (
    "table_id", "table_name", "op", "source_pos", "source_ts", "snapshot",
    "key_text", "before_text", "old_text", "after_text", "row_schema", "key_schema", "ddl", "patch",
)
"""Columns a shape computes (see :data:`cdclake.formats.PARSED_COLUMNS`)."""

Rule = tuple[Column, Column, str]


@dataclass(frozen=True)
class Shape:
    """How to recognize and read one dialect's messages.

    Attributes:
        name: Shape name (``debezium``, ``debezium_ddl``, ``debezium_meta``, ``canal``, ``ckafka``, ``mongo``).
        detect: parsed message -> true when the message has this shape.
        columns: (parsed message, row image text or null, row index) -> an expression per :data:`SHAPE_COLUMNS`.
        rules: (parsed message, row, columns) -> ordered (condition, reason, status) rules; first match wins.
        rows: parsed message -> array of row-image texts, for multi-row dialects.
        prepare: parsed message -> intermediate columns computed once before the per-column CASEs.
    """

    name: str
    detect: Callable[[Column], Column]
    columns: Callable[[Column, Column, Column], dict[str, Column]]
    rules: Callable[[Column, Column, dict[str, Column]], list[Rule]]
    rows: Callable[[Column], Column] | None = None
    prepare: Callable[[Column], dict[str, Column]] = field(default=lambda j: {})


def _strings(*names: str) -> list[StructField]:
    return [StructField(n, StringType()) for n in names]


_SOURCE = StructType(_strings(
    "version", "connector", "name", "server", "ts_ms", "ts_us", "ts_ns", "ts_sec", "snapshot", "db", "schema",
    "table", "txId", "lsn", "xmin", "sequence", "change_lsn", "commit_lsn", "event_serial_no",
    "file", "pos", "row", "gtid", "server_id", "thread", "commit_ts", "collection", "scn", "commit_scn",
    "rs", "ns", "ts_usec", "last_snapshot_record",
))
_POSITION = StructType(_strings("ts_sec", "file", "pos", "row", "gtids", "snapshot", "server_id"))
BODY_FIELDS: list[StructField] = [
    *_strings("op", "before", "after"),
    StructField("source", _SOURCE),
    *_strings("ts_ms", "ddl", "databaseName", "schemaName", "tableChanges"),
    StructField("position", _POSITION),
    *_strings("status", "historyRecord"),
]
"""A Debezium change event's payload (also at the top level when the value has no schema envelope), plus the
fields of Debezium's and dtle's schema-change (DDL) events (Flink CDC's wrap one as JSON text in
``historyRecord``) and of Debezium's transaction metadata (``status``; its ``id`` is canal's top-level field, and
in the payload :data:`PAYLOAD_FIELDS`)."""
PAYLOAD_FIELDS: list[StructField] = [*BODY_FIELDS, *_strings("id")]

_ROWS = ArrayType(StringType())
MESSAGE_SCHEMA = StructType([
    StructField("schema", StringType()),
    StructField("payload", StructType(PAYLOAD_FIELDS)),
    *BODY_FIELDS,
    # canal flat message; Huawei DRS MySQL and relational variants; Tencent CKafka's canal-format DDL
    *_strings("id", "database", "table", "pkNames", "isDdl", "type", "es", "ts", "sql", "sqlType", "mysqlType",
              "columnType", "dbType", "opType"),
    StructField("data", _ROWS),
    StructField("old", _ROWS),
    # TiCDC's canal-json with its TiDB extension (`enable-tidb-extension=true`)
    StructField("_tidb", StructType(_strings("commitTs", "watermarkTs", "onlyHandleKey", "claimCheckLocation"))),
    # Huawei DRS MongoDB
    *_strings("db", "coll", "value", "where", "recordType", "extra", "clusterTime"),
    # Tencent CKafka Official Format I
    *_strings("BINLOG_NAME", "BINLOG_POS", "DATABASE", "TABLE", "TYPE", "TIME", "NEW_VALUES", "OLD_VALUES",
              "GLOBAL_ID", "EVENT_SERVER_ID", "GROUP_ID"),
    StructField(CORRUPT, StringType()),
])
"""The union of every supported dialect's fields. Objects and values kept as text are ``StringType`` (Spark keeps
the JSON text of a non-string value for a string field); ``data``/``old`` are arrays of row-object texts."""
_CKAFKA = ("BINLOG_NAME", "BINLOG_POS", "DATABASE", "TABLE", "TYPE", "TIME", "NEW_VALUES", "OLD_VALUES",
           "GLOBAL_ID", "EVENT_SERVER_ID", "GROUP_ID")
RESOLVED_SCHEMA = StructType([
    StructField(f"ck_{f.name.lower()}" if f.name in _CKAFKA else f.name, f.dataType) for f in MESSAGE_SCHEMA.fields
])
""":data:`MESSAGE_SCHEMA` with CKafka's upper-case fields renamed ``ck_<lower case>``: Spark resolves field
references case-insensitively, so ``type`` and ``TYPE`` cannot both be referenced by name (parsing itself matches
names exactly, so they are read apart and then renamed by position)."""


KEY_SCHEMA = StructType([*_strings("schema", "payload"), StructField(CORRUPT, StringType())])


def _combine(shapes: Sequence[Shape], per_shape: dict[str, Column], default: Column) -> Column:
    expr: Column | None = None
    for shape in shapes:
        branch = per_shape[shape.name]
        expr = F.when(F.col("_shape") == shape.name, branch) if expr is None else expr.when(
            F.col("_shape") == shape.name, branch)
    return default if expr is None else expr.otherwise(default)


_EARLIEST, _LATEST = "0001-01-02 00:00:00", "9999-12-30 00:00:00"
"""The source times kept (others are null): Python's datetime range, a day inside it for any time zone."""

NULL_ENVELOPE_SKIP = "tombstone (null schema and payload)"
NULL_TEXT_SKIP = "tombstone (the value is the text null, as a console consumer prints a null value)"
_NULL_ENVELOPES = ('{"schema":null,"payload":null}', '{"payload":null,"schema":null}')


def parse_messages(raw: DataFrame, *, accepted: Sequence[Shape], known: Sequence[Shape], fmt: str) -> DataFrame:
    """Raw records -> parsed records (:data:`cdclake.formats.PARSED_COLUMNS`) in one pass.

    Args:
        raw: Raw records (:data:`cdclake.normalize.RAW_SCHEMA`).
        accepted: The shapes this format reads, in detection order.
        known: Every shape, to name what a message of another dialect looks like.
        fmt: Format name, for reasons.
    """
    return _plan(tuple(accepted), tuple(known), fmt).apply(raw)


def _plan(accepted: tuple[Shape, ...], known: tuple[Shape, ...], fmt: str) -> ColumnPlan:
    """The parse plan for a format, built on first use in the process (:func:`cdclake.plans.cached_plan`).

    Building it is thousands of calls into the JVM (about 1.5 s of driver time for ``auto``); the expressions
    depend on the format and the source's time zone (CKafka's ``TIME`` is read in it), not on the batch."""
    key = (tuple(s.name for s in accepted), tuple(s.name for s in known), fmt, source_zone())
    return cached_plan(("parse", *key), lambda: _build_plan(accepted, known, fmt))


_JSON_STRING = r'"[^"\\]*+(?:\\.[^"\\]*+)*+"'
"""A JSON string token. Java's regex engine recurses once per repetition of a group, so a long string in
``"(?:[^"\\]|\\.)*"`` overflowed the stack and took the driver down; a group here repeats once per escape."""
_JSON_FRACTION = r"-?\d+(?:\.\d+(?:[eE][+-]?\d+)?|[eE][+-]?\d+)"


def _exact_numbers(parsed: Column, value: Column) -> Column:
    """A message's parse (``parsed``, ``from_json`` of ``value``), parsed again with its fractional JSON numbers
    quoted when it is a canal-family message (``mysqlType``) whose rows hold any (``"amount": 12345678901234567.89``,
    as some producers write canal values instead of strings), so each is read as the text it was sent as: Spark
    keeps a number's text for a string field only through a double, which rounds it (``12345678901234568.0``,
    ``1.10`` -> ``1.1``). The quoting matches strings whole, so a number inside one is left alone.

    Which messages need it is read from the rows' texts in the first parse: Spark writes a row object out again
    compactly, each fractional number as a double's text (with a ``.`` or ``E``) right after ``:``, ``[`` or ``,``.
    A string can look so too; such a message is only parsed again for nothing. Testing these short texts instead
    of every canal message's raw text keeps the check's cost off the usual canal stream, whose values are strings.
    """
    rows = F.concat_ws("\n", parsed["data"], parsed["old"])
    candidate = parsed["mysqlType"].isNotNull() & rows.rlike(r"[:\[,]-?[0-9]+[.E]")
    # Every string gets \x01\x02 after it, every fractional number \x01 before and \x02 after (JSON text holds
    # no raw control characters); then the empty pairs go and the others become quotes.
    marked = F.regexp_replace(value, f"({_JSON_STRING})|({_JSON_FRACTION})", "$1\x01$2\x02")
    quoted = F.regexp_replace(F.regexp_replace(marked, "\x01\x02", ""), "\x01([^\x02]*)\x02", '"$1"')
    return F.when(candidate, _parse_message(quoted)).otherwise(parsed)


def _parse_message(value: Column) -> Column:
    return F.from_json(value, MESSAGE_SCHEMA, FROM_JSON_OPTIONS).cast(RESOLVED_SCHEMA)


def _build_plan(accepted: Sequence[Shape], known: Sequence[Shape], fmt: str) -> ColumnPlan:
    j = F.col("_j")
    detect_order = list(accepted) + [s for s in known if s not in accepted]
    shape: Column = F.lit(None).cast("string")
    for s in reversed(detect_order):
        shape = F.when(s.detect(j), F.lit(s.name)).otherwise(shape)
    steps: list[tuple[str, Sequence[Column]]] = [
        ("add", [_parse_message(F.col("value")).alias("_j0")]),
        ("add", [_exact_numbers(F.col("_j0"), F.col("value")).alias("_j")]),
        ("add", [shape.alias("_shape")]),
    ]
    prepared: dict[str, dict[str, Column]] = {}
    for s in accepted:
        for name, expr in s.prepare(j).items():
            prepared.setdefault(name, {})[s.name] = expr
    for name, by_shape in prepared.items():
        users = [s for s in accepted if s.name in by_shape]
        steps.append(("add", [_combine(users, by_shape, F.lit(None)).alias(name)]))
    multi = [s for s in accepted if s.rows is not None]
    if multi:
        rows = _combine(multi, {s.name: s.rows(j) for s in multi}, F.lit(None).cast(_ROWS))  # type: ignore[misc]
        steps.append(("add", [F.posexplode_outer(rows).alias("_ri", "_row")]))
    else:
        steps.append(("add", [F.lit(None).cast("int").alias("_ri"), null_string().alias("_row")]))
    row, row_index = F.col("_row"), F.coalesce(F.col("_ri"), F.lit(0))
    columns = {s.name: s.columns(j, row, row_index) for s in accepted}
    out = {c: _combine(accepted, {n: cols.get(c, _null_of(c)) for n, cols in columns.items()}, _null_of(c))
           for c in SHAPE_COLUMNS}
    # A time no calendar reader takes (an `es` or `ts_ms` in microseconds is in the year 50000) is no source time:
    # Python (the driver's DDL handling, pyiceberg readers) cannot hold it.
    out["source_ts"] = F.when(out["source_ts"].between(F.lit(_EARLIEST).cast("timestamp"),
                                                       F.lit(_LATEST).cast("timestamp")), out["source_ts"])
    # The columns are computed once, here; the rules below read them (where a message has a shape, the combined
    # column is that shape's), so a rule on e.g. table_id does not compute it again for status and for reason.
    steps.append(("add", [expr.alias(c) for c, expr in out.items()]))
    computed = {c: F.col(c) for c in SHAPE_COLUMNS}
    shape_status = {}
    shape_reason = {}
    for s in accepted:
        st, why = status(*s.rules(j, row, computed))
        shape_status[s.name], shape_reason[s.name] = st, why
    accepted_names = [s.name for s in accepted]
    looks_like = F.concat(
        F.lit("message looks like a "), F.col("_shape"),
        F.lit(f" message, which --format {fmt} does not read (use --format auto or that dialect's format)"))
    st, why = status(
        (F.col("error").isNotNull(), F.concat(F.lit("unframed message: "), F.col("error")), "quarantine"),
        (F.col("value").isNull(), F.lit("tombstone (null value)"), "skip"),
        # kafka-console-consumer (and dumps made with it) print a tombstone's missing value as the text null.
        (shorter_than(F.col("value"), 16) & (F.trim("value") == "null"), F.lit(NULL_TEXT_SKIP), "skip"),
        # dtle's tombstone after a delete is a value: the JSON converter's envelope of nothing.
        (shorter_than(F.col("value"), 64) & F.regexp_replace("value", r"\s", "").isin(*_NULL_ENVELOPES),
         F.lit(NULL_ENVELOPE_SKIP), "skip"),
        (F.col(f"_j.{CORRUPT}").isNotNull() & F.get_json_object(F.col("value"), "$").isNull(),
         F.lit(VALUE_NOT_JSON), "quarantine"),
        (F.col(f"_j.{CORRUPT}").isNotNull() & ~F.trim(F.col("value")).startswith("{"),
         F.lit("message value is not a JSON object"), "quarantine"),
        (F.col(f"_j.{CORRUPT}").isNotNull(), _unexpected_type_reason(), "quarantine"),
        # A row flattened by Debezium's ExtractNewRecordState (`__op`, `__deleted`, `__source_ts_ms` beside the
        # columns), without the schema envelope.
        (F.col("_shape").isNull() & F.arrays_overlap(F.json_object_keys("value"), F.array(*map(F.lit, _UNWRAPPED))),
         F.concat(F.lit(f"unrecognized message: a row flattened by Debezium's ExtractNewRecordState/unwrap transform "
                        f"(it has {' or '.join(_UNWRAPPED)}), not a change event: publish the change events "
                        "themselves; its top-level fields: "),
                  F.array_join(F.json_object_keys("value"), ", ")), "quarantine"),
        (F.col("_shape").isNull(),
         F.concat(F.lit(f"unrecognized message: not a message --format {fmt} reads (a Debezium/dtle event, canal/DRS "
                        "flat message, DRS MongoDB record or CKafka Format I row; a bare row, as Debezium's "
                        "ExtractNewRecordState/unwrap transform writes it, is not a change event); its top-level "
                        "fields: "),
                  F.coalesce(F.nullif(F.array_join(F.json_object_keys("value"), ", "), F.lit("")), F.lit("none"))),
         "quarantine"),
        (~F.col("_shape").isin(*accepted_names), looks_like, "quarantine"),
    )
    final_status = F.when(st != "ok", st).otherwise(_combine(accepted, shape_status, F.lit("ok")))
    final_reason = F.when(st != "ok", why).otherwise(_combine(accepted, shape_reason, null_string()))
    steps.append(("select", [
        *[F.col(c) for c in ("input", "file_index", "index")], row_index.alias("row_index"),
        *[F.col(c) for c in ("line", "byte_offset", "offset", "key", "value", *SHAPE_COLUMNS)],
        final_status.alias("status"),
        final_reason.alias("reason"),
    ]))
    return ColumnPlan.of(*steps)


_UNWRAPPED = ("__op", "__deleted")
"""Fields Debezium's ExtractNewRecordState adds to the row it flattens (``add.fields=op``, the delete handling)."""

_STRUCTURED = (("payload", "{"), ("source", "{"), ("position", "{"), ("data", "["), ("old", "["), ("_tidb", "{"),
               ("payload.source", "{"), ("payload.position", "{"))
"""The fields :data:`MESSAGE_SCHEMA` reads as objects or arrays (every other field takes any JSON value), with the
character their JSON text must start with; a message where one holds another JSON type fails the whole parse."""


def _unexpected_type_reason() -> Column:
    """The reason for a message whose parse failed on a field's JSON type: names the first field of
    :data:`_STRUCTURED` that holds another type, and its value (a string field keeps any JSON value's text)."""
    kinds = {"{": "an object", "[": "an array"}
    top = F.from_json(F.col("value"), StructType(_strings(*[p for p, _ in _STRUCTURED if "." not in p], "xid",
                                                          "type", "specversion")))
    payload = F.from_json(top["payload"], StructType(_strings("source", "position")))
    reason: Column = F.lit("message value is JSON but a field has an unexpected type (payload, source and position "
                           "must be objects, data and old arrays of row objects)")
    for path, opener in reversed(_STRUCTURED):
        head, _, inner = path.partition(".")
        text = payload[inner] if inner else top[head]
        if path in ("data", "old"):  # canal's; in another tool's message (Airbyte's record) it may be an object
            why = F.concat(F.lit(f"message value is JSON but field {path} is not an array, as a canal message's "
                                 f"is (an array of row objects): "), F.substring(text, 1, 80),
                           F.lit("; if this is not a canal message, no format cdclake reads matches it: its "
                                 "top-level fields: "), F.array_join(F.json_object_keys("value"), ", "))
        else:
            why = F.concat(F.lit(f"message value is JSON but field {path} is not {kinds[opener]}: "),
                           F.substring(text, 1, 80))
        reason = F.when(text.isNotNull() & ~F.ltrim(text).startswith(opener), why).otherwise(reason)
    # Maxwell's rows look like canal's, with `data` one object and a transaction id `xid` (its bootstrap's rows, a
    # snapshot, have none: their type says so).
    maxwell = F.ltrim(top["data"]).startswith("{") & (top["xid"].isNotNull() | top["type"].startswith("bootstrap-"))
    # Debezium's CloudEventsConverter: `source` is a URI, the change in `data`, its source fields `iodebezium*`.
    cloud_event = top["specversion"].isNotNull() & ~F.ltrim(top["source"]).startswith("{")
    # (A string field keeps a JSON string's content: whether `payload` was one shows in the text.)
    string_payload = F.regexp_extract(F.col("value"), r'"payload"\s*:\s*(.)', 1) == '"'
    return (F.when(maxwell, F.lit(MAXWELL_REASON)).when(cloud_event, F.lit(CLOUD_EVENT_REASON))
            .when(string_payload, F.lit(STRING_PAYLOAD_REASON)).otherwise(reason))


MAXWELL_REASON = ("unrecognized message: a Maxwell message (data is one row object, with xid or a bootstrap type), a "
                  "format cdclake does not read")
STRING_PAYLOAD_REASON = ("message value is JSON but field payload is a JSON string, not an object: not a change "
                         "event (Debezium's Outbox Event Router writes its events so); cdclake reads change events")
CLOUD_EVENT_REASON = ("unrecognized message: a CloudEvents envelope (specversion, source a URI), as Debezium's "
                      "CloudEventsConverter writes it, which cdclake does not read: publish the change events with "
                      "Kafka Connect's JsonConverter")


def _null_of(column: str) -> Column:
    if column == "source_ts":
        return F.lit(None).cast("timestamp")
    return null_string()
