"""Tencent CKafka connector, MySQL subscription "Official Format I" (DML); its DDL is in canal format
(:mod:`cdclake.formats.canal`).

A DML message: ``{BINLOG_NAME, BINLOG_POS, DATABASE, TABLE, TYPE, TIME, NEW_VALUES, OLD_VALUES, GLOBAL_ID, ...}``,
values as strings, one row per message. Mapping:

- ``TYPE``: I (the document also prints a lower-case ``l``) -> c, U -> u, D -> d.
- after = ``NEW_VALUES``, before = ``OLD_VALUES`` (whole rows).
- no key and no types: the key comes from a ``CREATE TABLE`` seen in the stream, the source config or ``--key``;
  types from that ``CREATE TABLE`` or the existing table, else every column is a string.
- source position: binlog file sequence number + ``BINLOG_POS`` (16 hex digits each); rows of one binlog event
  share it and keep their order in the file.
- ``source_ts``: ``TIME`` (``yyyyMMddHHmmss``), in the source's time zone
  (:func:`~cdclake.formats.sqltypes.source_time_zone`).
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from cdclake.formats.common import null_string, table_identity, unquote_json_text
from cdclake.formats.debezium import binlog_position
from cdclake.formats.message import Rule, Shape
from cdclake.formats.sqltypes import in_source_zone

_OPS = {"I": "c", "L": "c", "U": "u", "D": "d"}


def _columns(j: Column, row: Column, row_index: Column) -> dict[str, Column]:
    kind = F.upper(F.trim(j["ck_type"]))
    op = F.element_at(F.create_map(*[F.lit(x) for kv in _OPS.items() for x in kv]), kind)
    return {
        **table_identity(j["ck_database"], j["ck_table"]),
        "op": op,
        "source_pos": binlog_position(j["ck_binlog_name"], j["ck_binlog_pos"], F.lit("0")),
        "source_ts": in_source_zone(F.to_timestamp(F.trim(j["ck_time"]), "yyyyMMddHHmmss")),
        "snapshot": null_string(),
        "key_text": null_string(),
        "before_text": unquote_json_text(j["ck_old_values"]),
        "after_text": F.when(op != "d", unquote_json_text(j["ck_new_values"])),
        "row_schema": null_string(),
        "key_schema": null_string(),
        "ddl": null_string(),
    }


def _rules(j: Column, row: Column, cols: dict[str, Column]) -> list[Rule]:
    op = cols["op"]
    return [
        (j["ck_type"].isNull(), F.lit("missing field TYPE"), "quarantine"),
        (op.isNull(), F.concat(F.lit("unknown TYPE '"), j["ck_type"], F.lit("' (expected I, U or D)")), "quarantine"),
        (cols["table_id"].isNull(), F.lit("missing field TABLE"), "quarantine"),
        (cols["source_pos"].isNull(),
         F.lit("no source position: BINLOG_NAME/BINLOG_POS missing or not a binlog file and a number"), "quarantine"),
        (op.isin("c", "u") & ~F.coalesce(F.trim(cols["after_text"]), F.lit("")).startswith("{"),
         F.concat(F.lit("TYPE "), j["ck_type"], F.lit(" without NEW_VALUES (an object)")), "quarantine"),
        ((op == "d") & ~F.coalesce(F.trim(cols["before_text"]), F.lit("")).startswith("{"),
         F.lit("TYPE D without OLD_VALUES (an object)"), "quarantine"),
    ]


SHAPE = Shape(
    name="ckafka",
    detect=lambda j: j["ck_binlog_name"].isNotNull() | j["ck_new_values"].isNotNull() | j["ck_old_values"].isNotNull()
    | (j["ck_type"].isNotNull() & j["ck_table"].isNotNull()),
    columns=_columns,
    rules=_rules,
)
