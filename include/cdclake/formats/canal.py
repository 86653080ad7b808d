"""canal flat messages, and the dialects built on them: Huawei DRS (MySQL and GaussDB/PostgreSQL/Oracle/SQL Server
variants) and Tencent CKafka's canal-format DDL.

A message: ``{id, database, table, [schema], pkNames, isDdl, type, es, ts, sql, sqlType, mysqlType | columnType,
[dbType], data: [row, ...], old: [row, ...]}`` with every value a string (or null). Mapping:

- one canonical change per row of ``data`` (``old`` for a DELETE that carries its rows there, as DRS documents);
  the row index orders the rows of one message.
- ``type`` (or ``opType``): INSERT -> c, UPDATE -> u, DELETE -> d, INIT (DRS full sync) -> r with snapshot
  ``init``. ``isDdl`` true or a DDL type (CREATE, ALTER, ERASE, RENAME, QUERY, TRUNCATE, CINDEX, DINDEX, DDL,
  INIT_DDL) -> a DDL record carrying ``sql``.
- images: after = ``data[i]``; for an UPDATE, before = ``data[i]`` overlaid with ``old[i]`` (canal's ``old`` holds
  only the changed columns, DRS's the whole row: both give the full before image; the overlay is done when the
  row is typed, as ``old_text``); for a DELETE, before = the row. Older canal versions leave out the ``old``
  entries of the leading rows in which no column changed: the entries then belong to the last rows, and the
  leading rows' before images are unknown (:func:`_old_shortfall`).
- types: ``mysqlType`` (MySQL) or ``columnType`` (the relational DRS variant; the SQL dialect follows ``dbType``),
  with ``sqlType`` (JDBC codes) as fallback, mapped by :mod:`cdclake.formats.sqltypes`.
- key: ``pkNames``; null -> from a CREATE TABLE in the stream, the source config or ``--key``.
- table: ``schema`` (relational variant) else ``database``, and ``table``. A relational message names the database
  too: where it is not the schema's name, it is part of the source table's name (``database.schema.table``), so
  the same schema and table of two databases are two source tables, whose rows never mix in the one lake table
  they map to.
- source position, for a message with an ``id`` above 0: DRS (``--format drs``, or a message with DRS's
  ``dbType``/``columnType``) documents ``id`` as its event sequence number, monotonically increasing per
  task: ``id``. canal's ``id`` is the canal server's batch id, which starts again when the server restarts (Apache
  Paimon's captured test streams go from id 94 back to 14 while time moves on): ``es`` (the binlog event's time,
  in milliseconds) first, then ``id``. Else TiCDC's ``_tidb.commitTs`` (its TiDB extension; TiCDC's ``id`` is
  always 0); else, for a row change whose ``id`` is 0 or absent (TiCDC without the extension, some DTS products,
  hand-made streams): ``es``, then :data:`NO_MESSAGE_ID` (older than any id of that millisecond), arrival order
  among changes of one ``es`` (:func:`arrival_ordered`; without a readable ``es``: zeros, older than any change
  with one); a DRS message's: :data:`NO_MESSAGE_ID` alone. A DDL message's ``id`` 0 (CKafka's)
  means none (normalize takes the nearest row change's). ``source_ts``: ``es`` (milliseconds, or seconds for
  CKafka's DDL).
- TiCDC's ``TIDB_WATERMARK`` messages (its TiDB extension) are skipped with a counted reason.
"""

from __future__ import annotations

import re
from dataclasses import replace
from functools import partial
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import MapType, StringType

from cdclake.formats.common import epoch_millis, epoch_timestamp, null_string, positive_integer, table_identity
from cdclake.formats.connect import ColumnType
from cdclake.formats.message import Rule, Shape
from cdclake.records import SOURCE_POSITION_SEGMENT, hex_segment

DML_TYPES = {"INSERT": "c", "UPDATE": "u", "DELETE": "d", "INIT": "r"}
DDL_TYPES = ("CREATE", "ALTER", "ERASE", "RENAME", "QUERY", "TRUNCATE", "CINDEX", "DINDEX", "DDL", "INIT_DDL")
NO_MESSAGE_ID = "0" * SOURCE_POSITION_SEGMENT
"""The ``id`` segment of a row change whose message ``id`` is 0 or absent: before every id (a DRS message's whole
source position, before every positioned change)."""
_ARRIVAL_ORDERED = re.compile(f"[0-9a-f]{{{SOURCE_POSITION_SEGMENT}}}{NO_MESSAGE_ID}|0*")


def arrival_ordered(source_position: str) -> bool:
    """Whether changes at ``source_position`` keep only their arrival order among themselves, so a statement
    without a position placed after one of them (``normalize._ddl_position``) must not rank after later arrivals
    at it: zeros (a stream without positions), or a canal row change's ``es`` without an ``id`` (two segments, the
    second :data:`NO_MESSAGE_ID`; no other format's source position has that form: binlog positions have three
    segments, PostgreSQL's and Oracle's second is a non-zero LSN or SCN)."""
    return _ARRIVAL_ORDERED.fullmatch(source_position) is not None


SQLTYPES_SCHEMA_PREFIX = '{"sqltypes":'
"""How a row change's ``row_schema`` begins: the message's SQL types (``mysqlType``/``columnType``, ``sqlType``)."""


def _type(j: Column) -> Column:
    return F.upper(F.trim(F.coalesce(j["type"], j["opType"])))


def _is_ddl(j: Column) -> Column:
    """True for a DDL message, false otherwise (never null: Flink CDC's canal-json writes no ``isDdl``)."""
    return F.coalesce((F.lower(F.trim(j["isDdl"])) == "true") | _type(j).isin(*DDL_TYPES), F.lit(False))


def dialect(db_type: Column) -> Column:
    """The SQL dialect of a DRS ``dbType`` (MySQL when absent)."""
    t = F.lower(F.coalesce(db_type, F.lit("mysql")))
    return (F.when(t.contains("gauss") | t.contains("postgre"), F.lit("postgres"))
            .when(t.contains("oracle"), F.lit("oracle"))
            .when(t.contains("sql server") | t.contains("sqlserver"), F.lit("tsql"))
            .otherwise(F.lit("mysql")))


def _schema(j: Column) -> Column:
    return F.when(~F.trim(j["schema"]).startswith("{"), F.nullif(F.trim(j["schema"]), F.lit("")))


def _namespace(j: Column) -> Column:
    return F.coalesce(_schema(j), F.nullif(F.trim(j["database"]), F.lit("")))


def _identity(j: Column) -> dict[str, Column]:
    """``table_id`` and ``table_name`` (:func:`~cdclake.formats.common.table_identity`); the source table's name
    holds the database when the message names a schema too, and another one."""
    identity = table_identity(_namespace(j), j["table"])
    database = F.nullif(F.trim(j["database"]), F.lit(""))
    return {**identity, "table_name": F.when(identity["table_id"].isNotNull() & _schema(j).isNotNull()
                                             & database.isNotNull() & (database != _schema(j)),
                                             F.concat_ws(".", database, _schema(j), F.trim(j["table"])))
                                      .otherwise(identity["table_name"])}


def _rows(j: Column) -> Column:
    # A DELETE's row: DRS puts it in `old` (`data` null, or an empty array).
    data = F.when(F.size(j["data"]) > 0, j["data"])
    return F.when(_type(j) == "DELETE", F.coalesce(data, j["old"], j["data"])).otherwise(j["data"])


def _is_drs(j: Column) -> Column:
    """A message only Huawei DRS writes: its relational variant's fields. ``opType`` alone is not one: Apache
    InLong's canal-json-inlong writes it (its op-type) beside canal's ``type`` and ``mysqlType``."""
    return j["dbType"].isNotNull() | j["columnType"].isNotNull()


def _source_position(j: Column, id_: Column, *, drs: bool) -> Column:
    commit_ts = F.trim(j["_tidb"]["commitTs"])
    no_id = id_.isNull() | id_.rlike(r"^0+$")
    by_id = hex_segment(id_)
    es = hex_segment(F.coalesce(epoch_millis(j["es"]), F.lit(0)))
    by_time = F.concat(es, by_id)
    # Without an id, canal's order is still the binlog event's time: `es`, then arrival (DRS orders by id alone).
    by_time_alone = F.concat(es, F.lit(NO_MESSAGE_ID))
    return (F.when(positive_integer(id_), by_id if drs else F.when(_is_drs(j), by_id).otherwise(by_time))
            .when(positive_integer(commit_ts), hex_segment(commit_ts))
            .when(no_id & ~_is_ddl(j), F.lit(NO_MESSAGE_ID) if drs else F.when(_is_drs(j), F.lit(NO_MESSAGE_ID))
                  .otherwise(by_time_alone)))


def _old_shortfall(j: Column) -> Column:
    """How many rows of an UPDATE come before its first ``old`` row (0 where each row has one). Older canal
    versions (``MQMessageUtils.messageConverter``; 1.1.7 writes ``{}``) leave out a row's ``old`` entry when
    no column of it changed. The columns it writes are those changed in the row or in an earlier row of the
    message (its set of updated names grows over the rows), so only the leading rows can lack one: ``old[i]``
    belongs to ``data[i + shortfall]``."""
    rows, olds = F.size(j["data"]), F.size(j["old"])
    return F.when((_type(j) == "UPDATE") & j["old"].isNotNull() & j["data"].isNotNull() & (olds > 0)
                  & (olds < rows), rows - olds).otherwise(F.lit(0))


def _shortfall_misfits(j: Column) -> Column:
    """Whether the first ``old`` row of an UPDATE with a shortfall does not fit the row it then belongs to: there,
    every column it names changed (the first changed row's updated names are its own), so none may hold the row's
    new value."""
    first_old = F.from_json(j["old"][0], MapType(StringType(), StringType()))
    row = F.from_json(F.element_at(j["data"], _old_shortfall(j) + 1), MapType(StringType(), StringType()))
    fits = F.forall(F.map_entries(first_old), lambda e: ~e["value"].eqNullSafe(row[e["key"]]))
    return ~F.coalesce(fits & row.isNotNull(), F.lit(False))


def _columns(j: Column, row: Column, row_index: Column, *, drs: bool = False,
             latin1_binary: bool = False) -> dict[str, Column]:
    kind = _type(j)
    op = F.element_at(F.create_map(*[F.lit(x) for kv in DML_TYPES.items() for x in kv]), kind)
    # The leading rows without an `old` row have their before images unknown.
    old_index = row_index - _old_shortfall(j)
    old_row = F.when(j["old"].isNotNull() & (old_index >= 0) & (F.size(j["old"]) > old_index),
                     F.element_at(j["old"], old_index + 1))
    namespace = _namespace(j)
    id_ = F.trim(j["id"])
    types = F.coalesce(j["mysqlType"], j["columnType"], F.lit("null"))
    row_schema = F.concat(
        F.lit(SQLTYPES_SCHEMA_PREFIX + '{"dialect":"'), dialect(j["dbType"]), F.lit('","types":'), types,
        F.lit(',"codes":'), F.coalesce(j["sqlType"], F.lit("null")),
        F.lit(',"binary":"latin1"}}' if latin1_binary else "}}"))
    ddl_context = F.to_json(F.struct(dialect(j["dbType"]).alias("dialect"), namespace.alias("namespace"),
                                     j["table"].alias("table")))
    pk = F.trim(j["pkNames"])
    return {
        **_identity(j),
        "op": op,
        "source_pos": _source_position(j, id_, drs=drs),
        "source_ts": epoch_timestamp(j["es"]),
        "snapshot": F.when(kind == "INIT", F.lit("init")),
        "key_text": null_string(),
        "before_text": F.when(op == "d", row),
        "old_text": F.when((op == "u") & old_row.isNotNull(), old_row),
        "after_text": F.when(op.isin("c", "u", "r"), row),
        "row_schema": F.when(_is_ddl(j), ddl_context).otherwise(row_schema),
        "key_schema": F.when(pk.startswith("["), F.concat(F.lit('{"pkNames":'), pk, F.lit("}"))),
        "ddl": F.when(_is_ddl(j), j["sql"]),
    }


def _rules(j: Column, row: Column, cols: dict[str, Column]) -> list[Rule]:
    kind = _type(j)
    return [
        (_is_ddl(j) & (F.trim(F.coalesce(j["sql"], F.lit(""))) == ""),
         F.concat(F.lit("DDL message (type "), F.coalesce(kind, F.lit("?")), F.lit(") without sql")), "quarantine"),
        (_is_ddl(j), F.lit("ddl"), "ddl"),
        (kind == "TIDB_WATERMARK", F.lit("TiCDC watermark event (type TIDB_WATERMARK, not a row change)"), "skip"),
        # TiCDC's large-message handling: the values are not in the message (`large-message-handle-option`).
        (F.lower(F.trim(j["_tidb"]["onlyHandleKey"])) == "true",
         F.lit("TiCDC handle-key-only message (_tidb.onlyHandleKey): it carries the key columns only, the row's "
               "values must be read from TiDB"), "quarantine"),
        (F.trim(j["_tidb"]["claimCheckLocation"]) != "",
         F.concat(F.lit("TiCDC claim-check message: the row is stored outside the message, at "),
                  F.substring(F.trim(j["_tidb"]["claimCheckLocation"]), 1, 200)), "quarantine"),
        (kind.isNull(), F.lit("missing field type"), "quarantine"),
        (cols["op"].isNull(),
         F.concat(F.lit("unknown type '"), kind, F.lit("' (expected INSERT, UPDATE, DELETE, INIT or a DDL type)")),
         "quarantine"),
        (cols["table_id"].isNull(), F.lit("missing field table"), "quarantine"),
        (row.isNull(), F.concat(F.lit("type "), kind, F.lit(" without rows: data (or old) is null or empty")),
         "quarantine"),
        (~F.trim(row).startswith("{"), F.lit("a row of data/old is not a JSON object"), "quarantine"),
        ((kind == "UPDATE") & (F.size(j["old"]) > F.size(j["data"])),
         F.concat(F.lit("UPDATE with more old rows ("), F.size(j["old"]).cast("string"), F.lit(") than data rows ("),
                  F.size(j["data"]).cast("string"), F.lit(")")), "quarantine"),
        ((_old_shortfall(j) > 0) & _shortfall_misfits(j),
         F.concat(F.lit("UPDATE with "), F.size(j["data"]).cast("string"), F.lit(" data rows but "),
                  F.size(j["old"]).cast("string"),
                  F.lit(" old rows (canal leaves out the old row of the leading rows in which no column changed), "
                        "whose first does not fit data row "), (_old_shortfall(j) + 1).cast("string"),
                  F.lit(" (a column it names holds its old value there): which row each old row belongs to cannot "
                        "be told")), "quarantine"),
        (cols["source_pos"].isNull(), F.lit("no source position: field id must be a non-negative integer"),
         "quarantine"),
    ]


SHAPE = Shape(
    name="canal",
    detect=lambda j: j["coll"].isNull() & (
        j["data"].isNotNull() | j["old"].isNotNull() | j["isDdl"].isNotNull() | j["mysqlType"].isNotNull()
        | j["columnType"].isNotNull() | j["pkNames"].isNotNull() | j["sqlType"].isNotNull()
        | (j["type"].isNotNull() & j["table"].isNotNull())),
    columns=_columns,
    rules=_rules,
    rows=_rows,
)

DRS_SHAPE = replace(SHAPE, name="drs", columns=partial(_columns, drs=True))
"""The canal shape as ``--format drs`` reads it: ordered by DRS's event sequence number ``id`` alone."""

CANAL_SHAPE = replace(SHAPE, name="canal_flat", columns=partial(_columns, latin1_binary=True))
"""The canal shape as ``--format canal`` reads it: a MySQL binary value is canal's ISO-8859-1 text, never a DRS
byte list (``"[1, 2]"`` in a ``blob`` is those six bytes). :data:`SHAPE` (``--format auto``, and CKafka's
canal-format DDL) cannot tell a canal message from a DRS MySQL one, and takes a value that reads as a byte list
as one."""


def table_columns(spec: dict[str, Any]) -> list[ColumnType]:
    """Columns from a canal message's type maps (``{"dialect", "types", "codes"}``), in the message's order."""
    from cdclake.formats.sqltypes import column_type, latin1_bytes_from_text, mysql_bytes_from_text

    types = spec.get("types") if isinstance(spec.get("types"), dict) else {}
    dialect_name = str(spec.get("dialect") or "mysql")
    latin1 = spec.get("binary") == "latin1" and dialect_name == "mysql"
    # DRS's relational variant numbers its sqlType codes its own way (e.g. 16 for a timestamp): JDBC codes only
    # for MySQL.
    codes = spec.get("codes") if isinstance(spec.get("codes"), dict) and dialect_name == "mysql" else {}
    # MySQL's column names are case-insensitive: a `sqlType` name spelled otherwise than in `mysqlType` is the
    # same column (Apache Paimon's canal test data has `"mysqlType": {"V1": ...}, "sqlType": {"v1": ...}`).
    spelled = {name.lower(): name for name in types}
    codes = {spelled.get(name.lower(), name): code for name, code in codes.items()}
    names = list(types) + [n for n in codes if n not in types]
    columns = []
    for name in names:
        code = codes.get(name)
        try:
            jdbc = int(code) if code is not None else None
        except (TypeError, ValueError):
            jdbc = None
        column = column_type(name, types.get(name), dialect=dialect_name, jdbc_type=jdbc)
        if latin1 and column.convert is mysql_bytes_from_text:
            column = replace(column, convert=latin1_bytes_from_text)
        columns.append(column)
    return columns
