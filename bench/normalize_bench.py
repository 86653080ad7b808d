"""Normalize throughput per format against Spark's own floor, on the same machine in the same run.

Target: normalize runs at >= 0.7x the floor's speed for every format at 1M events
(``ratio = floor median time / normalize median time``; 1.0 means as fast as the floor).

For each format:

1. generate N change events (two MySQL/PostgreSQL-like tables of 8 columns each: int, bigint, decimal(12,2),
   varchar, datetime, date; 60% inserts, 30% updates, 10% deletes; one row per message) in that format's
   documented shape, written once into a work directory as JSON Lines files;
2. land them as one batch (:func:`cdclake.pipeline.land_inputs`, ``framing="jsonl"``; timed once, reported apart);
3. after one warm-up of each (on a batch of the first input file only), time alternately, ``--repeats`` times:

   - **floor**: a hand-written Spark job over the same landed raw files: ``spark.read.schema(RAW_SCHEMA).json``,
     one ``from_json`` of ``value`` with an explicit schema of the message's shape whose leaf fields carry their
     JSON types, the conversions a hand-written job needs to produce typed columns (cast, base64 decimal, epoch
     dates/timestamps), and one Parquet write (both tables in one dataset, their columns side by side);
   - **normalize**: :func:`cdclake.pipeline.normalize_batch` on that batch (staged Parquet per table + quarantine).

The floor and staged outputs are compared after the first timed pair (rows per table and op, sums of the decimal
column), so both did the same work. Each normalize run's Spark jobs are read back from Spark's status store (job
call site and duration), which shows where its time goes.

Usage::

    .venv/bin/python bench/normalize_bench.py                      # quick check: 100k events, registered formats
    .venv/bin/python bench/normalize_bench.py --events 1000000 --formats debezium,canal,drs,ckafka,dtle \\
        --out bench/results/

Spark is tuned by the project's own variables (``CDCLAKE_SPARK_MASTER``, ``CDCLAKE_DRIVER_MEMORY``,
``CDCLAKE_SHUFFLE_PARTITIONS``); the values in effect are recorded with the results.
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import json
import logging
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

REPO = Path(__file__).resolve().parents[1]

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

log = logging.getLogger("normalize_bench")

ALL_FORMATS = ("debezium", "canal", "drs", "ckafka", "dtle")
TARGET_RATIO = 0.7
KEYS = ("customers=id", "orders=order_id")
"""Declared keys: jsonl framing carries no message key, and CKafka's Official Format I carries none at all."""

# ----------------------------------------------------------------------------------------------------------------
# The simulated source: two tables and a deterministic change stream over them.
# ----------------------------------------------------------------------------------------------------------------

INT, BIGINT, DECIMAL, VARCHAR, DATETIME, DATE = "int", "bigint", "decimal", "varchar", "datetime", "date"
SCALE = 2
PRECISION = 12


@dataclass(frozen=True)
class Table:
    """One source table: name, key column and (column, kind) pairs in column order."""

    name: str
    key: str
    columns: tuple[tuple[str, str], ...]


CUSTOMERS = Table("customers", "id", (
    ("id", INT), ("account_no", BIGINT), ("balance", DECIMAL), ("name", VARCHAR), ("email", VARCHAR),
    ("created_at", DATETIME), ("birth_date", DATE), ("level", INT),
))
ORDERS = Table("orders", "order_id", (
    ("order_id", BIGINT), ("customer_id", INT), ("amount", DECIMAL), ("status", VARCHAR), ("note", VARCHAR),
    ("ordered_at", DATETIME), ("ship_date", DATE), ("quantity", INT),
))
TABLES = (CUSTOMERS, ORDERS)
DATABASE = "shop"
PG_SCHEMA = "public"

_FIRST = ("Anne", "Bo", "Chloé", "Dmitri", "Eun-ji", "Farid", "Grace", "Hiro", "Ines", "José", "Kai", "Lena",
          "Mateo", "Noor", "Olu", "Priya", "王芳", "Sven", "Tomás", "Zoë")
_LAST = ("Kretchmar", "Nguyen", "Okafor", "Schmidt", "Tanaka", "Silva", "Kowalski", "Haddad", "Moreau", "李")
_STATUS = ("NEW", "PAID", "PACKED", "SHIPPED", "DELIVERED")
_NOTES = ("leave at the door", "gift wrap, please", "call before delivery", "fragile", "deliver after 18:00")
_BASE_SECONDS = 1_700_000_000  # 2023-11-14T22:13:20Z
_EPOCH_ORDINAL = dt.date(1970, 1, 1).toordinal()


def _mix(key: int, version: int) -> int:
    h = ((key * 0x9E3779B1) ^ (version * 0x85EBCA77)) & 0xFFFFFFFF
    return h ^ (h >> 15)


def row_values(table: Table, key: int, version: int) -> list[Any]:
    """One row's values in column order: ints, decimals as unscaled ints, str, datetimes as epoch micros,
    dates as days since the epoch, None for SQL NULL."""
    h = _mix(key, version)
    if table is CUSTOMERS:
        return [
            key,
            10_000_000_000 + key * 7,
            h % 200_000_000 - 1_000_000,  # -10,000.00 .. 1,990,000.00
            f"{_FIRST[h % 20]} {_LAST[(h >> 5) % 10]}",
            f"user{key}@example.com",
            (_BASE_SECONDS + key * 37) * 1_000_000,
            None if h % 10 == 0 else 3_650 + h % 15_000,
            version % 10,
        ]
    return [
        5_000_000_000 + key,
        1 + h % 100_000,
        100 + h % 10_000_000,
        _STATUS[version % 5],
        None if h % 3 == 0 else _NOTES[(h >> 3) % 5],
        (_BASE_SECONDS + key * 11) * 1_000_000,
        None if h % 4 == 0 else 19_700 + h % 400,
        1 + h % 20,
    ]


@dataclass(frozen=True)
class Change:
    """One change event: its sequence number, table, op (c/u/d), key and before/after row values."""

    seq: int
    table: Table
    op: str
    key: int
    before: list[Any] | None
    after: list[Any] | None


def changes(n: int, seed: int = 7) -> Iterator[Change]:
    """A deterministic stream of ``n`` changes: ~60% inserts, 30% updates, 10% deletes over two tables.

    Inserts take the next key; deletes remove the oldest live row; updates hit a random live row.
    """
    import random

    rng = random.Random(seed)
    next_key = {t.name: 0 for t in TABLES}
    deleted = {t.name: 0 for t in TABLES}
    for seq in range(n):
        table = TABLES[rng.random() < 0.5]
        live = next_key[table.name] - deleted[table.name]
        kind = seq % 10
        if kind < 6 or live < 2:
            next_key[table.name] += 1
            key = next_key[table.name]
            yield Change(seq, table, "c", key, None, row_values(table, key, seq))
        elif kind < 9:
            key = rng.randint(deleted[table.name] + 1, next_key[table.name])
            yield Change(seq, table, "u", key, row_values(table, key, seq - 1), row_values(table, key, seq))
        else:
            deleted[table.name] += 1
            key = deleted[table.name]
            yield Change(seq, table, "d", key, row_values(table, key, seq - 1), None)


# ----------------------------------------------------------------------------------------------------------------
# Encoders: one JSON text per change, in each format's documented shape (plain string templates, for speed).
# ----------------------------------------------------------------------------------------------------------------


def _decimal_b64(unscaled: int) -> str:
    return base64.b64encode(unscaled.to_bytes(unscaled.bit_length() // 8 + 1, "big", signed=True)).decode()


def _decimal_text(unscaled: int) -> str:
    sign = "-" if unscaled < 0 else ""
    a = abs(unscaled)
    return f"{sign}{a // 100}.{a % 100:02d}"


def _datetime_text(micros: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(micros // 1_000_000))


def _date_text(days: int) -> str:
    return dt.date.fromordinal(_EPOCH_ORDINAL + days).isoformat()


def _json_str(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


def _connect_row(table: Table, values: list[Any], *, timestamp_unit: int) -> str:
    """A row image in the Kafka Connect JSON converter's physical form (Debezium)."""
    parts = []
    for (name, kind), v in zip(table.columns, values):
        if v is None:
            text = "null"
        elif kind == DECIMAL:
            text = f'"{_decimal_b64(v)}"'
        elif kind == VARCHAR:
            text = _json_str(v)
        elif kind == DATETIME:
            text = str(v // timestamp_unit)
        else:
            text = str(v)
        parts.append(f'"{name}":{text}')
    return "{" + ",".join(parts) + "}"


def _text_row(table: Table, values: list[Any], only: set[str] | None = None) -> str:
    """A row image with every value as a JSON string (canal, DRS, CKafka)."""
    parts = []
    for (name, kind), v in zip(table.columns, values):
        if only is not None and name not in only:
            continue
        if v is None:
            text = "null"
        elif kind == DECIMAL:
            text = f'"{_decimal_text(v)}"'
        elif kind == DATETIME:
            text = f'"{_datetime_text(v)}"'
        elif kind == DATE:
            text = f'"{_date_text(v)}"'
        elif kind == VARCHAR:
            text = _json_str(v)
        else:
            text = f'"{v}"'
        parts.append(f'"{name}":{text}')
    return "{" + ",".join(parts) + "}"


def _connect_field(name: str, kind: str, *, optional: bool, timestamp_name: str) -> dict[str, Any]:
    if kind == INT:
        spec: dict[str, Any] = {"type": "int32"}
    elif kind == BIGINT:
        spec = {"type": "int64"}
    elif kind == DECIMAL:
        spec = {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "version": 1,
                "parameters": {"scale": str(SCALE), "connect.decimal.precision": str(PRECISION)}}
    elif kind == VARCHAR:
        spec = {"type": "string"}
    elif kind == DATETIME:
        spec = {"type": "int64", "name": timestamp_name, "version": 1}
    else:
        spec = {"type": "int32", "name": "io.debezium.time.Date", "version": 1}
    return {**spec, "optional": optional, "field": name}


def _string_fields(*names: str, optional: bool = True) -> list[dict[str, Any]]:
    return [{"type": "string", "optional": optional, "field": n} for n in names]


def _envelope_schema(table: Table, *, prefix: str, namespace: str, timestamp_name: str,
                     source: dict[str, Any]) -> str:
    row_fields = [_connect_field(n, k, optional=n != table.key, timestamp_name=timestamp_name)
                  for n, k in table.columns]
    row_name = f"{prefix}.{namespace}.{table.name}.Value"
    schema = {
        "type": "struct",
        "fields": [
            {"type": "struct", "fields": row_fields, "optional": True, "name": row_name, "field": "before"},
            {"type": "struct", "fields": row_fields, "optional": True, "name": row_name, "field": "after"},
            source,
            {"type": "string", "optional": False, "field": "op"},
            {"type": "int64", "optional": True, "field": "ts_ms"},
        ],
        "optional": False,
        "name": f"{prefix}.{namespace}.{table.name}.Envelope",
        "version": 1,
    }
    return json.dumps(schema, separators=(",", ":"))


_PG_SOURCE_SCHEMA = {
    "type": "struct", "optional": False, "name": "io.debezium.connector.postgresql.Source", "field": "source",
    "fields": [
        *_string_fields("version", "connector", "name", optional=False),
        {"type": "int64", "optional": False, "field": "ts_ms"},
        {"type": "string", "optional": True, "name": "io.debezium.data.Enum", "version": 1,
         "parameters": {"allowed": "true,last,false,incremental"}, "default": "false", "field": "snapshot"},
        *_string_fields("db", optional=False), *_string_fields("sequence"),
        *_string_fields("schema", "table", optional=False),
        {"type": "int64", "optional": True, "field": "txId"},
        {"type": "int64", "optional": True, "field": "lsn"},
        {"type": "int64", "optional": True, "field": "xmin"},
    ],
}
_DTLE_SOURCE_SCHEMA = {
    "type": "struct", "optional": False, "name": "io.debezium.connector.mysql.Source", "field": "source",
    "fields": [
        *_string_fields("version"), *_string_fields("name", optional=False),
        {"type": "int64", "optional": False, "field": "server_id"},
        {"type": "int64", "optional": False, "field": "ts_sec"},
        *_string_fields("gtid"), *_string_fields("file", optional=False),
        {"type": "int64", "optional": False, "field": "pos"},
        {"type": "int32", "optional": False, "field": "row"},
        {"type": "boolean", "optional": True, "field": "snapshot"},
        {"type": "int64", "optional": True, "field": "thread"},
        *_string_fields("db", "table"),
    ],
}


def _binlog(seq: int) -> tuple[int, int]:
    """(binlog file sequence, position): 400k events per binlog file, ~300 bytes per event."""
    return 3 + seq // 400_000, 4 + (seq % 400_000) * 300


class DebeziumEncoder:
    """Debezium 2.3 PostgreSQL connector, JSON converter with schemas (schema + payload), REPLICA IDENTITY FULL."""

    def __init__(self) -> None:
        self.schemas = {t.name: _envelope_schema(t, prefix="bench", namespace=PG_SCHEMA,
                                                 timestamp_name="io.debezium.time.MicroTimestamp",
                                                 source=_PG_SOURCE_SCHEMA) for t in TABLES}

    def __call__(self, c: Change) -> str:
        lsn = 24_023_128 + c.seq * 152
        ts_ms = _BASE_SECONDS * 1000 + c.seq * 3
        before = "null" if c.before is None else _connect_row(c.table, c.before, timestamp_unit=1)
        after = "null" if c.after is None else _connect_row(c.table, c.after, timestamp_unit=1)
        source = (f'{{"version":"2.3.7.Final","connector":"postgresql","name":"bench","ts_ms":{ts_ms},'
                  f'"snapshot":"false","db":"{DATABASE}","sequence":"[\\"{lsn - 152}\\",\\"{lsn}\\"]",'
                  f'"schema":"{PG_SCHEMA}","table":"{c.table.name}","txId":{771 + c.seq // 3},"lsn":{lsn},'
                  f'"xmin":null}}')
        payload = f'{{"before":{before},"after":{after},"source":{source},"op":"{c.op}","ts_ms":{ts_ms + 41}}}'
        return f'{{"schema":{self.schemas[c.table.name]},"payload":{payload}}}'


class DtleEncoder:
    """dtle's Kafka output: Debezium-compatible MySQL events (source file/pos/row/gtid/server_id/ts_sec)."""

    def __init__(self) -> None:
        self.schemas = {t.name: _envelope_schema(t, prefix="dtle", namespace=DATABASE,
                                                 timestamp_name="io.debezium.time.Timestamp",
                                                 source=_DTLE_SOURCE_SCHEMA) for t in TABLES}

    def __call__(self, c: Change) -> str:
        file_seq, pos = _binlog(c.seq)
        ts_sec = _BASE_SECONDS + c.seq // 300
        before = "null" if c.before is None else _connect_row(c.table, c.before, timestamp_unit=1000)
        after = "null" if c.after is None else _connect_row(c.table, c.after, timestamp_unit=1000)
        source = (f'{{"version":"0.8.3.Final","name":"dtle","server_id":1,"ts_sec":{ts_sec},'
                  f'"gtid":"acd7d195-06cd-11e9-928f-02000aba3e28:{1000 + c.seq // 3}",'
                  f'"file":"mysql-bin.{file_seq:06d}","pos":{pos},"row":0,"snapshot":false,"thread":null,'
                  f'"db":"{DATABASE}","table":"{c.table.name}"}}')
        payload = f'{{"before":{before},"after":{after},"source":{source},"op":"{c.op}","ts_ms":{ts_sec * 1000 + 7}}}'
        return f'{{"schema":{self.schemas[c.table.name]},"payload":{payload}}}'


_CANAL_MYSQL_TYPES = {INT: "int(11)", BIGINT: "bigint(20)", DECIMAL: f"decimal({PRECISION},{SCALE})",
                      VARCHAR: "varchar(255)", DATETIME: "datetime", DATE: "date"}
_DRS_MYSQL_TYPES = {INT: "int", BIGINT: "bigint", DECIMAL: "decimal", VARCHAR: "varchar", DATETIME: "datetime",
                    DATE: "date"}
_CANAL_SQL_TYPES = {INT: 4, BIGINT: -5, DECIMAL: 3, VARCHAR: 12, DATETIME: 93, DATE: 91}
_DRS_SQL_TYPES = {**_CANAL_SQL_TYPES, DATETIME: 94}  # as in the DRS document's example (datetime -> 94)
_FLAT_TYPE = {"c": "INSERT", "u": "UPDATE", "d": "DELETE"}


def _type_maps(table: Table, mysql: dict[str, str], sql: dict[str, int]) -> tuple[str, str]:
    return (json.dumps({n: mysql[k] for n, k in table.columns}, separators=(",", ":")),
            json.dumps({n: sql[k] for n, k in table.columns}, separators=(",", ":")))


class CanalEncoder:
    """canal FlatMessage (canal 1.1.x JSON to Kafka/RocketMQ): ``data``/``old`` arrays of string values,
    ``mysqlType``/``sqlType``, ``pkNames``; UPDATE's ``old`` holds only the changed columns; DELETE's row is in
    ``data``; ``id`` is canal's batch id (shared by the messages of one batch)."""

    _CHANGING = {"customers": {"balance", "level"}, "orders": {"amount", "status"}}

    def __init__(self) -> None:
        self.types = {t.name: _type_maps(t, _CANAL_MYSQL_TYPES, _CANAL_SQL_TYPES) for t in TABLES}

    def __call__(self, c: Change) -> str:
        mysql_type, sql_type = self.types[c.table.name]
        es = _BASE_SECONDS * 1000 + c.seq * 3
        if c.op == "u":
            data, old = _text_row(c.table, c.after), _text_row(c.table, c.before, self._CHANGING[c.table.name])
            old = f"[{old}]"
        else:
            data, old = _text_row(c.table, c.after if c.op == "c" else c.before), "null"
        return (f'{{"data":[{data}],"database":"{DATABASE}","es":{es},"id":{1 + c.seq // 64},"isDdl":false,'
                f'"mysqlType":{mysql_type},"old":{old},"pkNames":["{c.table.key}"],"sql":"",'
                f'"sqlType":{sql_type},"table":"{c.table.name}","ts":{es + 120},"type":"{_FLAT_TYPE[c.op]}"}}')


class DrsEncoder:
    """Huawei Cloud DRS Kafka JSON for MySQL, as documented: ``data`` is the new row (insert/update), ``old`` the
    row before (update) or the deleted row (delete), full images; ``id`` increases per event."""

    def __init__(self) -> None:
        self.types = {t.name: _type_maps(t, _DRS_MYSQL_TYPES, _DRS_SQL_TYPES) for t in TABLES}

    def __call__(self, c: Change) -> str:
        mysql_type, sql_type = self.types[c.table.name]
        es = _BASE_SECONDS * 1000 + c.seq * 3
        data = "null" if c.after is None else f"[{_text_row(c.table, c.after)}]"
        old = "null" if c.before is None else f"[{_text_row(c.table, c.before)}]"
        return (f'{{"mysqlType":{mysql_type},"id":{27_677 + c.seq},"es":{es},"ts":{es + 120},'
                f'"database":"{DATABASE}","table":"{c.table.name}","type":"{_FLAT_TYPE[c.op]}","isDdl":false,'
                f'"sql":"","sqlType":{sql_type},"data":{data},"old":{old},"pkNames":["{c.table.key}"]}}')


class CkafkaEncoder:
    """Tencent Cloud CKafka connector, MySQL subscription "Official Format I" (DML): no types, no key."""

    _TYPE = {"c": "I", "u": "U", "d": "D"}

    def __call__(self, c: Change) -> str:
        file_seq, pos = _binlog(c.seq)
        new = "null" if c.after is None else _text_row(c.table, c.after)
        old = "null" if c.before is None else _text_row(c.table, c.before)
        when = time.strftime("%Y%m%d%H%M%S", time.gmtime(_BASE_SECONDS + c.seq // 300))
        return (f'{{"BINLOG_NAME":"mysql-bin.{file_seq:06d}","BINLOG_POS":{pos},"DATABASE":"{DATABASE}",'
                f'"EVENT_SERVER_ID":null,"GLOBAL_ID":null,"GROUP_ID":null,"NEW_VALUES":{new},'
                f'"OLD_VALUES":{old},"TABLE":"{c.table.name}","TIME":"{when}","TYPE":"{self._TYPE[c.op]}"}}')


ENCODERS: dict[str, Callable[[], Callable[[Change], str]]] = {
    "debezium": DebeziumEncoder, "dtle": DtleEncoder, "canal": CanalEncoder, "drs": DrsEncoder,
    "ckafka": CkafkaEncoder,
}


def write_inputs(fmt: str, n: int, directory: Path, *, per_file: int, seed: int) -> tuple[list[str], int]:
    """Write ``n`` messages of a format as JSON Lines files of ``per_file`` messages; return (paths, bytes)."""
    directory.mkdir(parents=True, exist_ok=True)
    encode = ENCODERS[fmt]()
    paths: list[str] = []
    size = 0
    chunk: list[str] = []
    for change in changes(n, seed):
        chunk.append(encode(change))
        if len(chunk) == per_file:
            size += _flush(chunk, directory, paths)
    if chunk:
        size += _flush(chunk, directory, paths)
    return paths, size


def _flush(chunk: list[str], directory: Path, paths: list[str]) -> int:
    path = directory / f"part-{len(paths):04d}.jsonl"
    data = ("\n".join(chunk) + "\n").encode("utf-8")
    path.write_bytes(data)
    paths.append(str(path))
    chunk.clear()
    return len(data)


# ----------------------------------------------------------------------------------------------------------------
# The floor: what a hand-written Spark job does with the same landed raw files.
# ----------------------------------------------------------------------------------------------------------------


def _union_columns() -> list[tuple[str, str]]:
    return [col for t in TABLES for col in t.columns]


def _json_leaf(kind: str, fmt: str) -> Any:
    """The Spark type of a column's JSON value as the format sends it."""
    from pyspark.sql.types import IntegerType, LongType, StringType

    if fmt in ("debezium", "dtle"):
        return {INT: IntegerType(), BIGINT: LongType(), DECIMAL: StringType(), VARCHAR: StringType(),
                DATETIME: LongType(), DATE: IntegerType()}[kind]
    return StringType()


def _connect_decimal(c: "Column") -> "Column":
    """Connect Decimal (base64 big-endian two's complement, < 8 bytes here) -> decimal(12,2)."""
    from pyspark.sql import functions as F

    h = F.hex(F.unbase64(c))
    unsigned = F.conv(h, 16, 10).cast("long")
    signed = F.when(F.substring(h, 1, 1) >= "8", unsigned - F.pow(F.lit(2), F.length(h) * 4).cast("long")) \
        .otherwise(unsigned)
    return (signed.cast("decimal(18,0)") / F.lit(100)).cast(f"decimal({PRECISION},{SCALE})")


def _typed(c: "Column", kind: str, fmt: str) -> "Column":
    """A column's JSON value -> its SQL type, as a hand-written job would convert it."""
    from pyspark.sql import functions as F

    if fmt in ("debezium", "dtle"):
        if kind == DECIMAL:
            return _connect_decimal(c)
        if kind == DATETIME:
            stamp = F.timestamp_micros(c) if fmt == "debezium" else F.timestamp_millis(c)
            return stamp.cast("timestamp_ntz")
        if kind == DATE:
            return F.date_from_unix_date(c)
        return c
    target = {INT: "int", BIGINT: "bigint", DECIMAL: f"decimal({PRECISION},{SCALE})", VARCHAR: "string",
              DATETIME: "timestamp_ntz", DATE: "date"}[kind]
    return c if target == "string" else c.cast(target)


def floor_job(raw: "DataFrame", fmt: str) -> "DataFrame":
    """Raw records -> typed change rows of both tables (one ``from_json``; pure)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, IntegerType, LongType, StringType, StructField, StructType

    cols = _union_columns()
    row_json = StructType([StructField(n, _json_leaf(k, fmt)) for n, k in cols])

    def image(r: "Column") -> "Column":
        return F.when(r.isNull(), F.lit(None)).otherwise(
            F.struct(*[_typed(r[n], k, fmt).alias(n) for n, k in cols]))

    if fmt in ("debezium", "dtle"):
        if fmt == "debezium":
            source = StructType([StructField("ts_ms", LongType()), StructField("schema", StringType()),
                                 StructField("table", StringType()), StructField("txId", LongType()),
                                 StructField("lsn", LongType())])
        else:
            source = StructType([StructField("ts_sec", LongType()), StructField("file", StringType()),
                                 StructField("pos", LongType()), StructField("row", IntegerType()),
                                 StructField("db", StringType()), StructField("table", StringType())])
        schema = StructType([StructField("payload", StructType([
            StructField("before", row_json), StructField("after", row_json), StructField("source", source),
            StructField("op", StringType()), StructField("ts_ms", LongType())]))])
        p = raw.select(F.from_json("value", schema)["payload"].alias("p")).select("p.*")
        src = F.col("source")
        if fmt == "debezium":
            namespace, position = src["schema"], F.format_string("%016x", src["lsn"])
            ts = F.timestamp_millis(src["ts_ms"])
        else:
            namespace, ts = src["db"], F.timestamp_seconds(src["ts_sec"])
            position = F.format_string("%s/%016x/%08x", src["file"], src["pos"], src["row"])
        return p.select(
            F.concat_ws(".", namespace, src["table"]).alias("table_id"), F.col("op"),
            position.alias("position"), ts.alias("source_ts"),
            image(F.col("before")).alias("before"), image(F.col("after")).alias("after"),
        )
    if fmt in ("canal", "drs"):
        schema = StructType([
            StructField("data", ArrayType(row_json)), StructField("old", ArrayType(row_json)),
            StructField("database", StringType()), StructField("table", StringType()),
            StructField("type", StringType()), StructField("id", LongType()), StructField("es", LongType()),
        ])
        m = raw.select(F.from_json("value", schema).alias("m")).select("m.*")
        op = F.col("type")
        # DRS documents a DELETE's rows in `old`; canal puts them in `data`.
        rows = m.select("*", F.posexplode_outer(F.when(op == "DELETE", F.coalesce("data", "old"))
                                                .otherwise(F.col("data"))).alias("row_index", "row"))
        old = F.col("old")[F.col("row_index")]
        if fmt == "canal":  # old = the changed columns only; the rest of the before image is the row itself
            before = F.when(op == "UPDATE", F.struct(*[F.coalesce(old[n], F.col("row")[n]).alias(n)
                                                       for n, _ in cols]))
        else:
            before = F.when(op == "UPDATE", old)
        before = F.when(op == "DELETE", F.col("row")).otherwise(before)
        after = F.when(op != "DELETE", F.col("row"))
        # The images first, then their typing: typing fields of an inline CASE would copy it per column.
        return rows.select(
            F.concat_ws(".", "database", "table").alias("table_id"), op.alias("op"),
            F.format_string("%016x/%05d", F.col("id"), F.col("row_index")).alias("position"),
            F.timestamp_millis(F.col("es")).alias("source_ts"), before.alias("before"), after.alias("after"),
        ).select("table_id", "op", "position", "source_ts", image(F.col("before")).alias("before"),
                 image(F.col("after")).alias("after"))
    if fmt == "ckafka":
        schema = StructType([
            StructField("BINLOG_NAME", StringType()), StructField("BINLOG_POS", LongType()),
            StructField("DATABASE", StringType()), StructField("TABLE", StringType()),
            StructField("NEW_VALUES", row_json), StructField("OLD_VALUES", row_json),
            StructField("TIME", StringType()), StructField("TYPE", StringType()),
        ])
        m = raw.select(F.from_json("value", schema).alias("m")).select("m.*")
        return m.select(
            F.concat_ws(".", "DATABASE", "TABLE").alias("table_id"), F.col("TYPE").alias("op"),
            F.format_string("%s/%016x", F.col("BINLOG_NAME"), F.col("BINLOG_POS")).alias("position"),
            F.to_timestamp(F.col("TIME"), "yyyyMMddHHmmss").alias("source_ts"),
            image(F.col("OLD_VALUES")).alias("before"), image(F.col("NEW_VALUES")).alias("after"),
        )
    raise ValueError(f"no floor job for format {fmt!r}")


# ----------------------------------------------------------------------------------------------------------------
# Measurement.
# ----------------------------------------------------------------------------------------------------------------

_CANONICAL_OP = {"c": "c", "u": "u", "d": "d", "r": "c", "INSERT": "c", "UPDATE": "u", "DELETE": "d",
                 "I": "c", "U": "u", "D": "d"}


def _gc(spark: "SparkSession") -> None:
    spark.sparkContext._jvm.System.gc()  # type: ignore[union-attr]


def job_timeline(spark: "SparkSession", group: str) -> list[dict[str, Any]]:
    """The Spark jobs of a job group from the status store: call site, duration, tasks (in submission order)."""
    sc = spark.sparkContext
    jvm = sc._jvm  # type: ignore[union-attr]
    store = sc._jsc.sc().statusStore()  # type: ignore[union-attr]
    jobs = jvm.scala.collection.JavaConverters.seqAsJavaList(store.jobsList(None))
    out = []
    for j in jobs:
        jg = j.jobGroup()
        if not jg.isDefined() or jg.get() != group:
            continue
        start = j.submissionTime().get().getTime() if j.submissionTime().isDefined() else None
        end = j.completionTime().get().getTime() if j.completionTime().isDefined() else None
        out.append({"job": j.jobId(), "call_site": j.name(), "status": str(j.status().toString()),
                    "tasks": j.numTasks(), "start_ms": start,
                    "seconds": None if start is None or end is None else (end - start) / 1000})
    out.sort(key=lambda r: r["job"])
    return out


def _timed(spark: "SparkSession", group: str, action: Callable[[], Any]) -> tuple[float, Any]:
    _gc(spark)
    spark.sparkContext.setJobGroup(group, group)
    try:
        start = time.perf_counter()
        result = action()
        return time.perf_counter() - start, result
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
        spark.sparkContext.setLocalProperty("spark.job.description", None)  # type: ignore[arg-type]


def _summarize_timeline(jobs: list[dict[str, Any]], wall: float) -> dict[str, Any]:
    by_site: dict[str, dict[str, Any]] = {}
    for j in jobs:
        s = by_site.setdefault(j["call_site"], {"call_site": j["call_site"], "jobs": 0, "seconds": 0.0, "tasks": 0})
        s["jobs"] += 1
        s["seconds"] = round(s["seconds"] + (j["seconds"] or 0), 3)
        s["tasks"] += j["tasks"]
    in_jobs = sum(j["seconds"] or 0 for j in jobs)
    return {"wall_seconds": round(wall, 3), "in_spark_jobs_seconds": round(in_jobs, 3),
            "outside_jobs_seconds": round(wall - in_jobs, 3), "jobs": len(jobs),
            "by_call_site": sorted(by_site.values(), key=lambda s: -s["seconds"]),
            "in_order": [{k: j[k] for k in ("job", "call_site", "seconds", "tasks")} for j in jobs]}


def consistency(spark: "SparkSession", floor_out: str, staged: dict[str, str]) -> dict[str, Any]:
    """Rows per (table, op) and sums of each table's decimal column in the floor's and normalize's outputs."""
    from pyspark.sql import functions as F

    def agg(df: "DataFrame", table: Table) -> dict[str, Any]:
        dec = next(n for n, k in table.columns if k == DECIMAL)
        rows = df.groupBy("op").agg(
            F.count(F.lit(1)).alias("n"),
            F.sum(F.col(f"after.{dec}").cast("decimal(20,2)")).alias("after_sum"),
            F.sum(F.col(f"before.{dec}").cast("decimal(20,2)")).alias("before_sum"),
        ).collect()
        return {_CANONICAL_OP.get(r["op"], r["op"]): {"rows": r["n"], f"after.{dec}": str(r["after_sum"]),
                                                      f"before.{dec}": str(r["before_sum"])}
                for r in sorted(rows, key=lambda r: r["op"])}

    from cdclake import normalize

    def read_staged(path: str) -> "DataFrame":  # older commits (--src) staged only the accepted rows
        reader = getattr(normalize, "read_staged", None)
        return reader(spark, Path(path)) if reader else spark.read.parquet(path)

    floor = spark.read.parquet(floor_out)
    result: dict[str, Any] = {"tables": {}, "equal": True}
    for table in TABLES:
        tid = next((t for t in staged if t.endswith("." + table.name)), None)
        got_floor = agg(floor.where(F.col("table_id").endswith("." + table.name)), table)
        got_norm = agg(read_staged(staged[tid]), table) if tid else {}
        equal = got_floor == got_norm
        result["tables"][table.name] = {"floor": got_floor, "normalize": got_norm, "equal": equal}
        result["equal"] = result["equal"] and equal
    return result


def machine_facts(spark: "SparkSession") -> dict[str, Any]:
    """Where the numbers come from: hardware, Spark settings, versions."""
    import pyspark

    import cdclake

    mem_kb = 0
    cpu_model = platform.processor()
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_kb = int(line.split()[1])
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    conf = spark.sparkContext.getConf()
    jvm = spark.sparkContext._jvm  # type: ignore[union-attr]

    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=False).stdout.strip()
        except OSError:
            return ""

    return {
        "nproc": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "cpu_model": cpu_model,
        "memory_gib": round(mem_kb / 1024 / 1024, 1),
        "os": platform.platform(),
        "spark_master": spark.sparkContext.master,
        "spark_default_parallelism": spark.sparkContext.defaultParallelism,
        "spark_driver_memory": conf.get("spark.driver.memory"),
        "spark_shuffle_partitions": spark.conf.get("spark.sql.shuffle.partitions"),
        "spark_adaptive": spark.conf.get("spark.sql.adaptive.enabled"),
        "spark_max_partition_bytes": spark.conf.get("spark.sql.files.maxPartitionBytes"),
        "python": sys.version.split()[0],
        "pyspark": pyspark.__version__,
        "spark": spark.version,
        "java": jvm.System.getProperty("java.version"),
        "cdclake": cdclake.__version__,
        "cdclake_source": str(Path(cdclake.__file__).resolve().parents[1]),
        "git_commit": git("rev-parse", "--short", "HEAD"),
        "git_dirty_files": len([line for line in git("status", "--porcelain").splitlines() if line.strip()]),
        "env": {k: v for k, v in os.environ.items() if k.startswith("CDCLAKE_")},
        "loadavg_at_start": list(os.getloadavg()),
    }


def profile_steps(spark: "SparkSession", fmt: str, raw_paths: list[str]) -> dict[str, Any]:
    """Time the pieces of the work on their own (each once, untimed runs already warmed the JVM).

    ``noop`` writes evaluate every output column but write nothing, so they separate parsing from writing.
    """
    from pyspark import StorageLevel

    from cdclake.formats import get_normalizer
    from cdclake.normalize import RAW_SCHEMA

    def raw() -> "DataFrame":
        return spark.read.schema(RAW_SCHEMA).json(raw_paths)

    def noop(df: "DataFrame") -> Callable[[], None]:
        return lambda: df.write.format("noop").mode("overwrite").save()

    steps: dict[str, Any] = {}
    for name, action in (
        ("read_raw_noop", noop(raw())),
        ("floor_noop", noop(floor_job(raw(), fmt))),
        ("normalizer_parse_noop", noop(get_normalizer(fmt).parse(raw()))),
    ):
        seconds, _ = _timed(spark, f"bench-{fmt}-profile-{name}", action)
        steps[name] = round(seconds, 3)
        log.info("%s profile %s: %.2fs", fmt, name, seconds)
    parsed = get_normalizer(fmt).parse(raw()).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        seconds, _ = _timed(spark, f"bench-{fmt}-profile-cache", parsed.count)
        steps["normalizer_parse_persist_count"] = round(seconds, 3)
        infos = spark.sparkContext._jsc.sc().getRDDStorageInfo()  # type: ignore[union-attr]
        steps["parsed_cache_memory_mb"] = round(sum(i.memSize() for i in infos) / 1e6, 1)
        steps["parsed_cache_disk_mb"] = round(sum(i.diskSize() for i in infos) / 1e6, 1)
        seconds, _ = _timed(spark, f"bench-{fmt}-profile-from-cache",
                            noop(parsed.where("status = 'ok'").select("table_id", "after_text")))
        steps["scan_cache_noop"] = round(seconds, 3)
    finally:
        parsed.unpersist(blocking=True)
    log.info("%s profile: %s", fmt, steps)
    return steps


def bench_format(spark: "SparkSession", settings: Any, fmt: str, args: argparse.Namespace,
                 work: Path) -> dict[str, Any]:
    """Generate, land and measure one format; returns its result entry."""
    from cdclake.keys import KeySpec
    from cdclake.landing import batch_raw_paths
    from cdclake.normalize import RAW_SCHEMA, staging_dir
    from cdclake.pipeline import land_inputs, normalize_batch

    source = f"bench_{fmt}"
    input_dir = work / "inputs" / fmt
    marker = input_dir / ".generated.json"
    wanted = {"events": args.events, "file_events": args.file_events, "seed": args.seed}
    t0 = time.perf_counter()
    if marker.exists() and json.loads(marker.read_text())["params"] == wanted:
        # Same inputs as before (--workdir --keep-inputs): landing them again returns the batch they are in.
        done = json.loads(marker.read_text())
        inputs, input_bytes = done["paths"], done["bytes"]
    else:
        shutil.rmtree(input_dir, ignore_errors=True)
        inputs, input_bytes = write_inputs(fmt, args.events, input_dir, per_file=args.file_events, seed=args.seed)
        marker.write_text(json.dumps({"params": wanted, "paths": inputs, "bytes": input_bytes}))
    generate_s = time.perf_counter() - t0
    log.info("%s: generated %d events (%.1f MB) in %.1fs", fmt, args.events, input_bytes / 1e6, generate_s)
    t0 = time.perf_counter()
    landed = land_inputs(settings, source=source, inputs=inputs, framing="jsonl")
    land_s = time.perf_counter() - t0
    assert landed.batch_id is not None
    land_marker = input_dir / ".landed.json"
    if landed.created:
        land_marker.write_text(json.dumps({"seconds": land_s, "at": dt.datetime.now(dt.timezone.utc).isoformat()}))
    elif land_marker.exists():  # a reused batch: report how long landing it took when it was landed
        land_s = json.loads(land_marker.read_text())["seconds"]
    else:
        land_s = float("nan")
    raw_paths = batch_raw_paths(settings, source, landed.batch_id)
    # Warm-ups run on a batch of the first input file only (the JIT, codegen and page cache warm up the same).
    warmup_source, warmup_batch, warmup_paths = f"{source}_warmup", None, raw_paths
    if len(inputs) > 1 and args.warmups:
        warm_landed = land_inputs(settings, source=warmup_source, inputs=inputs[:1], framing="jsonl")
        warmup_batch = warm_landed.batch_id
        warmup_paths = batch_raw_paths(settings, warmup_source, warmup_batch)
    raw_bytes = sum(Path(p).stat().st_size for p in raw_paths)
    log.info("%s: landed batch %s (%d messages) in %.1fs", fmt, landed.batch_id, landed.message_count, land_s)
    if not args.keep_inputs:
        shutil.rmtree(input_dir)
    keys = KeySpec.parse(KEYS)
    floor_out = str(work / "floor" / fmt)

    def floor(paths: list[str]) -> Callable[[], None]:
        return lambda: floor_job(spark.read.schema(RAW_SCHEMA).json(paths), fmt).write.mode("overwrite") \
            .parquet(floor_out)

    def normalize(src: str, batch_id: str) -> Callable[[], Any]:
        return lambda: normalize_batch(spark, settings, source=src, batch_id=batch_id, fmt=fmt, keys=keys)

    times: dict[str, list[float]] = {"floor": [], "normalize": []}
    loads: dict[str, list[float]] = {"floor": [], "normalize": []}
    timelines: list[dict[str, Any]] = []
    result = None
    check: dict[str, Any] = {}
    for rep in range(args.warmups + args.repeats):
        warm = rep < args.warmups
        src, batch, paths = source, landed.batch_id, raw_paths
        if warm and warmup_batch is not None:
            src, batch, paths = warmup_source, warmup_batch, warmup_paths
        for kind, action in (("floor", floor(paths)), ("normalize", normalize(src, batch))):
            group = f"bench-{fmt}-{kind}-{rep}"
            seconds, out = _timed(spark, group, action)
            log.info("%s %s %s: %.2fs", fmt, kind, "warm-up" if warm else f"run {rep - args.warmups + 1}", seconds)
            if warm:
                continue
            times[kind].append(seconds)
            loads[kind].append(round(os.getloadavg()[0], 2))  # other work on the machine shows up here
            if kind == "normalize":
                result = out
                timelines.append(_summarize_timeline(job_timeline(spark, group), seconds))
        if rep == args.warmups:  # first timed pair: compare the two outputs (untimed)
            out_dir = staging_dir(settings, source, landed.batch_id)
            check = consistency(spark, floor_out, {tid: str(out_dir / tid) for tid in result.tables})
            log.info("%s outputs agree: %s", fmt, check["equal"])
    profile = profile_steps(spark, fmt, raw_paths) if args.profile else None
    floor_med = statistics.median(times["floor"])
    norm_med = statistics.median(times["normalize"])
    ratio = floor_med / norm_med
    return {
        "format": fmt,
        "events": args.events,
        "input_files": len(inputs),
        "input_mb": round(input_bytes / 1e6, 1),
        "avg_message_bytes": round(input_bytes / args.events),
        "raw_zone_mb": round(raw_bytes / 1e6, 1),
        "generate_seconds": round(generate_s, 2),
        "land_seconds": None if land_s != land_s else round(land_s, 2),
        "land_reused_batch": not landed.created,
        "land_events_per_s": None if land_s != land_s else round(args.events / land_s),
        "warmup_events": args.file_events if warmup_batch is not None else args.events,
        "floor_seconds": [round(t, 3) for t in times["floor"]],
        "normalize_seconds": [round(t, 3) for t in times["normalize"]],
        "loadavg_1min_after_each_run": loads,
        "floor_median_s": round(floor_med, 3),
        "normalize_median_s": round(norm_med, 3),
        "floor_events_per_s": round(args.events / floor_med),
        "normalize_events_per_s": round(args.events / norm_med),
        "ratio": round(ratio, 3),
        "pair_ratios": _pair_ratios(times["floor"], times["normalize"]),
        "target": TARGET_RATIO,
        "meets_target": ratio >= TARGET_RATIO,
        "normalize_result": result.to_dict() if result else None,
        "consistency": check,
        # the run whose time is the median: the most typical breakdown on a machine whose load may have moved
        "normalize_profile_median_run": min(timelines, key=lambda t: abs(t["wall_seconds"] - norm_med))
        if timelines else None,
        "step_profile": profile,
    }


# ----------------------------------------------------------------------------------------------------------------
# Reporting.
# ----------------------------------------------------------------------------------------------------------------


def _rate(n: float) -> str:
    return f"{n / 1000:,.1f}k" if n < 1e6 else f"{n / 1e6:,.2f}M"


def _seconds(value: float | None) -> str:
    return "?" if value is None else f"{value:.1f}s"


def _pair_ratios(floor: list[float], normalize: list[float]) -> list[float]:
    """floor / normalize per interleaved pair: run i of each ran back to back, so a load change on a shared machine
    moves both; the spread of these shows how much the load moved the medians."""
    return [round(f / n, 3) for f, n in zip(floor, normalize)]


def _load(entry: dict[str, Any]) -> str:
    loads = entry.get("loadavg_1min_after_each_run")
    if not loads:
        return "?"
    values = loads["floor"] + loads["normalize"]
    return f"{min(values):.1f}-{max(values):.1f}"


def markdown(report: dict[str, Any]) -> str:
    """The results as a markdown table plus per-format job breakdowns."""
    lines = [f"# Normalize throughput vs Spark's floor — {report['date']}", ""]
    for run in report["runs"]:
        m = run["machine"]
        lines.append(
            f"- run `{run['run_id']}`: {m['nproc']} CPUs ({m['cpu_model']}), {m['memory_gib']} GiB RAM, "
            f"Spark {m['spark']} `{m['spark_master']}` (driver memory {m['spark_driver_memory']}, shuffle partitions "
            f"{m['spark_shuffle_partitions']}), Java {m['java']}, Python {m['python']}, cdclake {m['cdclake']} "
            f"from `{m.get('cdclake_source', '?')}` (repository at {m['git_commit']}, {m['git_dirty_files']} "
            f"uncommitted files); command: `{run['command']}`")
    lines += ["", f"Target: ratio = floor time / normalize time >= {TARGET_RATIO} at 1M events. "
              "Times are medians of the timed runs (after warm-up).", "",
              "| format | events | avg msg | land | floor median | floor ev/s | normalize median | normalize ev/s "
              "| ratio | per-pair ratios | target | outputs agree | quarantined | load (1-min avg) |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|---:|---|"]
    for fmt in sorted(report["formats"], key=lambda f: ALL_FORMATS.index(f) if f in ALL_FORMATS else 99):
        r = report["formats"][fmt]
        q = (r["normalize_result"] or {}).get("quarantined", "?")
        lines.append(
            f"| {fmt} | {r['events']:,} | {r['avg_message_bytes']} B "
            f"| {_seconds(r['land_seconds'])} "
            f"| {r['floor_median_s']:.2f}s | {_rate(r['floor_events_per_s'])} | {r['normalize_median_s']:.2f}s "
            f"| {_rate(r['normalize_events_per_s'])} | **{r['ratio']:.2f}x** "
            f"| {', '.join(f'{x:.2f}' for x in _pair_ratios(r['floor_seconds'], r['normalize_seconds']))} "
            f"| {'met' if r['meets_target'] else 'MISSED'} | {'yes' if r['consistency'].get('equal') else 'NO'} "
            f"| {q} | {_load(r)} |")
    lines += ["", "## Where normalize spends its time", "",
              "The Spark jobs of the median timed run, in order, from Spark's status store (the last timed run for "
              "entries recorded before the median run was kept).", ""]
    for fmt in sorted(report["formats"], key=lambda f: ALL_FORMATS.index(f) if f in ALL_FORMATS else 99):
        entry = report["formats"][fmt]
        p = entry.get("normalize_profile_median_run") or entry.get("normalize_profile_last_run")
        if not p:
            continue
        lines += [f"### {fmt}", "",
                  f"wall {p['wall_seconds']}s = {p['in_spark_jobs_seconds']}s in {p['jobs']} Spark jobs + "
                  f"{p['outside_jobs_seconds']}s outside jobs (planning, catalog, driver)", "",
                  "| # | call site | seconds | tasks |", "|---:|---|---:|---:|"]
        for i, j in enumerate(p["in_order"], 1):
            lines.append(f"| {i} | `{j['call_site']}` | {j['seconds']} | {j['tasks']} |")
        lines.append("")
        steps = report["formats"][fmt].get("step_profile")
        if steps:
            lines += ["Pieces timed on their own (`--profile`; `noop` = every column computed, nothing written):", "",
                      *[f"- {k}: {v}" for k, v in steps.items()], ""]
    if report.get("notes"):
        lines += ["## Notes", "", *[f"- {n}" for n in report["notes"]], ""]
    return "\n".join(lines) + "\n"


def save(report_run: dict[str, Any], entries: dict[str, dict[str, Any]], out: Path) -> Path:
    """Merge this run's entries into ``normalize-<date>.json`` (entries of other formats are kept) and write .md."""
    out.mkdir(parents=True, exist_ok=True)
    date = report_run["started_at"][:10]
    path = out / f"normalize-{date}.json"
    report: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {"date": date, "runs": [],
                                                                                  "formats": {}}
    report["runs"] = [r for r in report["runs"] if r["run_id"] != report_run["run_id"]] + [report_run]
    for fmt, entry in entries.items():
        report["formats"][fmt] = {**entry, "run_id": report_run["run_id"]}
    live = {e["run_id"] for e in report["formats"].values()}
    report["runs"] = [r for r in report["runs"] if r["run_id"] in live]
    path.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    path.with_suffix(".md").write_text(markdown(report))
    return path


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns 0 (1 when a format misses the target and --strict is given)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=100_000, help="events per format (default 100000)")
    parser.add_argument("--formats", default=",".join(ALL_FORMATS),
                        help="comma-separated formats; those without a registered normalizer are skipped")
    parser.add_argument("--out", default=str(REPO / "bench" / "results"), help="results directory")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs of each (default 3)")
    parser.add_argument("--warmups", type=int, default=1,
                        help="untimed warm-up runs of each, on a batch of the first input file (default 1)")
    parser.add_argument("--file-events", type=int, default=100_000, help="events per input file (default 100000)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--workdir", help="work directory (default: a new temporary directory, removed at exit)")
    parser.add_argument("--keep-inputs", action="store_true",
                        help="keep the generated input files; with --workdir a later run reuses them and their "
                             "landed batch (its land time is then only the re-landing check)")
    parser.add_argument("--profile", action="store_true",
                        help="also time the pieces (raw read, floor and format parse without writing, parse + cache)")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a format misses the target ratio")
    parser.add_argument("--src", default=str(REPO / "include"),
                        help="directory to import the cdclake package from (default: this repository's include/)")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(args.src).resolve()))
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(name)s %(message)s")
    log.setLevel(logging.INFO)

    from cdclake.formats import FORMATS
    from cdclake.settings import LakeSettings
    from cdclake.spark import get_spark

    wanted = [f.strip() for f in args.formats.split(",") if f.strip()]
    unknown = [f for f in wanted if f not in ENCODERS]
    if unknown:
        parser.error(f"no generator for format(s) {', '.join(unknown)}; known: {', '.join(ENCODERS)}")
    missing = [f for f in wanted if f not in FORMATS]
    formats = [f for f in wanted if f in FORMATS]
    if missing:
        log.warning("skipping %s: no normalizer registered yet (cdclake.formats.FORMATS = %s)",
                    ", ".join(missing), ", ".join(FORMATS))
    if not formats:
        log.error("nothing to run")
        return 2

    own_work = args.workdir is None
    work = Path(args.workdir or tempfile.mkdtemp(prefix="cdclake-bench-"))
    started = dt.datetime.now(dt.timezone.utc)
    try:
        settings = LakeSettings.from_env(work / "lake", env={})
        spark = get_spark(settings, app_name="cdclake-normalize-bench")
        run = {"run_id": started.strftime("%Y%m%dT%H%M%SZ"), "started_at": started.isoformat(timespec="seconds"),
               "command": " ".join(["python", *sys.argv]) if argv is None else " ".join(argv),
               "formats_skipped": missing, "machine": machine_facts(spark),
               "settings": {"events": args.events, "repeats": args.repeats, "warmups": args.warmups,
                            "file_events": args.file_events, "seed": args.seed}}
        entries: dict[str, dict[str, Any]] = {}
        for fmt in formats:
            entries[fmt] = bench_format(spark, settings, fmt, args, work)
            path = save(run, entries, Path(args.out))  # after every format, so a long run keeps what it has
            r = entries[fmt]
            print(f"{fmt:9s} floor {r['floor_median_s']:7.2f}s {r['floor_events_per_s']:>9,} ev/s | normalize "
                  f"{r['normalize_median_s']:7.2f}s {r['normalize_events_per_s']:>9,} ev/s | ratio {r['ratio']:.2f} "
                  f"({'met' if r['meets_target'] else 'MISSED'}; outputs agree: {r['consistency'].get('equal')})",
                  flush=True)
        print(f"results: {path} and {path.with_suffix('.md')}")
        missed = [f for f, e in entries.items() if not e["meets_target"]]
        return 1 if args.strict and missed else 0
    finally:
        if own_work:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
