"""Debezium messages without their schema (the JSON converter's ``schemas.enable=false``) into a table whose types
are known otherwise: the values are still written the Connect way (a MySQL ``datetime`` as milliseconds, a
``Decimal`` as base64 of its unscaled bytes), so they are read by the Connect types the table recorded from
earlier messages with schemas, or that Debezium's MySQL connector gives the types a CREATE TABLE declares. The
expected rows are written out by hand."""

from __future__ import annotations

import base64
import uuid
from typing import Any

from cdclake.keys import KeySpec
from cdclake.normalize import normalize_batch
from cdclake.reader import dump_rows
from tests.support.canal_batches import apply_messages, land_messages


def _apply(spark: Any, lake: Any, db: str, name: str, messages: list[dict[str, Any]]) -> None:
    """Apply one batch (key ``id``: these messages carry no message key)."""
    apply_messages(spark, lake, db, name, messages, fmt="debezium", keys=["id"])


def _source(db: str, pos: int) -> dict[str, Any]:
    return {"version": "2.5.0.Final", "connector": "mysql", "name": "s", "ts_ms": 1700000000000, "snapshot": "false",
            "db": db, "table": "t", "server_id": 1, "file": "mysql-bin.000003", "pos": pos, "row": 0}


def _change(db: str, pos: int, op: str, before: dict[str, Any] | None, after: dict[str, Any] | None,
            schema: dict[str, Any] | None = None) -> dict[str, Any]:
    payload = {"before": before, "after": after, "source": _source(db, pos), "op": op, "ts_ms": 1700000000000}
    return {"schema": schema, "payload": payload} if schema else payload


def _decimal(unscaled: int) -> str:
    return base64.b64encode(unscaled.to_bytes((unscaled.bit_length() + 8) // 8, "big", signed=True)).decode()


FIELDS = [
    {"type": "int32", "optional": False, "field": "id"},
    {"type": "int64", "optional": True, "name": "io.debezium.time.Timestamp", "field": "dt0"},
    {"type": "int64", "optional": True, "name": "io.debezium.time.MicroTimestamp", "field": "dt6"},
    {"type": "int64", "optional": True, "name": "io.debezium.time.MicroTime", "field": "t"},
    {"type": "int32", "optional": True, "name": "io.debezium.time.Date", "field": "d"},
    {"type": "bytes", "optional": True, "name": "org.apache.kafka.connect.data.Decimal",
     "parameters": {"scale": "2", "connect.decimal.precision": "10"}, "field": "amount"},
]
ROW = {"type": "struct", "optional": True, "name": "s.db.t.Value", "fields": FIELDS}
ENVELOPE = {"type": "struct", "optional": False, "name": "s.db.t.Envelope", "fields": [
    {**ROW, "field": "before"}, {**ROW, "field": "after"},
    {"type": "struct", "optional": False, "field": "source", "fields": [
        {"type": "string", "field": n} for n in ("connector", "db", "table", "file")] + [
        {"type": "int64", "field": "pos"}, {"type": "int64", "field": "ts_ms"}]},
    {"type": "string", "optional": False, "field": "op"}]}

# 2024-03-01 12:34:56 as milliseconds and microseconds, 01:00:00 as microseconds, 2024-03-01 as days, 12.34
ROW_1 = {"id": 1, "dt0": 1709296496000, "dt6": 1709296496123456, "t": 3600000000, "d": 19783, "amount": _decimal(1234)}
EXPECTED_1 = {"id": 1, "dt0": "2024-03-01T12:34:56.000000", "dt6": "2024-03-01T12:34:56.123456",
              "t": "01:00:00.000000", "d": "2024-03-01", "amount": "12.34"}


def test_messages_without_their_schema_are_read_by_the_connect_types_the_table_recorded(spark,
                                                                                        session_lake) -> None:
    db = f"po{uuid.uuid4().hex[:6]}"
    _apply(spark, session_lake, db, "0", [_change(db, 100, "c", None, ROW_1, ENVELOPE)])
    row_2 = {**ROW_1, "id": 2, "dt0": 1714885505000, "amount": _decimal(-5)}  # 2024-05-05 05:05:05, -0.05
    _apply(spark, session_lake, db, "1", [
        _change(db, 200, "c", None, row_2),
        _change(db, 300, "u", ROW_1, {**ROW_1, "d": 0, "t": 45296000000}),  # 1970-01-01, 12:34:56
    ])
    assert dump_rows(session_lake, f"{db}.t") == [
        {**EXPECTED_1, "d": "1970-01-01", "t": "12:34:56.000000"},
        {**EXPECTED_1, "id": 2, "dt0": "2024-05-05T05:05:05.000000", "amount": "-0.05"}]


def test_a_decimal_sent_as_a_rounded_json_number_is_quarantined_not_stored_rounded(spark, session_lake) -> None:
    # decimal.format=NUMERIC writes the number; Spark reads a fractional JSON number through a double, which keeps
    # about 15 significant digits: 12345678.91 arrives exactly, 1234567890123.4567 would not.
    db = f"po{uuid.uuid4().hex[:6]}"
    fields = [FIELDS[0], {**FIELDS[5], "parameters": {"scale": "4", "connect.decimal.precision": "20"}}]
    schema = {**ENVELOPE, "fields": [{**ROW, "fields": fields, "field": "before"},
                                     {**ROW, "fields": fields, "field": "after"}, *ENVELOPE["fields"][2:]]}
    _apply(spark, session_lake, db, "0", [_change(db, 100, "c", None, {"id": 1, "amount": "AA=="}, schema)])
    batch = land_messages(session_lake, db, "1", [_change(db, 200, "c", None, {"id": 2, "amount": 12345678.91}),
                                                  _change(db, 300, "c", None, {"id": 3, "amount": 1234567890123.4567})])
    result = normalize_batch(spark, session_lake, source=db, batch_id=batch, fmt="debezium",
                             keys=KeySpec.parse(["id"]))
    assert (result.tables, result.quarantined) == ({f"{db}.t": 1}, 1)


def test_messages_without_their_schema_are_read_as_debezium_writes_the_types_of_a_create_table(spark,
                                                                                              session_lake) -> None:
    db = f"po{uuid.uuid4().hex[:6]}"
    create = {"source": _source(db, 50), "databaseName": db, "ddl": (
        "CREATE TABLE `t` (`id` int NOT NULL, `dt0` datetime, `dt6` datetime(6), `t` time, `d` date, "
        "`amount` decimal(10,2), PRIMARY KEY (`id`))"), "tableChanges": []}
    apply_messages(spark, session_lake, db, "0", [create, _change(db, 100, "c", None, ROW_1)], fmt="debezium")
    apply_messages(spark, session_lake, db, "1", [_change(db, 200, "c", None, {**ROW_1, "id": 2})], fmt="debezium")
    assert dump_rows(session_lake, f"{db}.t") == [EXPECTED_1, {**EXPECTED_1, "id": 2}]
