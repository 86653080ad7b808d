"""The canonical change record: one shape for every source format.

Every normalizer maps its dialect onto these columns; apply, validation and the changelog only ever see this
shape. Normalized records are staged as Parquet, one dataset per (source, batch, table), because ``key``,
``before`` and ``after`` are structs typed with that table's columns.

Ordering model
--------------
``position`` is a string whose lexicographic order is the order of changes *of one source*:

    <source position> "/" <batch id> "/" <file index, 6 digits> "/" <message index, 10 digits> "/" <row, 5 digits>

The source position is what the format gives (PostgreSQL LSN, SQL Server commit/change LSN + event serial,
MySQL binlog file sequence + pos + row, DRS ``id``, CKafka binlog sequence + pos, MongoDB clusterTime), encoded as
fixed-width lower-case hex segments so that string order equals numeric order. The landing tail (batch id, the
file's index in the batch, the message's index in the file) breaks ties between changes with the same source
position (e.g. every row of a PostgreSQL snapshot shares one LSN) in arrival order; the row index orders the
rows of a multi-row message (canal/DRS ``data[]``). Positions of different
sources, and of different formats, are never compared: each table is fed by one source.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    DataType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

OPS = ("c", "u", "d", "r", "t")
"""Canonical operations: create, update, delete, read (snapshot), truncate."""

SOURCE_POSITION_SEGMENT = 16
"""Hex digits of one 64-bit source-position segment."""

META_FIELDS: tuple[StructField, ...] = (
    StructField("op", StringType(), False),
    StructField("table_id", StringType(), False),
    StructField("position", StringType(), False),
    StructField("source_ts", TimestampType(), True),
    StructField("snapshot", StringType(), True),
    StructField("batch_id", StringType(), False),
    StructField("source", StringType(), False),
    StructField("format", StringType(), False),
    StructField("input_file", StringType(), True),
    StructField("raw_line", LongType(), True),
    StructField("raw_offset", LongType(), True),
    StructField("unavailable", ArrayType(StringType()), True),
    StructField("patch", StringType(), True),
)
"""Columns every canonical record has besides ``key``, ``before`` and ``after``.

- ``op``: one of :data:`OPS`.
- ``table_id``: ``namespace.table`` in the lake (:func:`cdclake.identity.table_id`).
- ``position``: total order within the source (see the module docstring).
- ``source_ts``: when the change happened in the source database (UTC), when the format says.
- ``snapshot``: null for a streamed change; the format's snapshot marker otherwise (``true``, ``first``,
  ``last``, ``incremental``, ``init``), so a re-snapshot's end can be recognized.
- ``batch_id``, ``source``, ``format``: provenance.
- ``input_file``, ``raw_line``, ``raw_offset``: where the message was in the landed input (line numbers are
  1-based; the offset is a byte offset for files and the Kafka offset for topics).
- ``unavailable``: columns of ``after`` whose value the source did not send (e.g. PostgreSQL unchanged TOAST
  values); apply keeps the stored value for those.
- ``patch``: for a partial update of a JSON ``document`` column (MongoDB ``$set``/``$unset``), the operators as
  JSON text; apply patches the stored document (:mod:`cdclake.docpatch`). Null otherwise.
"""


def canonical_schema(key: StructType, row: StructType) -> StructType:
    """The canonical record schema for a table with the given key and row types."""
    return StructType(
        [
            *META_FIELDS[:2],
            StructField("key", key, True),
            StructField("before", row, True),
            StructField("after", row, True),
            *META_FIELDS[2:],
        ]
    )


def hex_segment(value: Column, width: int = SOURCE_POSITION_SEGMENT) -> Column:
    """Encode a non-negative integral column as fixed-width lower-case hex (string order = numeric order)."""
    return F.lpad(F.lower(F.hex(value.cast("long"))), width, "0")


def landing_tail(batch_id: Column, file_index: Column, record_index: Column, row_index: Column) -> Column:
    """The arrival-order part of a position: batch id, file index, message index and row index, fixed width."""
    return F.concat_ws(
        "/",
        batch_id,
        F.lpad(file_index.cast("string"), 6, "0"),
        F.lpad(record_index.cast("string"), 10, "0"),
        F.lpad(row_index.cast("string"), 5, "0"),
    )


def position(source_position: Column, batch_id: Column, file_index: Column, record_index: Column,
             row_index: Column) -> Column:
    """A full ordered position: the source position followed by the landing tail."""
    return F.concat_ws("/", source_position, landing_tail(batch_id, file_index, record_index, row_index))


def is_struct(data_type: DataType) -> bool:
    """True for a Spark struct type."""
    return isinstance(data_type, StructType)
