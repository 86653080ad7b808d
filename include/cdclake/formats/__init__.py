"""Source-format normalizers, registered by name.

A normalizer turns raw records (see :data:`cdclake.landing.RAW_FIELDS`) into *parsed* records, the text-level
form of the canonical change record (:data:`PARSED_COLUMNS`); :mod:`cdclake.normalize` then types them per table
and stages canonical records. Every format reads messages through one shared parse
(:func:`cdclake.formats.message.parse_messages`); a format is the set of message *shapes* it accepts:

==========  =======================================================================================
format      shapes
==========  =======================================================================================
debezium    Debezium change events (PostgreSQL, SQL Server, MySQL); schema-change, transaction, heartbeat messages
dtle        the same (dtle's Debezium-compatible MySQL output and its SchemaChangeTopic DDL)
canal       canal flat messages (DML and DDL)
drs         Huawei DRS: canal-like MySQL and relational (GaussDB/PostgreSQL/Oracle/SQL Server) messages, MongoDB
            (the canal shape, ordered by DRS's monotonic ``id`` alone: shape ``drs``)
ckafka      Tencent CKafka Official Format I DML and its canal-format DDL
auto        all of the above, recognized per message
==========  =======================================================================================
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cdclake.exceptions import SchemaError, UnknownFormatError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from cdclake.formats.connect import ColumnType
    from cdclake.formats.message import Shape

PARSED_COLUMNS = (
    "input", "file_index", "index", "row_index", "line", "byte_offset", "offset", "key", "value",
    "table_id", "table_name", "op", "source_pos", "source_ts", "snapshot",
    "key_text", "before_text", "old_text", "after_text", "row_schema", "key_schema", "ddl", "patch",
    "status", "reason",
)
"""Columns of a parsed record. Raw location: ``input``, ``file_index``, ``index`` (message in file),
``row_index`` (row in a multi-row message), ``line``, ``byte_offset``, ``offset``, and the raw ``key``/``value``.
Change: ``table_id``, ``table_name`` (the stream's spelling of the table, where it is not ``table_id``), ``op``
(c/u/d/r/t), ``source_pos`` (fixed-width ordered source position), ``source_ts`` (timestamp), ``snapshot`` (marker
or null). Images as JSON object text: ``key_text``, ``before_text``, ``after_text``, and ``old_text``: a partial
before image (canal's ``old``, which holds only the changed columns); the before image is then the after image with
those columns' old values. Types: ``row_schema``/``key_schema``
(JSON text read by :func:`table_columns` and :func:`key_columns`, or null). ``ddl``: the statement of a DDL record
(its ``row_schema`` then carries the dialect and namespace). ``patch``: a partial update's operators (MongoDB
``$set``/``$unset``). Outcome: ``status`` = ``ok`` | ``skip`` | ``ddl`` | ``quarantine`` with a ``reason``."""

FORMATS = ("auto", "debezium", "dtle", "canal", "drs", "ckafka")


@dataclass(frozen=True)
class Normalizer:
    """A format: the message shapes it reads."""

    name: str
    shapes: tuple[str, ...]

    def parse(self, raw: "DataFrame") -> "DataFrame":
        """Raw records -> parsed records (:data:`PARSED_COLUMNS`); pure, JVM expressions only."""
        from cdclake.formats.message import parse_messages

        known = _shapes()
        return parse_messages(raw, accepted=[known[s] for s in self.shapes], known=list(known.values()),
                              fmt=self.name)


_REGISTRY = {
    "debezium": ("debezium", "debezium_ddl", "debezium_meta"),
    "dtle": ("debezium", "debezium_ddl", "debezium_meta"),
    "canal": ("canal_flat",),
    "drs": ("mongo", "drs"),
    "ckafka": ("ckafka", "canal"),
    "auto": ("debezium", "debezium_ddl", "debezium_meta", "mongo", "ckafka", "canal"),
}


def _shapes() -> "dict[str, Shape]":
    from cdclake.formats import canal, ckafka, debezium, mongo

    shapes = (debezium.CHANGE_SHAPE, debezium.DDL_SHAPE, debezium.METADATA_SHAPE, mongo.SHAPE, ckafka.SHAPE,
              canal.SHAPE, canal.DRS_SHAPE, canal.CANAL_SHAPE)
    return {s.name: s for s in shapes}


def get_normalizer(name: str) -> Normalizer:
    """The normalizer registered under a format name.

    Raises:
        UnknownFormatError: No normalizer has that name.
    """
    try:
        return Normalizer(name, _REGISTRY[name])
    except KeyError:
        raise UnknownFormatError(f"unknown format {name!r}; supported: {', '.join(FORMATS)}") from None


MALFORMED = (TypeError, ValueError, AttributeError, KeyError, IndexError)
"""What interpreting a schema a message carries raises when a field has an unexpected JSON type (``"fields":
true``, ``"scale": "x"``): turned into :class:`SchemaError`, whose messages are quarantined with that reason."""


def table_columns(row_schema: dict[str, Any]) -> "list[ColumnType]":
    """A table's columns from one of its parsed records' ``row_schema`` (any format).

    Raises:
        SchemaError: The schema names a type cdclake cannot map.
    """
    from cdclake.formats import canal, debezium, mongo

    try:
        if isinstance(row_schema.get("sqltypes"), dict):
            return canal.table_columns(row_schema["sqltypes"])
        if row_schema.get("mongo") is True:
            return mongo.table_columns()
        if "fields" in row_schema:
            return debezium.table_columns(row_schema)
    except MALFORMED as exc:
        raise SchemaError(f"malformed row schema ({exc}): {str(row_schema)[:120]}") from exc
    raise SchemaError(f"unrecognized row schema: {str(row_schema)[:120]}")


def key_columns(key_schema: dict[str, Any] | None, key_sample: dict[str, Any] | None) -> list[str]:
    """Primary-key columns from a message key's schema or ``pkNames``, else a sample key's field names, or []."""
    from cdclake.formats import debezium

    if key_schema:
        names = key_schema.get("pkNames")
        if isinstance(names, list) and all(isinstance(n, str) for n in names) and names:
            return list(dict.fromkeys(names))  # canal repeats a name per row of a multi-row message: ["ID", "ID"]
        try:
            found = debezium.key_columns(key_schema)
        except MALFORMED as exc:
            raise SchemaError(f"malformed key schema ({exc}): {str(key_schema)[:120]}") from exc
        if found:
            return found
    if isinstance(key_sample, dict):
        return list(key_sample)
    return []
