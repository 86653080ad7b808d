"""Huawei DRS MongoDB records.

A record: ``{id, op, dbType: "MongoDB", db, coll, value, where, recordType, extra, es, ts, clusterTime}`` where
``value`` and ``where`` are documents in mongo shell syntax (``{"_id": ObjectId("…")}``). Mapping:

- table ``db.coll`` with two columns: ``_id`` (the key: an ObjectId as its 24-hex text, other ids as their JSON
  text) and ``document`` (the current document as JSON text). Shell helpers become JSON: ``ObjectId("x")``,
  ``ISODate("x")``, ``NumberDecimal("x")``, ``UUID("x")``, ``[new] BinData(n, "x")`` -> ``"x"``;
  ``NumberLong(n)``, ``NumberInt(n)`` -> ``n``; ``Timestamp(t, i)`` -> ``{"t": t, "i": i}``. Inside a string value
  the same text is data and stays.
- ``op``: INSERT -> c (value = the document), UPDATE with recordType ``replace`` -> u (value = the new document),
  DELETE (recordType ``doc``) -> d (value = ``{_id}``). UPDATE with update operators (recordType ``update``) is a
  partial update: ``document`` is unavailable (kept) and the operators travel as the record's ``patch``, which
  apply folds and applies to the stored document (:mod:`cdclake.docpatch`). ``$set`` and ``$unset`` of top-level
  fields are supported; other operators and dotted paths are quarantined with that reason.
- key: ``_id`` from ``where`` when present, else from ``value``.
- source position: ``clusterTime`` seconds + increment, then ``id`` (16 hex digits each);
  ``source_ts``: ``es`` (milliseconds).
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import MapType, StringType

from cdclake.formats.common import null_string, epoch_timestamp, table_identity
from cdclake.formats.connect import UNAVAILABLE_VALUE, ColumnType
from cdclake.formats.message import Rule, Shape
from cdclake.records import hex_segment

_OPS = {"INSERT": "c", "UPDATE": "u", "DELETE": "d", "INIT": "r"}
ROW_SCHEMA = '{"mongo":true}'
KEY_SCHEMA = '{"pkNames":["_id"]}'
COLUMNS = ("_id", "document")

_OUTSIDE_STRINGS = r"""(?=(?:[^"\\]*+(?:\\.[^"\\]*+)*+"[^"\\]*+(?:\\.[^"\\]*+)*+")*+[^"\\]*+(?:\\.[^"\\]*+)*+$)"""
"""After a helper: what follows holds whole JSON strings only, so the helper was not inside a string value (a
helper's own text holds whole strings too). Text such as ``"counts as NumberLong(5)"`` stays as it is."""

_SHELL = tuple((pattern + _OUTSIDE_STRINGS, replacement) for pattern, replacement in (
    (r"""ObjectId\(\s*["']([0-9a-fA-F]{24})["']\s*\)""", '"$1"'),
    (r"""(?:ISODate|NumberDecimal|UUID)\(\s*"([^"]*)"\s*\)""", '"$1"'),
    (r"""(?:NumberLong|NumberInt)\(\s*"?(-?\d+)"?\s*\)""", "$1"),
    (r"""(?:new\s+)?BinData\(\s*\d+\s*,\s*"([^"]*)"\s*\)""", '"$1"'),
    (r"""Timestamp\(\s*(\d+)\s*,\s*(\d+)\s*\)""", '{"t": $1, "i": $2}'),
))


def shell_to_json(text: Column) -> Column:
    """Mongo shell document text -> JSON text (shell helpers replaced; text without helpers is unchanged)."""
    converted = text
    for pattern, replacement in _SHELL:
        converted = F.regexp_replace(converted, pattern, replacement)
    return F.when(text.contains("("), converted).otherwise(text)


_MAP = MapType(StringType(), StringType())
SUPPORTED_OPERATORS = ("$set", "$unset")


def _is_partial(value: Column) -> Column:
    return value.rlike(r'^\s*\{\s*"\$')


def _bad_operator(value: Column) -> Column:
    """Null, or why the partial update cannot be applied (an unsupported operator or a dotted field path)."""
    ops = F.from_json(value, _MAP)
    names = F.flatten(F.array(*[F.coalesce(F.json_object_keys(ops[o]), F.array().cast("array<string>"))
                                for o in SUPPORTED_OPERATORS]))
    # `"$v": 1`: the oplog's update format version (MongoDB 3.6-4.4) beside classic operators, not an operator.
    version_1 = F.coalesce(F.trim(ops["$v"]) == "1", F.lit(False))
    unsupported = F.filter(F.map_keys(ops), lambda k: ~k.isin(*SUPPORTED_OPERATORS) & ~((k == "$v") & version_1))
    dotted = F.filter(names, lambda k: k.contains("."))
    return (F.when(F.size(unsupported) > 0, F.concat(F.lit("unsupported MongoDB update operator(s): "),
                                                       F.array_join(unsupported, ", "),
                                                       F.lit(" (supported: $set, $unset)")))
            .when(F.size(dotted) > 0, F.concat(F.lit("MongoDB update of nested field path(s) "),
                                               F.array_join(dotted, ", "),
                                               F.lit(" is not supported (top-level fields only)"))))


def _not_a_document(field: str, converted: Column) -> Column:
    """Why a field is not a document after the shell helpers were converted, naming the first shell construct
    left (e.g. ``new Date(``, ``MinKey``, a ``/regex/``) when there is one."""
    construct = r"""((?:new\s+)?[A-Za-z_$][\w$]*\s*\(|\bM(?:in|ax)Key\b|/[^/"]+/[a-z]*)""" + _OUTSIDE_STRINGS
    left = F.regexp_extract(converted, construct, 1)
    return F.concat(F.lit(f"field {field} is not a document (mongo shell JSON)"), F.when(left != "", F.concat(
        F.lit(": unsupported shell syntax "), F.trim(left), F.lit(f" (cdclake converts {_HELPERS})"))).otherwise(""))


_HELPERS = "ObjectId, ISODate, NumberDecimal, UUID, BinData, NumberLong, NumberInt, Timestamp"


def _prepare(j: Column) -> dict[str, Column]:
    return {"_mv": shell_to_json(j["value"]), "_mw": shell_to_json(j["where"])}


def _columns(j: Column, row: Column, row_index: Column) -> dict[str, Column]:
    value, where = F.col("_mv"), F.col("_mw")
    op = F.element_at(F.create_map(*[F.lit(x) for kv in _OPS.items() for x in kv]), F.upper(F.trim(j["op"])))
    doc_id = F.get_json_object(F.coalesce(where, value), "$._id")
    key_text = F.to_json(F.struct(doc_id.alias("_id")))
    clock = F.split(F.coalesce(F.trim(j["clusterTime"]), F.lit("")), ":")
    secs, inc = F.element_at(clock, 1), F.element_at(clock, 2)
    position = F.when(
        secs.rlike(r"^\d+$") | F.trim(j["id"]).rlike(r"^\d+$"),
        F.concat(*[hex_segment(F.coalesce(F.when(c.rlike(r"^\d+$"), c), F.lit("0")))
                   for c in (secs, inc, F.trim(j["id"]))]))
    return {
        **table_identity(j["db"], j["coll"]),
        "op": op,
        "source_pos": position,
        "source_ts": epoch_timestamp(j["es"]),
        "snapshot": F.when(op == "r", F.lit("init")),
        "key_text": key_text,
        "before_text": F.when(op == "d", key_text),
        "after_text": F.when(op.isin("c", "u", "r"), F.to_json(F.struct(
            doc_id.alias("_id"),
            F.when(_is_partial(value), F.lit(UNAVAILABLE_VALUE)).otherwise(value).alias("document")))),
        "patch": F.when((op == "u") & _is_partial(value), value),
        "row_schema": F.lit(ROW_SCHEMA),
        "key_schema": F.lit(KEY_SCHEMA),
        "ddl": null_string(),
    }


def _rules(j: Column, row: Column, cols: dict[str, Column]) -> list[Rule]:
    value = F.col("_mv")
    operators = value.rlike(r'^\s*\{\s*"\$')
    return [
        (j["op"].isNull(), F.lit("missing field op"), "quarantine"),
        (cols["op"].isNull(),
         F.concat(F.lit("unknown op '"), j["op"], F.lit("' (expected INSERT, UPDATE or DELETE)")), "quarantine"),
        (cols["table_id"].isNull(), F.lit("missing field coll"), "quarantine"),
        (value.isNull(), F.lit("field value is missing"), "quarantine"),
        (F.get_json_object(value, "$").isNull(), _not_a_document("value", value), "quarantine"),
        (F.col("_mw").isNotNull() & F.get_json_object(F.col("_mw"), "$").isNull(),
         _not_a_document("where", F.col("_mw")), "quarantine"),
        (F.get_json_object(cols["key_text"], "$._id").isNull(), F.lit("no _id in where or value"), "quarantine"),
        (cols["source_pos"].isNull(), F.lit("no source position: clusterTime and id are missing"), "quarantine"),
        # An unread clusterTime would rank the change below every change that has one: a newer change lost.
        (~F.trim(j["clusterTime"]).rlike(r"^(\d+(:\d+)?)?$"),
         F.concat(F.lit("field clusterTime '"), j["clusterTime"], F.lit("' is not seconds:increment")), "quarantine"),
        ((cols["op"] == "u") & operators & _bad_operator(value).isNotNull(), _bad_operator(value), "quarantine"),
        (cols["op"].isin("c", "r") & operators,
         F.lit("MongoDB insert whose value is update operators, not a document"), "quarantine"),
    ]


SHAPE = Shape(
    name="mongo",
    detect=lambda j: j["coll"].isNotNull() | F.lower(F.coalesce(j["dbType"], F.lit(""))).startswith("mongo"),
    columns=_columns,
    rules=_rules,
    prepare=_prepare,
)


def table_columns() -> list[ColumnType]:
    """A MongoDB collection's columns: ``_id`` and ``document`` (JSON text)."""
    return [ColumnType(name, StringType(), lambda c: c) for name in COLUMNS]
