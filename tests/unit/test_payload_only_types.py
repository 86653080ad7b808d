"""Debezium messages without their schema (the JSON converter's ``schemas.enable=false``) into a table whose types
are known otherwise: the values are still written the Connect way (a MySQL ``datetime`` as milliseconds, a
``Decimal`` as base64 of its unscaled bytes), so they are read by the Connect types the table recorded from
earlier messages with schemas, or that Debezium's MySQL connector gives the types a CREATE TABLE declares. The
expected rows are written out by hand."""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

import pytest

from cdclake.keys import KeySpec
from cdclake.normalize import normalize_batch
from cdclake.reader import dump_rows
from tests.support.canal_batches import apply_messages, land_messages

# In the extended tier (4 minutes of a CI worker): `CDCLAKE_TESTS=all ./.ci/run`.
pytestmark = pytest.mark.extended


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


def test_mysql_spatial_columns_of_a_create_table_are_read_as_debezium_writes_them(spark, session_lake) -> None:
    # Debezium's MySQL connector writes a spatial column as an io.debezium.data.geometry.Geometry (a point as a
    # ...Point) struct, with or without the message's schema: the column keeps that struct's JSON text.
    db = f"po{uuid.uuid4().hex[:6]}"
    wkb = base64.b64encode(bytes.fromhex("0101000000000000000000F03F0000000000000040")).decode()
    create = {"source": _source(db, 50), "databaseName": db, "ddl": (
        "CREATE TABLE `t` (`id` int NOT NULL, `g` geometry, `pt` point NOT NULL SRID 0, PRIMARY KEY (`id`))"),
        "tableChanges": []}
    point = {"x": 1.0, "y": 2.0, "wkb": wkb, "srid": None}
    apply_messages(spark, session_lake, db, "0", [create], fmt="debezium")
    geometry = {"type": "struct", "optional": True, "name": "io.debezium.data.geometry.Geometry", "fields": [
        {"type": "bytes", "optional": False, "field": "wkb"}, {"type": "int32", "optional": True, "field": "srid"}]}
    row = {"type": "struct", "optional": True, "name": "s.db.t.Value", "fields": [
        {"type": "int32", "optional": False, "field": "id"}, {**geometry, "field": "g"},
        {**geometry, "name": "io.debezium.data.geometry.Point", "field": "pt", "fields": [
            {"type": "double", "optional": False, "field": "x"}, {"type": "double", "optional": False, "field": "y"},
            *geometry["fields"]]}]}
    envelope = {**ENVELOPE, "fields": [{**row, "field": "before"}, {**row, "field": "after"}, *ENVELOPE["fields"][2:]]}
    _apply(spark, session_lake, db, "1", [
        _change(db, 100, "c", None, {"id": 1, "g": {"wkb": wkb, "srid": 0}, "pt": point}),
        _change(db, 200, "c", None, {"id": 2, "g": None, "pt": point}, envelope)])
    texts = [(r["id"], r["g"], r["pt"]) for r in dump_rows(session_lake, f"{db}.t")]
    assert [(i, g and json.loads(g), json.loads(pt)) for i, g, pt in texts] == [
        (1, {"wkb": wkb, "srid": 0}, point), (2, None, point)]


def test_a_text_column_takes_later_integers_and_decimals_as_their_text(spark, session_lake) -> None:
    # PostgreSQL `numeric` without precision (a VariableScaleDecimal: text) altered to numeric(12,2), and a column
    # first seen as a string then as an int32: a later batch's values are stored as their text, as one batch with
    # both types does.
    db = f"po{uuid.uuid4().hex[:6]}"

    def envelope(fields: list[dict[str, Any]]) -> dict[str, Any]:
        row = {"type": "struct", "optional": True, "name": "s.db.t.Value", "fields": [
            {"type": "int32", "optional": False, "field": "id"}, *fields]}
        return {**ENVELOPE, "fields": [{**row, "field": "before"}, {**row, "field": "after"}, *ENVELOPE["fields"][2:]]}
    before = envelope([{"type": "struct", "optional": True, "name": "io.debezium.data.VariableScaleDecimal",
                        "field": "n", "fields": [{"type": "int32", "optional": False, "field": "scale"},
                                                 {"type": "bytes", "optional": False, "field": "value"}]},
                       {"type": "string", "optional": True, "field": "v"}])
    after = envelope([{"type": "bytes", "optional": True, "name": "org.apache.kafka.connect.data.Decimal",
                       "parameters": {"scale": "2", "connect.decimal.precision": "12"}, "field": "n"},
                      {"type": "int32", "optional": True, "field": "v"}])
    _apply(spark, session_lake, db, "0", [
        _change(db, 100, "c", None, {"id": 1, "n": {"scale": 3, "value": _decimal(1250)}, "v": "x"}, before)])
    _apply(spark, session_lake, db, "1", [_change(db, 200, "c", None, {"id": 2, "n": _decimal(-123), "v": 7}, after)])
    assert dump_rows(session_lake, f"{db}.t") == [{"id": 1, "n": "1.250", "v": "x"}, {"id": 2, "n": "-1.23", "v": "7"}]
