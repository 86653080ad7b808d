"""JVM column helpers every format module shares (no Python runs per row)."""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F

CORRUPT = "_corrupt_record"
"""from_json puts the whole text of a malformed (or non-object) JSON value here; Spark 3 otherwise returns a struct of
nulls for it, indistinguishable from a valid object without those fields."""

FROM_JSON_OPTIONS = {
    "mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT, "allowUnquotedControlChars": "true",
}
"""Raw control characters inside strings are accepted: Tencent CKafka's canal-format DDL carries the statement's
newlines unescaped."""


def null_string() -> Column:
    """A typed null string (a function: columns need an active SparkContext)."""
    return F.lit(None).cast("string")


def shorter_than(text: Column, chars: int) -> Column:
    """Whether ``text`` has fewer than ``chars`` characters, without counting a long text's: Spark's ``length``
    walks every byte, and on a 3 KB message value, tested for each message, it was most of the parse. The byte
    length (constant time; UTF-8 takes at most 4 bytes a character) rules long texts out first, and ``AND`` stops
    there."""
    return (F.octet_length(text) < 4 * chars) & (F.length(text) < chars)


def unquote_json_text(c: Column) -> Column:
    """A JSON ``null`` kept as text by Spark reads back as the string ``null``; make it a real null.

    A row image (an object's text) is told apart by its first character before the text is copied to be trimmed
    and lower-cased: this runs on every image of every message."""
    return F.when(c.isNull() | (~c.startswith("{") & (F.lower(F.trim(c)) == "null")), F.lit(None)).otherwise(c)


def sanitize(c: Column) -> Column:
    """Column form of :func:`cdclake.identity.sanitize` (kept in step with it by tests)."""
    cleaned = F.regexp_replace(F.lower(F.trim(c)), r"[^a-z0-9_]", "_")
    return F.when(cleaned == "", F.lit("_")).otherwise(cleaned)


def table_identity(namespace: Column, table: Column) -> dict[str, Column]:
    """A table's ``table_id``, ``namespace.table`` (both sanitized; null without a table name), and its
    ``table_name``: the stream's own spelling of it where that differs from the id (``Inventory.gmall-2020-04``),
    else null. Two spellings of one id are two source tables (:mod:`cdclake.normalize` keeps them apart)."""
    name = F.coalesce(table, F.lit(""))
    ns = F.coalesce(F.nullif(F.trim(namespace), F.lit("")), F.lit("default"))
    tid = F.when(F.trim(name) != "", F.concat_ws(".", sanitize(ns), sanitize(name)))
    spelled = F.concat_ws(".", F.trim(ns), F.trim(name))
    return {"table_id": tid, "table_name": F.when(spelled != tid, spelled)}


def status(*rules: tuple[Column, Column, str]) -> tuple[Column, Column]:
    """First matching rule wins: (condition, reason, status); otherwise ``ok``."""
    outcome: Column = F.lit("ok")
    reason: Column = F.lit(None).cast("string")
    for condition, why, result in reversed(rules):
        outcome = F.when(condition, F.lit(result)).otherwise(outcome)
        reason = F.when(condition, why).otherwise(reason)
    return outcome, reason


def positive_integer(text: Column) -> Column:
    """Whether a text is a whole number above 0 (a message id, a commit timestamp); never true for "0"."""
    return text.rlike(r"^\d+$") & (text.cast("decimal(20,0)") > 0)


def epoch_millis(value: Column) -> Column:
    """A Unix timestamp in seconds or milliseconds (told apart by magnitude) -> milliseconds; null unless above 0.

    Tools disagree: Huawei DRS and canal send 13-digit milliseconds, Tencent CKafka's canal-format DDL 10-digit seconds.
    """
    n = value.cast("long")
    return F.when(n > 100_000_000_000, n).when(n > 0, n * 1000)


def epoch_timestamp(value: Column) -> Column:
    """A Unix timestamp in seconds or milliseconds (see :func:`epoch_millis`) -> timestamp."""
    return F.timestamp_millis(epoch_millis(value))


def parse_json_schema(text: str | None) -> dict[str, Any] | None:
    """A schema's JSON text -> dict (None for null or unparsable text)."""
    if not text:
        return None
    try:
        parsed = json.loads(text)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None
