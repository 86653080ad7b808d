"""The Debezium normalizer on every Debezium JSON example of the seed format documents 000, 001 and 002.

Fixtures (``tests/fixtures/debezium/``) are the documents' examples with the callout numbers (``"schema": { 1``)
removed and nothing else changed, except where noted:

=================================================  ===========================================================
fixture                                            source and changes
=================================================  ===========================================================
pg_key.json                                        000, change-event key: trailing comma after ``payload``
                                                   removed (keeps ``"INT32"``, ``"optional": "false"``,
                                                   ``"id": "1"``)
pg_key_trailing_comma.json                         000, the same key as printed: invalid JSON
pg_create.json                                     000, create event (schema + payload as printed)
pg_update.json                                     000, update event; the elided ``"schema": { ... }`` replaced
                                                   by the create event's schema (the document says it is the same)
pg_delete.json                                     000, delete event; elided schema dropped (``{"payload": …}``)
pg_truncate.json                                   000, truncate event; elided schema dropped
pg_message_transactional.json                      000, transactional logical-decoding message; schema dropped
pg_message_nontransactional_missing_comma.json     000, non-transactional message as printed: no comma after
                                                   ``ts_ms`` and no closing brace; schema dropped; invalid JSON
pg_message_nontransactional.json                   000, the same with the comma and the brace added
sqlserver_create.json                              001, create event (no callouts in this document)
dtle_key.json                                      002, key: the missing comma after ``"name"`` added
dtle_key_missing_comma.json                        002, the same key as printed: invalid JSON
dtle_create_snapshot.json                          002, value (``snapshot: true`` with ``op: "c"``)
dtle_ddl.json                                      002, DDL message of the SchemaChangeTopic
=================================================  ===========================================================

Document 000's first example (the four-part ``{ "schema": { ... }, "payload": { ... }, … }`` skeleton) is an
outline, not an event, and has no fixture.

Keys travel with values only in Kafka messages, so key + value pairs are landed as ``kcat -C -J`` lines; values alone
are landed as the documents print them (pretty-printed JSON, one document after another).

Oracles: expected values are the fixtures' own JSON (read with Python's ``json``) or literals from the documents;
source positions are computed here with ``format(n, "016x")`` and string slicing, line numbers and byte offsets by
counting the test's own input text. Each test lands under its own source name in the session lake.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import Row
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, StringType, StructField, StructType

from cdclake.formats.message import NULL_TEXT_SKIP
from cdclake.keys import KeySpec
from cdclake.landing import InputFile, land_files
from cdclake.normalize import normalize_batch, read_staged, staging_dir
from cdclake.pipeline import NormalizeResult
from tests.support.seeds import SEEDS

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "debezium"
QUARANTINE = "lake.cdclake_meta.quarantine"
CUSTOMER_ROW = StructType([
    StructField("id", IntegerType()),
    StructField("first_name", StringType()),
    StructField("last_name", StringType()),
    StructField("email", StringType()),
])
ID_KEY = StructType([StructField("id", IntegerType())])
MESSAGE_SKIP = "logical decoding message (op=m)"
KEY_NOT_JSON = "message key is not valid JSON"
DDL_CREATE = "DDL CREATE TABLE: key and column types learned"


def text(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def payload(name: str) -> dict[str, Any]:
    doc = json.loads(text(name))
    return doc["payload"] if "payload" in doc else doc


def hex16(n: int) -> str:
    return format(n, "016x")


def pg_prefix(lsn: int, last_commit: int | None = None) -> str:
    """A PostgreSQL change's source position: max(last commit LSN, LSN) + LSN."""
    return hex16(max(lsn, last_commit or 0)) + hex16(lsn)


def json_error(document: str) -> json.JSONDecodeError:
    try:
        json.loads(document)
    except json.JSONDecodeError as exc:
        return exc
    raise AssertionError("the document parses")


def kcat(offset: int, key: str | None, value: str | None, *, topic: str) -> str:
    """One ``kcat -C -J`` line: key and value are the raw message strings (null for none)."""
    return json.dumps({"topic": topic, "partition": 0, "offset": offset, "ts": 1700000000000 + offset,
                       "headers": None, "key": key, "payload": value})


@dataclass(frozen=True)
class Batch:
    source: str
    batch_id: str
    messages: int
    result: NormalizeResult


@pytest.fixture()
def source(request: pytest.FixtureRequest) -> str:
    """A source name no other test uses (batches and quarantine rows are per source)."""
    name = re.sub(r"[^a-z0-9_]", "_", request.node.name.lower())[:40]
    return f"dbzseed_{name}_{uuid.uuid4().hex[:6]}"


def land_and_normalize(spark, settings, source: str, files: list[tuple[str, str]],
                       keys: KeySpec | None = None) -> Batch:
    inputs = [InputFile(f"mem://{source}/{name}", content.encode("utf-8")) for name, content in files]
    batch_id, created, count, _ = land_files(settings, source=source, files=inputs)
    assert created and batch_id is not None
    result = normalize_batch(spark, settings, source=source, batch_id=batch_id, fmt="debezium", keys=keys)
    return Batch(source, batch_id, count, result)


def staged(spark, settings, batch: Batch, table_id: str) -> tuple[StructType, list[Row]]:
    """The staged canonical records of one table, in position order, with ``source_ts`` as epoch millis."""
    df = read_staged(spark, staging_dir(settings, batch.source, batch.batch_id) / table_id)
    rows = df.select("*", F.unix_millis("source_ts").alias("source_ts_ms")).orderBy("position").collect()
    return df.schema, rows


def quarantined(spark, batch: Batch) -> list[Row]:
    return spark.sql(
        f"SELECT * FROM {QUARANTINE} WHERE source = '{batch.source}' AND batch_id = '{batch.batch_id}' "
        "ORDER BY input, line"
    ).collect()


def split_position(position: str) -> tuple[str, str]:
    prefix, _, tail = position.partition("/")
    return prefix, tail


def tail(batch: Batch, file_index: int, index: int) -> str:
    return f"{batch.batch_id}/{file_index:06d}/{index:010d}/00000"


def documents(*names: str) -> tuple[str, list[tuple[int, int]]]:
    """Fixtures one after another as one file, with each document's 1-based line and byte offset."""
    content, where, line, offset = "", [], 1, 0
    for name in names:
        doc = text(name)
        where.append((line, offset))
        content += doc
        line += doc.count("\n")
        offset += len(doc.encode("utf-8"))
    return content, where


# --- the fixtures are the documents' examples ---------------------------------------------------------------------

CALLOUT = re.compile(r'(?<=[\[{,"\dl])\s+\d{1,2}\s*$')
SEED_OF = {"pg_": "000_b204a6f57ae4181b.txt", "sqlserver_": "001_25eac51771b90504.txt",
           "dtle_": "002_fe444b954ea75630.txt"}
REPAIRED_LINES = {"dtle_key.json": {'"name": "dbserver1.inventory.customers.Key",'}}
INVALID = {"pg_key_trailing_comma.json", "pg_message_nontransactional_missing_comma.json",
           "dtle_key_missing_comma.json"}


def test_fixtures_are_the_seed_examples():
    names = sorted(p.name for p in FIXTURES.glob("*.json"))
    assert len(names) == 14
    for name in names:
        seed = next(s for prefix, s in SEED_OF.items() if name.startswith(prefix))
        seed_lines = {CALLOUT.sub("", line).strip() for line in (SEEDS / seed).read_text(encoding="utf-8").splitlines()}
        extra = {line.strip() for line in text(name).splitlines()} - seed_lines - REPAIRED_LINES.get(name, set())
        assert extra == set(), f"{name}: lines that are not in {seed}"
        if name in INVALID:
            json_error(text(name))
        else:
            json.loads(text(name))
    # The quirks the documents print are kept.
    key = json.loads(text("pg_key.json"))
    assert key["schema"]["fields"][0]["schema"] == {"type": "INT32", "optional": "false"}
    assert key["payload"] == {"id": "1"}
    assert payload("sqlserver_create.json")["source"]["event_serial_no"] == "1"
    assert (payload("dtle_create_snapshot.json")["op"], payload("dtle_create_snapshot.json")["source"]["snapshot"]) \
        == ("c", True)
    assert "schema" not in json.loads(text("pg_delete.json"))
    assert json.loads(text("pg_update.json"))["schema"] == json.loads(text("pg_create.json"))["schema"]


# --- PostgreSQL (seed 000) ------------------------------------------------------------------------------------------

def test_postgresql_values_as_documents(spark, session_lake, source):
    content, where = documents("pg_create.json", "pg_update.json", "pg_delete.json", "pg_truncate.json")
    batch = land_and_normalize(spark, session_lake, source, [("pg_values.json", content)],
                               keys=KeySpec.parse(["public.customers=id"]))

    assert batch.result.tables == {"public.customers": 4}
    assert (batch.result.quarantined, batch.result.skipped) == (0, {})
    schema, rows = staged(spark, session_lake, batch, "public.customers")
    # Typed by the create/update events' schema (int32 -> int); delete and truncate carry no schema.
    assert schema["key"].dataType == ID_KEY
    assert schema["before"].dataType == CUSTOMER_ROW
    assert schema["after"].dataType == CUSTOMER_ROW
    create, update, delete, truncate = rows
    uri = f"mem://{source}/pg_values.json"

    # create: snapshot true on an op=c event is a snapshot read.
    src = payload("pg_create.json")["source"]
    assert (create.op, create.snapshot, create.table_id) == ("r", "true", "public.customers")
    assert create.key == Row(id=1)
    assert create.before is None
    assert create.after == Row(id=1, first_name="Anne", last_name="Kretchmar", email="annek@noanswer.org")
    assert split_position(create.position) == (pg_prefix(24023128), tail(batch, 0, 0))
    assert hex16(src["lsn"]) == "00000000016e9058"
    assert create.source_ts_ms == src["ts_ms"] == 1559033904863
    assert (create.batch_id, create.source, create.format) == (batch.batch_id, source, "debezium")
    assert (create.input_file, create.raw_line, create.raw_offset) == (uri, *where[0])
    assert create.unavailable == []

    # update: REPLICA IDENTITY DEFAULT sends only the key column in before.
    assert (update.op, update.snapshot, update.table_id) == ("u", None, "public.customers")
    assert update.key == Row(id=1)
    assert update.before == Row(id=1, first_name=None, last_name=None, email=None)
    assert update.after == Row(id=1, first_name="Anne Marie", last_name="Kretchmar", email="annek@noanswer.org")
    assert split_position(update.position) == (pg_prefix(payload("pg_update.json")["source"]["lsn"]), tail(batch, 0, 1))
    assert update.source_ts_ms == payload("pg_update.json")["source"]["ts_ms"]
    assert (update.raw_line, update.raw_offset) == where[1]

    assert (delete.op, delete.snapshot) == ("d", None)
    assert delete.key == Row(id=1)
    assert delete.before == Row(id=1, first_name=None, last_name=None, email=None)
    assert delete.after is None
    assert split_position(delete.position) == (pg_prefix(46523128), tail(batch, 0, 2))
    assert delete.source_ts_ms == payload("pg_delete.json")["source"]["ts_ms"]
    assert (delete.raw_line, delete.raw_offset) == where[2]

    # truncate: no key, no images; staged so apply can clear the table up to its position.
    assert (truncate.op, truncate.snapshot, truncate.table_id) == ("t", None, "public.customers")
    assert truncate.key == Row(id=None)
    assert (truncate.before, truncate.after) == (None, None)
    assert split_position(truncate.position) == (pg_prefix(46523128), tail(batch, 0, 3))
    assert truncate.source_ts_ms == payload("pg_truncate.json")["source"]["ts_ms"]
    assert (truncate.raw_line, truncate.raw_offset) == where[3]

    # Events at one LSN (the snapshot read and the update share 24023128) keep their arrival order.
    assert create.position < update.position < delete.position < truncate.position


def console(offset: int, key: str | None, value: str | None, *, topic: str) -> str:
    """One line of ``kafka-console-consumer --property print.timestamp=true --property print.partition=true
    --property print.offset=true --property print.key=true`` (the topic is not printed)."""
    def one_line(text: str | None) -> str:
        return "null" if text is None else json.dumps(json.loads(text), separators=(",", ":"))

    return f"CreateTime:{1700000000000 + offset}\tPartition:0\tOffset:{offset}\t{one_line(key)}\t{one_line(value)}"


@pytest.mark.parametrize("kafka_line", [kcat, console], ids=["kcat", "console-consumer"])
def test_postgresql_keys_and_values_as_kafka_messages(spark, session_lake, source, kafka_line):
    topic = "PostgreSQL_server.public.customers"
    key = text("pg_key.json")
    message_key = json.dumps({
        "schema": {"type": "struct", "optional": False, "name": "io.debezium.connector.postgresql.MessageKey",
                   "fields": [{"type": "string", "optional": False, "field": "prefix"}]},
        "payload": {"prefix": "foo"},
    })
    lines = [
        kafka_line(10, key, text("pg_create.json"), topic=topic),
        kafka_line(11, key, text("pg_update.json"), topic=topic),
        kafka_line(12, key, text("pg_delete.json"), topic=topic),
        kafka_line(13, key, None, topic=topic),  # the tombstone after a delete
        kafka_line(14, None, text("pg_truncate.json"), topic=topic),
        kafka_line(15, message_key, text("pg_message_transactional.json"), topic=topic),
        kafka_line(16, message_key, text("pg_message_nontransactional.json"), topic=topic),
    ]
    batch = land_and_normalize(spark, session_lake, source, [("pg.kcat.jsonl", "\n".join(lines) + "\n")])

    # No declared key: the key columns come from the key's schema.
    assert batch.result.tables == {"public.customers": 4}
    assert batch.result.skipped == {"tombstone (null value)": 1, MESSAGE_SKIP: 2}
    assert batch.result.quarantined == 0
    schema, rows = staged(spark, session_lake, batch, "public.customers")
    assert schema["key"].dataType == ID_KEY  # the key payload's "1" (a string) typed by the row schema
    assert schema["after"].dataType == CUSTOMER_ROW
    assert [(r.op, r.key, r.raw_line, r.raw_offset) for r in rows] == [
        ("r", Row(id=1), 1, 10), ("u", Row(id=1), 2, 11), ("d", Row(id=1), 3, 12), ("t", Row(id=None), 5, 14),
    ]
    assert [split_position(r.position) for r in rows] == [
        (pg_prefix(24023128), tail(batch, 0, 0)), (pg_prefix(24023128), tail(batch, 0, 1)),
        (pg_prefix(46523128), tail(batch, 0, 2)), (pg_prefix(46523128), tail(batch, 0, 4)),
    ]
    assert [r.after for r in rows] == [
        Row(id=1, first_name="Anne", last_name="Kretchmar", email="annek@noanswer.org"),
        Row(id=1, first_name="Anne Marie", last_name="Kretchmar", email="annek@noanswer.org"),
        None, None,
    ]
    assert all(r.input_file == f"mem://{source}/pg.kcat.jsonl" for r in rows)


def test_a_key_in_the_envelope_with_a_null_schema_is_its_payload(spark, session_lake, source):
    # Kafka Connect's JSON converter with schemas enabled writes a key without a schema as
    # {"schema": null, "payload": {...}} (Apache Paimon's Debezium test data keys every message so).
    topic = "PostgreSQL_server.public.customers"
    key = json.dumps({"schema": None, "payload": {"id": 1}})
    lines = [kcat(0, key, text("pg_create.json"), topic=topic), kcat(1, key, text("pg_update.json"), topic=topic)]
    batch = land_and_normalize(spark, session_lake, source, [("pg.kcat.jsonl", "\n".join(lines) + "\n")])
    assert (batch.result.tables, batch.result.quarantined) == ({"public.customers": 2}, 0)
    _, rows = staged(spark, session_lake, batch, "public.customers")
    assert [(r.op, r.key) for r in rows] == [("r", Row(id=1)), ("u", Row(id=1))]


def test_postgresql_key_with_trailing_comma_is_quarantined(spark, session_lake, source):
    topic = "PostgreSQL_server.public.customers"
    broken_key = text("pg_key_trailing_comma.json")
    messages = "\n".join([
        kcat(0, broken_key, text("pg_create.json"), topic=topic),
        kcat(1, text("pg_key.json"), text("pg_update.json"), topic=topic),
    ]) + "\n"
    batch = land_and_normalize(spark, session_lake, source, [
        ("pg.kcat.jsonl", messages),
        ("pg_key_trailing_comma.json", broken_key),  # the printed example on its own, as a document file
    ])

    # The damaged key does not fall back to the after image's id: the message is quarantined.
    assert batch.result.tables == {"public.customers": 1}
    assert batch.result.quarantined == 2
    _, rows = staged(spark, session_lake, batch, "public.customers")
    assert [(r.op, r.key, r.raw_offset) for r in rows] == [("u", Row(id=1), 1)]
    by_input = {r.input: r for r in quarantined(spark, batch)}
    kafka = by_input[f"mem://{source}/pg.kcat.jsonl"]
    assert (kafka.line, kafka.kafka_offset, kafka.table_id) == (1, 0, "public.customers")
    # The reason says where the key stops being JSON.
    assert kafka.reason.startswith(f"{KEY_NOT_JSON}: expecting property name enclosed in double quotes at character "),\
        kafka.reason
    assert (kafka.raw_key, kafka.raw_value) == (broken_key, text("pg_create.json"))
    document = by_input[f"mem://{source}/pg_key_trailing_comma.json"]
    error = json_error(broken_key)
    assert error.msg == "Expecting property name enclosed in double quotes"
    assert document.reason == (f"unframed message: invalid JSON: {error.msg}: "
                               f"line {error.lineno} column {error.colno} (char {error.pos})")
    assert (document.line, document.byte_offset, document.kafka_offset) == (1, 0, None)
    assert document.raw_value == broken_key.strip()


def test_postgresql_message_events(spark, session_lake, source):
    names = ("pg_message_transactional.json", "pg_message_nontransactional_missing_comma.json",
             "pg_message_nontransactional.json")
    content, where = documents(*names)
    topic = "PostgreSQL_server"
    broken = text(names[1])
    kafka = "\n".join([kcat(7, json.dumps({"prefix": "foo"}), broken, topic=topic),
                       kcat(8, json.dumps({"prefix": "foo"}), text(names[0]), topic=topic)]) + "\n"
    batch = land_and_normalize(spark, session_lake, source, [("pg_messages.json", content),
                                                            ("pg_messages.kcat.jsonl", kafka)])

    assert batch.messages == 5
    assert batch.result.tables == {}
    assert batch.result.skipped == {MESSAGE_SKIP: 3}
    assert batch.result.quarantined == 2
    row, from_kafka = quarantined(spark, batch)
    # As a Kafka message the broken value reaches the normalizer, which quarantines it as it is.
    assert (from_kafka.input, from_kafka.line, from_kafka.kafka_offset) == (f"mem://{source}/pg_messages.kcat.jsonl",
                                                                          1, 7)
    error = json_error(broken)
    assert from_kafka.reason == (f"message value is not valid JSON: expecting ',' delimiter at character "
                                 f"{error.pos + 1} of {len(broken)}"), from_kafka.reason
    assert from_kafka.raw_value == broken
    # As a document file, landing finds the broken document and says where the parser stopped.
    assert row.input == f"mem://{source}/pg_messages.json"
    error = json_error(broken)
    assert error.msg == "Expecting ',' delimiter"
    # The parser's position is in the file, which starts with the transactional message.
    line, offset = where[1]
    chars_before = len(text(names[0]))
    assert row.reason == (f"unframed message: invalid JSON: {error.msg}: line {error.lineno + line - 1} "
                          f"column {error.colno} (char {error.pos + chars_before})")
    assert (row.line, row.byte_offset, row.table_id, row.raw_key) == (line, offset, None, None)
    assert row.raw_value == broken.strip()
    assert not (staging_dir(session_lake, source, batch.batch_id) / "public.customers").exists()


# --- SQL Server (seed 001) ------------------------------------------------------------------------------------------

def sqlserver_lsn_hex(lsn: str) -> str:
    """``VLF:block:slot`` (8:8:4 hex digits) -> the 20 hex digits, lower case."""
    parts = lsn.split(":")
    assert [len(p) for p in parts] == [8, 8, 4]
    return "".join(parts).lower()


def test_sqlserver_create_event(spark, session_lake, source):
    batch = land_and_normalize(spark, session_lake, source, [("sqlserver_create.json", text("sqlserver_create.json"))],
                               keys=KeySpec.parse(["dbo.customers=id"]))

    assert batch.result.tables == {"dbo.customers": 1}
    assert (batch.result.quarantined, batch.result.skipped) == (0, {})
    schema, (row,) = staged(spark, session_lake, batch, "dbo.customers")
    assert schema["key"].dataType == ID_KEY
    assert schema["after"].dataType == CUSTOMER_ROW
    src = payload("sqlserver_create.json")["source"]
    assert (row.op, row.snapshot, row.table_id) == ("c", None, "dbo.customers")
    assert row.key == Row(id=1005)
    assert row.before is None
    assert row.after == Row(id=1005, first_name="john", last_name="doe", email="john.doe@example.org")
    expected_prefix = (sqlserver_lsn_hex(src["commit_lsn"]) + sqlserver_lsn_hex(src["change_lsn"])
                       + hex16(int(src["event_serial_no"])))
    assert expected_prefix == "00000027000007580005" "00000027000007580003" "0000000000000001"
    assert split_position(row.position) == (expected_prefix, tail(batch, 0, 0))
    assert row.source_ts_ms == src["ts_ms"] == 1559729468470
    assert (row.input_file, row.raw_line, row.raw_offset) == (f"mem://{source}/sqlserver_create.json", 1, 0)
    assert row.unavailable == []


SQLSERVER_SCHEMA_CHANGE = {  # Debezium's SQL Server connector documents its schema-change events without DDL text
    "source": {"version": "2.5.0.Final", "connector": "sqlserver", "name": "server1", "ts_ms": 0, "snapshot": "true",
               "db": "testDB", "schema": "dbo", "table": "customers", "change_lsn": None,
               "commit_lsn": "00000025:00000d98:00a2", "event_serial_no": None},
    "ts_ms": 1588252618953, "databaseName": "testDB", "schemaName": "dbo", "ddl": None,
    "tableChanges": [{"type": "CREATE", "id": '"testDB"."dbo"."customers"', "table": {
        "defaultCharsetName": None, "primaryKeyColumnNames": ["id"], "columns": [
            {"name": "id", "jdbcType": 4, "nativeType": None, "typeName": "int identity",
             "typeExpression": "int identity", "charsetName": None, "length": 10, "scale": 0, "position": 1,
             "optional": False, "autoIncremented": False, "generated": False}]}}],
}
TRANSACTION_BEGIN = {"status": "BEGIN", "id": "571:53195829", "ts_ms": 1486500577125, "event_count": None,
                     "data_collections": None}
TRANSACTION_END = {"status": "END", "id": "571:53195832", "ts_ms": 1486500577691, "event_count": 1,
                   "data_collections": [{"data_collection": "testDB.dbo.customers", "event_count": 1}]}
HEARTBEAT_KEY = json.dumps({"serverName": "server1"})
HEARTBEAT = {"ts_ms": 1588252619000}
NO_DDL_TEXT = "schema change event without DDL text (tableChanges only): columns come from the change events"
TRANSACTION = "transaction metadata (status BEGIN/END)"
HEARTBEAT_SKIP = "heartbeat (ts_ms only)"
NO_CHANGE_SKIP = ("event without op, row image or table (a TiCDC WATERMARK event, or an empty record): no change "
                  "to apply")


def enveloped(value: dict[str, Any], name: str | None = None) -> str:
    """A value as the JSON converter writes it with schemas enabled (only the schema's name is read here)."""
    return json.dumps({"schema": {"type": "struct", "optional": False, "fields": [], "name": name},
                       "payload": value})


@pytest.mark.parametrize("schema", [
    {},  # artie-labs/transfer's PostgreSQL test event
    # StreamsForge's CdcEnvelopeTests ("the raw {schema,payload} form Debezium Server emits by default")
    {"type": "struct", "optional": False, "name": "pgserver1.inventory.customers.Envelope", "fields": []},
])
def test_a_schema_that_declares_no_row_is_read_as_a_payload_only_event(spark, session_lake, source, schema):
    # Such a schema declares no columns, so the payload is typed as an event without a schema is (it was
    # quarantined as "no column types").
    event = {"schema": schema, "payload": {
        "before": None, "op": "c", "ts_ms": 1668571313000,
        "after": {"id": 59, "item": "Barings Participation Investors", "price": {"scale": 2, "value": "AKyI"}},
        "source": {"version": "1.9.6.Final", "connector": "postgresql", "name": "dbserver1", "ts_ms": 1668571313000,
                   "snapshot": "false", "db": "postgres", "schema": "public", "table": "orders", "txId": 1,
                   "lsn": 720078286816}}}
    batch = land_and_normalize(spark, session_lake, source, [("artie.jsonl", json.dumps(event) + "\n")],
                               keys=KeySpec.parse(["public.orders=id"]))

    assert (batch.result.tables, batch.result.quarantined) == ({"public.orders": 1}, 0)
    _, (row,) = staged(spark, session_lake, batch, "public.orders")
    assert (row.after.id, row.after.item, row.after.price) == (59, "Barings Participation Investors", "441.68")


def test_a_value_that_is_the_text_null_is_a_tombstone(spark, session_lake, source):
    # pathwaycom/pathway's tests/data/sample_debezium.txt ends its delete with the line `null`: how
    # kafka-console-consumer prints the tombstone after it. It is skipped as one, not quarantined.
    def event(op: str, before: Any, after: Any) -> str:
        return json.dumps({"payload": {"op": op, "before": before, "after": after, "ts_ms": 1, "source": {
            "connector": "postgresql", "db": "inventory", "schema": "inventory", "table": "customers",
            "lsn": 100 if op == "c" else 200}}})

    lines = [event("c", None, {"id": 1005, "name": "x"}), event("d", {"id": 1005, "name": "x"}, None), " null "]
    batch = land_and_normalize(spark, session_lake, source, [("pathway.jsonl", "\n".join(lines) + "\n")],
                               keys=KeySpec.parse(["inventory.customers=id"]))

    assert batch.result.tables == {"inventory.customers": 2}
    assert (batch.result.quarantined, batch.result.skipped) == (0, {NULL_TEXT_SKIP: 1})


def test_schema_changes_without_ddl_text_transaction_metadata_and_heartbeats_are_skipped(spark, session_lake,
                                                                                         source):
    """SQL Server's schema-change events (``ddl`` null, ``tableChanges`` only), the transaction-metadata topic's
    BEGIN/END, heartbeats and events that change nothing are recognized with and without the schema envelope; an
    enveloped schema-change event with DDL text is a DDL record (it has a ``payload`` like a change event, but no
    ``op``)."""
    server_key = json.dumps({"databaseName": "testDB"})
    lines = [
        kcat(0, server_key, json.dumps(SQLSERVER_SCHEMA_CHANGE), topic="server1"),
        kcat(1, server_key, enveloped(SQLSERVER_SCHEMA_CHANGE), topic="server1"),
        kcat(0, None, enveloped(payload("dtle_ddl.json")), topic="dbhistory"),
        kcat(0, json.dumps({"id": TRANSACTION_BEGIN["id"]}), json.dumps(TRANSACTION_BEGIN),
             topic="server1.transaction"),
        kcat(0, None, text("sqlserver_create.json"), topic="server1.testDB.dbo.customers"),
        kcat(1, json.dumps({"id": TRANSACTION_END["id"]}), enveloped(TRANSACTION_END), topic="server1.transaction"),
        kcat(0, HEARTBEAT_KEY, json.dumps(HEARTBEAT), topic="__debezium-heartbeat.server1"),
        kcat(1, HEARTBEAT_KEY, enveloped(HEARTBEAT, "io.debezium.connector.common.Heartbeat"),
             topic="__debezium-heartbeat.server1"),
        # Not a heartbeat: a change event without its op is still quarantined as one.
        kcat(2, None, json.dumps({**HEARTBEAT, "source": {"table": "customers"}}), topic="server1.testDB.dbo.x"),
        # TiCDC's WATERMARK event (pingcap/tiflow pkg/sink/codec/debezium TestCheckPointEvent), and the empty record
        # Flink CDC's deserializer ignores: no op, no image, no table.
        kcat(0, None, json.dumps({"payload": {"source": {
            "version": "2.4.0.Final", "connector": "TiCDC", "name": "test-cluster", "ts_ms": 0, "snapshot": "false",
            "db": "", "table": "", "server_id": 0, "gtid": None, "file": "", "pos": 0, "row": 0, "thread": 0,
            "query": None, "commit_ts": 3, "cluster_id": "test-cluster"},
            "ts_ms": 1701326309000, "transaction": None},
            "schema": {"type": "struct", "fields": [{"type": "string", "optional": False, "field": "databaseName"}],
                       "optional": False, "name": "io.debezium.connector.mysql.SchemaChangeKey", "version": 1}}),
             topic="ticdc"),
        kcat(1, None, json.dumps({"schema": {}, "payload": {"source": {}, "ts_ms": 1}}), topic="flink"),
        # Redpanda Connect's Debezium-style heartbeat.
        kcat(0, None, json.dumps({"op": "hb", "ts_ms": 1700000000000}), topic="redpanda"),
        # Not an empty record: a row flattened by ExtractNewRecordState (memiiso/debezium-server-iceberg's
        # serde-with-array.json) holds row values, so it is quarantined, not skipped.
        kcat(0, None, json.dumps({"schema": {"type": "struct", "name": "testc.inventory.array_data.Value",
                                             "fields": [{"type": "string", "optional": True, "field": "name"}]},
                                  "payload": {"name": "Bill", "__op": "c", "__table": "array_data"}}), topic="unwrap"),
    ]
    batch = land_and_normalize(spark, session_lake, source, [("metadata.kcat.jsonl", "\n".join(lines) + "\n")],
                               keys=KeySpec.parse(["dbo.customers=id"]))

    assert batch.result.skipped == {NO_DDL_TEXT: 2, DDL_CREATE: 1, TRANSACTION: 2, HEARTBEAT_SKIP: 3,
                                    NO_CHANGE_SKIP: 2}
    broken, flattened = quarantined(spark, batch)
    assert (broken.line, broken.reason) == (9, "unrecognized message: not a message --format debezium reads (a "
                                                "Debezium/dtle event, canal/DRS flat message, DRS MongoDB record or "
                                                "CKafka Format I row; a bare row, as Debezium's "
                                                "ExtractNewRecordState/unwrap transform writes it, is not a change "
                                                "event); its top-level fields: ts_ms, source")
    assert (flattened.line, flattened.reason) == (
        13, "missing fields payload.op and payload.source: not a change event (a row flattened by "
            "ExtractNewRecordState/unwrap is not read; publish the change events); its payload fields: name, __op, "
            "__table")
    assert batch.result.tables == {"a.a": 0, "dbo.customers": 1}
    _, (row,) = staged(spark, session_lake, batch, "dbo.customers")
    assert (row.op, row.key, row.raw_line) == ("c", Row(id=1005), 5)


def flink_cdc_schema_change(ddl: str, pos: int, table_changes: list[dict] | None = None) -> str:
    """Flink CDC's schema-change record (``JsonDebeziumDeserializationSchema``, ``includeSchemaChanges(true)``), as
    apache/doris-flink-connector's tests hold them: the change's ``source`` and the schema-history record as JSON
    text in ``historyRecord``."""
    source = {"version": "1.5.4.Final", "connector": "mysql", "name": "mysql_binlog_source", "ts_ms": 1663924503565,
              "snapshot": "false", "db": "test", "sequence": None, "table": "t1", "server_id": 1, "gtid": None,
              "file": "binlog.000006", "pos": pos, "row": 0, "thread": None, "query": None}
    history = {"source": {"file": "binlog.000006", "pos": pos, "server_id": 1},
               "position": {"transaction_id": None, "ts_sec": 1663924503, "file": "binlog.000006", "pos": pos + 133,
                            "server_id": 1},
               "databaseName": "test", "ddl": ddl, "tableChanges": table_changes or []}
    return json.dumps({"source": source, "historyRecord": json.dumps(history)})


def test_flink_cdc_schema_change_records_are_ddl(spark, session_lake, source):
    """A ``historyRecord`` schema change teaches the key and types like Debezium's own schema-change events (it was
    quarantined as "no debezium fields")."""
    change = {"before": None, "after": {"id": 1, "name": "a", "c_1": "x"}, "op": "c", "ts_ms": 1663924504000,
              "source": {"version": "1.5.4.Final", "connector": "mysql", "name": "mysql_binlog_source",
                         "ts_ms": 1663924504000, "snapshot": "false", "db": "test", "table": "t1", "server_id": 1,
                         "file": "binlog.000006", "pos": 13500, "row": 0}}
    # apache/doris-flink-connector's testGetCdcTableIdentifier adds a `schema` to a MySQL event: MySQL names tables
    # by database, so it is still test.t1.
    change["source"]["schema"] = "dbo"
    lines = [
        flink_cdc_schema_change("CREATE TABLE t1 (id INT NOT NULL, name VARCHAR(128), PRIMARY KEY (id))", 12000),
        flink_cdc_schema_change("alter table t1 add \n    c_1 varchar(200)", 13088),
        json.dumps(change),
    ]
    batch = land_and_normalize(spark, session_lake, source, [("flinkcdc.jsonl", "\n".join(lines) + "\n")])

    assert batch.result.quarantined == 0, [r.reason for r in quarantined(spark, batch)]
    assert batch.result.skipped[DDL_CREATE] == 1 and sum(batch.result.skipped.values()) == 2
    assert batch.result.tables == {"test.t1": 1}
    schema, (row,) = staged(spark, session_lake, batch, "test.t1")
    assert (row.op, row.key, row.after.c_1) == ("c", Row(id=1), "x")


def test_an_alter_tables_table_changes_give_the_key_of_changes_without_one(spark, session_lake, source):
    """apache/doris-flink-connector's TestJsonDebeziumDataChange stream: Flink CDC's change events carry no message
    key, and the only DDL is an ALTER TABLE whose ``tableChanges`` describes the table after it, key included
    (``primaryKeyColumnNames``). The key comes from there (every change was quarantined for having none)."""
    def change(op: str, before: dict | None, after: dict | None, pos: int) -> str:
        return json.dumps({"before": before, "after": after, "op": op, "ts_ms": 1663923840146,
                           "source": {"version": "1.5.4.Final", "connector": "mysql", "name": "mysql_binlog_source",
                                      "ts_ms": 1663923840000, "snapshot": "false", "db": "test", "table": "t1",
                                      "server_id": 1, "file": "binlog.000006", "pos": pos, "row": 0}})

    altered = {"type": "ALTER", "id": '"test"."t1"', "table": {
        "defaultCharsetName": "utf8mb4", "primaryKeyColumnNames": ["id"], "columns": [
            {"name": "id", "jdbcType": 4, "typeName": "INT", "typeExpression": "INT", "position": 1,
             "optional": False},
            {"name": "name", "jdbcType": 12, "typeName": "VARCHAR", "typeExpression": "VARCHAR", "length": 128,
             "position": 2, "optional": True},
            {"name": "c_1", "jdbcType": 12, "typeName": "VARCHAR", "typeExpression": "VARCHAR", "length": 200,
             "position": 3, "optional": True}]}}
    lines = [
        change("c", None, {"id": 1, "name": "a"}, 11000),
        change("c", None, {"id": 2, "name": "b"}, 11200),
        change("u", {"id": 1, "name": "a"}, {"id": 1, "name": "aa"}, 11400),
        change("d", {"id": 2, "name": "b"}, None, 11600),
        flink_cdc_schema_change("alter table t1 add \n    c_1 varchar(200)", 13088, [altered]),
    ]
    batch = land_and_normalize(spark, session_lake, source, [("doris.jsonl", "\n".join(lines) + "\n")])

    assert batch.result.quarantined == 0, [r.reason for r in quarantined(spark, batch)]
    assert batch.result.tables == {"test.t1": 4}
    _, rows = staged(spark, session_lake, batch, "test.t1")
    assert sorted((r.op, r.key.id) for r in rows) == [("c", 1), ("c", 2), ("d", 2), ("u", 1)]


# --- dtle / MySQL (seed 002) ----------------------------------------------------------------------------------------

def mysql_prefix(file: str, pos: int, row: int) -> str:
    return hex16(int(file.rsplit(".", 1)[1])) + hex16(pos) + hex16(row)


def test_dtle_events_as_kafka_messages(spark, session_lake, source):
    topic = "dbserver1.inventory.customers"
    value = text("dtle_create_snapshot.json")
    lines = [
        kcat(0, text("dtle_key.json"), value, topic=topic),
        kcat(1, text("dtle_key_missing_comma.json"), value, topic=topic),
        kcat(2, None, text("dtle_ddl.json"), topic="dtle-schema-changes"),
        # dtle's tombstone after a delete (driver/kafka: DbzOutput{Schema: nil, Payload: nil}): skipped
        kcat(3, text("dtle_key.json"), '{"schema":null,"payload":null}', topic=topic),
    ]
    batch = land_and_normalize(spark, session_lake, source, [("dtle.kcat.jsonl", "\n".join(lines) + "\n")])

    # The snapshot DDL (CREATE TABLE `a` in database `a`) creates that table, empty, with its key.
    assert batch.result.tables == {"a.a": 0, "inventory.customers": 1}
    assert (batch.result.quarantined, batch.result.skipped) == (
        1, {DDL_CREATE: 1, "tombstone (null schema and payload)": 1})
    schema, (row,) = staged(spark, session_lake, batch, "inventory.customers")
    assert schema["key"].dataType == ID_KEY
    assert schema["after"].dataType == CUSTOMER_ROW
    body = payload("dtle_create_snapshot.json")
    src = body["source"]
    # snapshot: true with op "c" is a snapshot read.
    assert (row.op, row.snapshot, row.table_id) == ("r", "true", "inventory.customers")
    assert row.key == Row(id=1004)
    assert row.before is None
    assert row.after == Row(id=1004, first_name="Anne", last_name="Kretchmar", email="annek@noanswer.org")
    assert split_position(row.position) == (mysql_prefix(src["file"], src["pos"], src["row"]), tail(batch, 0, 0))
    assert mysql_prefix(src["file"], src["pos"], src["row"]) == hex16(3) + hex16(154) + hex16(0)
    # ts_sec is 0 (unknown) in dtle's snapshot rows: the envelope's ts_ms is the only time the event has.
    assert src["ts_sec"] == 0
    assert row.source_ts_ms == body["ts_ms"] == 1486500577691
    assert (row.raw_line, row.raw_offset) == (1, 0)

    (broken,) = quarantined(spark, batch)
    assert (broken.line, broken.kafka_offset) == (2, 1)
    assert broken.reason.startswith(f"{KEY_NOT_JSON}: expecting ',' delimiter at character "), broken.reason
    assert (broken.table_id, broken.raw_key) == ("inventory.customers", text("dtle_key_missing_comma.json"))
    _, created = staged(spark, session_lake, batch, "a.a")
    assert created == []


def test_dtle_documents(spark, session_lake, source):
    content, where = documents("dtle_create_snapshot.json", "dtle_ddl.json")
    batch = land_and_normalize(spark, session_lake, source, [
        ("dtle_values.json", content),
        ("dtle_key_missing_comma.json", text("dtle_key_missing_comma.json")),
    ], keys=KeySpec.parse(["inventory.customers=id"]))

    assert batch.result.tables == {"a.a": 0, "inventory.customers": 1}
    assert batch.result.skipped == {DDL_CREATE: 1}
    # Everything but the change event and the DDL message is quarantined: all of the broken key document.
    assert batch.result.quarantined == batch.messages - 2
    _, (row,) = staged(spark, session_lake, batch, "inventory.customers")
    assert (row.op, row.snapshot, row.key, row.raw_line, row.raw_offset) == ("r", "true", Row(id=1004), *where[0])
    assert split_position(row.position)[0] == hex16(3) + hex16(154) + hex16(0)

    rows = quarantined(spark, batch)
    assert not [r for r in rows if r.input == f"mem://{source}/dtle_values.json"]
    first = next(r for r in rows if r.input == f"mem://{source}/dtle_key_missing_comma.json" and r.line == 1)
    error = json_error(text("dtle_key_missing_comma.json"))
    assert first.reason == (f"unframed message: invalid JSON: {error.msg}: "
                            f"line {error.lineno} column {error.colno} (char {error.pos})")
    assert error.msg == "Expecting ',' delimiter" and error.lineno == 5


# --- ordering -------------------------------------------------------------------------------------------------------

def test_postgresql_positions_follow_lsn_order(spark, session_lake, source):
    # Decimal LSN text sorts wrongly as text ("255" > "24023128"); the hex positions must not.
    lsns = [46523128, 255, 24023128, 2**40 + 1, 4096, 9, 2**32, 2**62, 24023129]
    base = payload("pg_create.json")
    lines = []
    for i, lsn in enumerate(lsns):
        event = json.loads(json.dumps(base))  # schemas.enable=false: the bare payload
        event["source"].update(lsn=lsn, sequence=None)  # no last commit LSN: the LSN alone decides
        event["after"]["id"] = i
        lines.append(json.dumps(event))
    batch = land_and_normalize(spark, session_lake, source, [("pg_lsns.jsonl", "\n".join(lines) + "\n")],
                               keys=KeySpec.parse(["public.customers=id"]))

    assert batch.result.tables == {"public.customers": len(lsns)}
    _, rows = staged(spark, session_lake, batch, "public.customers")
    in_position_order = [lsns[r.after.id] for r in rows]
    assert in_position_order == sorted(lsns)
    assert [split_position(r.position)[0] for r in rows] == [pg_prefix(n) for n in sorted(lsns)]


def test_postgresql_changes_are_ordered_as_debezium_delivers_them(spark, session_lake, source):
    # PostgreSQL decodes transactions in commit order; a change keeps the LSN it was written at. An update written
    # (LSN 250) before an incremental snapshot's high watermark (LSN 300) and committed after it is delivered after
    # the snapshot's read of the row, which did not see it: the update is the newer change. Debezium's `sequence`
    # ([last commit LSN, LSN]) says so: its last commit (320) is past the read's position.
    from cdclake.pipeline import apply_batch
    from cdclake.reader import dump_rows

    def event(table: str, op: str, lsn: int, sequence: list[str], snapshot: str, before: str | None,
              after: str) -> str:
        return json.dumps({
            "before": None if before is None else {"id": 2, "v": before}, "after": {"id": 2, "v": after}, "op": op,
            "source": {"connector": "postgresql", "db": "postgres", "schema": "public", "table": table, "lsn": lsn,
                       "sequence": json.dumps(sequence), "snapshot": snapshot, "ts_ms": 1700000000000 + lsn}})
    for reversed_delivery in (False, True):  # one batch each, in delivery order; then the update's batch first
        table = f"seq_{uuid.uuid4().hex[:6]}"
        read = event(table, "r", 300, ["290", "300"], "incremental", None, "x")
        update = event(table, "u", 250, ["320", "250"], "false", "x", "y")
        for line in [update, read] if reversed_delivery else [read, update]:
            batch = land_and_normalize(spark, session_lake, source, [(f"{table}.jsonl", line + "\n")],
                                       keys=KeySpec.parse([f"public.{table}=id"]))
            assert batch.result.quarantined == 0
            _, (row,) = staged(spark, session_lake, batch, f"public.{table}")
            assert split_position(row.position)[0] == (pg_prefix(300, 290) if line is read else pg_prefix(250, 320))
            apply_batch(spark, session_lake, source=source, batch_id=batch.batch_id)
        assert dump_rows(session_lake, f"public.{table}") == [{"id": 2, "v": "y"}], reversed_delivery


def test_the_first_postgresql_transaction_streamed_after_a_snapshot_is_newer_than_the_snapshot(
        spark, session_lake, source):
    # Debezium's offset after a snapshot has no last commit LSN until a transaction commits, so the first one streamed
    # carries `sequence` [null, lsn]. It was open at the snapshot's LSN (5000), wrote before it (4990..4998) and
    # committed after it (5050): its update, delete and insert are newer than the reads. The next one is positioned
    # by its last commit as usual.
    from cdclake.pipeline import apply_batch
    from cdclake.reader import dump_rows

    def event(table: str, op: str, lsn: int, last_commit: int | None, snapshot: str, key: int,
              value: str | None) -> str:
        row = None if value is None else {"id": key, "v": value}
        return json.dumps({
            "before": {"id": key, "v": "s"} if op in ("u", "d") else None, "after": row, "op": op,
            "source": {"connector": "postgresql", "db": "postgres", "schema": "public", "table": table, "lsn": lsn,
                       "sequence": json.dumps([None if last_commit is None else str(last_commit), str(lsn)]),
                       "snapshot": snapshot, "ts_ms": 1700000000000 + lsn}})
    for same_batch in (True, False):
        table = f"first_{uuid.uuid4().hex[:6]}"
        snapshot = [event(table, "r", 5000, None, "first", 1, "s"), event(table, "r", 5000, None, "last", 2, "s")]
        streamed = [event(table, "u", 4990, None, "false", 1, "new"), event(table, "d", 4995, None, "false", 2, None),
                    event(table, "c", 4998, None, "false", 4, "n4"), event(table, "c", 5060, 5050, "false", 3, "n3")]
        for lines in [snapshot + streamed] if same_batch else [snapshot, streamed]:
            batch = land_and_normalize(spark, session_lake, source, [(f"{table}.jsonl", "\n".join(lines) + "\n")],
                                       keys=KeySpec.parse([f"public.{table}=id"]))
            assert batch.result.quarantined == 0
            apply_batch(spark, session_lake, source=source, batch_id=batch.batch_id)
        assert dump_rows(session_lake, f"public.{table}") == [
            {"id": 1, "v": "new"}, {"id": 3, "v": "n3"}, {"id": 4, "v": "n4"}], same_batch


def test_each_postgresql_snapshot_of_a_batch_is_followed_by_its_own_first_streamed_transaction(
        spark, session_lake, source):
    # snapshot.mode=always (or a re-created slot): two snapshots of a table in one batch, each followed by a
    # transaction streamed without a last commit LSN. Each such transaction is newer than the snapshot it follows
    # (the one whose reads started last before it in its file; before all of them there, the batch's snapshot before
    # those), not than the second one.
    from cdclake.pipeline import apply_batch
    from cdclake.reader import dump_rows

    table = f"twosnap_{uuid.uuid4().hex[:6]}"

    def event(op: str, lsn: int, last_commit: int | None, snapshot: str, key: int, value: str) -> str:
        row = {"id": key, "v": value}
        return json.dumps({
            "before": row if op == "d" else {"id": key, "v": "old"} if op == "u" else None,
            "after": None if op == "d" else row, "op": op,
            "source": {"connector": "postgresql", "db": "postgres", "schema": "public", "table": table, "lsn": lsn,
                       "sequence": json.dumps([None if last_commit is None else str(last_commit), str(lsn)]),
                       "snapshot": snapshot, "ts_ms": 1700000000000 + lsn}})
    first_partition = [
        event("r", 5000, None, "first", 1, "s1"), event("r", 5000, None, "true", 2, "s1"),
        event("r", 5000, None, "last", 5, "s1"),
        event("u", 4990, None, "false", 1, "a"),  # written before the first snapshot, committed after it
        event("c", 5010, None, "false", 3, "a3"),
        event("u", 5100, 5050, "false", 1, "c"),
        event("r", 6000, None, "first", 1, "c"), event("r", 6000, None, "true", 3, "a3"),
        event("r", 6000, None, "last", 2, "s1"),
        event("u", 5990, None, "false", 3, "z"),  # written before the second snapshot, committed after it
    ]
    second_partition = [  # no read before its first change: that change follows the first snapshot
        event("u", 4995, None, "false", 5, "p"),
        event("u", 5200, 5100, "false", 5, "q"),
        event("r", 6000, None, "last", 5, "q"),
    ]
    third_partition = [  # no read at all: its first change follows the batch's first snapshot, not the second
        event("c", 5010, None, "false", 7, "a7"),
        event("d", 5500, 5450, "false", 7, "a7"),
    ]
    batch = land_and_normalize(spark, session_lake, source, [
        (f"{table}-{n}.jsonl", "\n".join(lines) + "\n")
        for n, lines in enumerate([first_partition, second_partition, third_partition])],
        keys=KeySpec.parse([f"public.{table}=id"]))
    assert batch.result.quarantined == 0
    apply_batch(spark, session_lake, source=source, batch_id=batch.batch_id)
    assert dump_rows(session_lake, f"public.{table}") == [
        {"id": 1, "v": "c"}, {"id": 2, "v": "s1"}, {"id": 3, "v": "z"}, {"id": 5, "v": "q"}]

    # The same across batches: a change before the batch's snapshot in its file follows the earlier batch's.
    table = f"twosnap_{uuid.uuid4().hex[:6]}"
    for lines in ([event("r", 5000, None, "first", 1, "s1"), event("r", 5000, None, "last", 2, "s1")],
                  [event("c", 5010, None, "false", 8, "a8"), event("d", 5500, 5450, "false", 8, "a8"),
                   event("r", 6000, None, "first", 1, "s2"), event("r", 6000, None, "last", 2, "s2")]):
        batch = land_and_normalize(spark, session_lake, source, [(f"{table}.jsonl", "\n".join(lines) + "\n")],
                                   keys=KeySpec.parse([f"public.{table}=id"]))
        apply_batch(spark, session_lake, source=source, batch_id=batch.batch_id)
    assert dump_rows(session_lake, f"public.{table}") == [{"id": 1, "v": "s2"}, {"id": 2, "v": "s2"}]


def test_a_postgresql_primary_key_update_keeps_the_unchanged_toast_value_of_the_row_it_moves(
        spark, session_lake, source):
    # `UPDATE SET id = 31 WHERE id = 30` arrives as a delete of 30 and a create of 31, both at the update's LSN; the
    # create's unchanged TOASTed `bio` is the placeholder, and the row it moves (in the lake, or created earlier in
    # the batch) has the value. A create at another LSN is not paired with the delete.
    from cdclake.pipeline import apply_batch
    from cdclake.reader import dump_rows

    table = f"moved_{uuid.uuid4().hex[:6]}"
    unavailable = "__debezium_unavailable_value"

    def event(op: str, lsn: int, key: int, bio: str | None = None) -> str:
        after = None if op == "d" else {"id": key, "name": "n", "bio": bio}
        return json.dumps({
            "before": {"id": key, "name": None, "bio": None} if op == "d" else None, "after": after, "op": op,
            "source": {"connector": "postgresql", "db": "postgres", "schema": "public", "table": table, "lsn": lsn,
                       "ts_ms": 1700000000000 + lsn}})
    batches = [[event("c", 100, 30, "long text"), event("c", 110, 50, "other")],
               [event("d", 200, 30), event("c", 200, 31, unavailable),
                event("c", 300, 40, "in batch"), event("d", 400, 40), event("c", 400, 41, unavailable),
                event("d", 500, 50), event("c", 510, 51, unavailable)]]
    for i, lines in enumerate(batches):
        batch = land_and_normalize(spark, session_lake, source, [(f"{table}{i}.jsonl", "\n".join(lines) + "\n")],
                                   keys=KeySpec.parse([f"public.{table}=id"]))
        assert batch.result.quarantined == 0
        counts = apply_batch(spark, session_lake, source=source, batch_id=batch.batch_id).tables
    assert dump_rows(session_lake, f"public.{table}") == [
        {"id": 31, "name": "n", "bio": "long text"}, {"id": 41, "name": "n", "bio": "in batch"},
        {"id": 51, "name": "n", "bio": None}]
    assert counts[f"public.{table}"].unknown_values == 1



@pytest.mark.parametrize("delete_mode", ["hard", "soft"])
def test_a_primary_key_update_whose_delete_an_earlier_batch_applied_keeps_the_unchanged_toast_value(
        spark, session_lake, source, delete_mode):
    # The update's delete of 60 and create of 61 (same LSN) land in two batches (the keys' Kafka partitions were
    # read apart): the delete removed 60's row, so the create's placeholder takes the value 60's row had, from the
    # changelog (or its soft-deleted row), not null. 70's row, updated with its own placeholder after its insert,
    # keeps the insert's value when it moves the same way. A create at another LSN than any delete pairs with none.
    from cdclake.apply_options import ApplyOptions
    from cdclake.pipeline import apply_batch
    from cdclake.reader import dump_rows

    table = f"movedx_{uuid.uuid4().hex[:6]}"
    unavailable = "__debezium_unavailable_value"

    def event(op: str, lsn: int, key: int, name: str = "n", bio: str | None = None) -> str:
        after = None if op == "d" else {"id": key, "name": name, "bio": bio}
        return json.dumps({
            "before": {"id": key, "name": None, "bio": None} if op == "d" else None, "after": after, "op": op,
            "source": {"connector": "postgresql", "db": "postgres", "schema": "public", "table": table, "lsn": lsn,
                       "ts_ms": 1700000000000 + lsn}})
    batches = [[event("c", 100, 60, bio="long text"), event("c", 110, 70, bio="first"),
                event("u", 120, 70, "renamed", unavailable), event("c", 130, 80, bio="other")],
               [event("d", 200, 60), event("d", 300, 70), event("d", 400, 80)],
               [event("d", 200, 60), event("c", 200, 61, bio=unavailable),  # (the delete delivered again)
                event("c", 300, 71, "renamed", unavailable), event("c", 410, 81, bio=unavailable)]]
    options = ApplyOptions(delete_mode=delete_mode)
    for i, lines in enumerate(batches):
        batch = land_and_normalize(spark, session_lake, source, [(f"{table}{i}.jsonl", "\n".join(lines) + "\n")],
                                   keys=KeySpec.parse([f"public.{table}=id"]))
        assert batch.result.quarantined == 0
        counts = apply_batch(spark, session_lake, source=source, batch_id=batch.batch_id, default=options).tables
    rows = dump_rows(session_lake, f"public.{table}", all_columns=True)
    live = [{k: r[k] for k in ("id", "name", "bio")} for r in rows if not r.get("_cdc_is_deleted")]
    assert live == [{"id": 61, "name": "n", "bio": "long text"}, {"id": 71, "name": "renamed", "bio": "first"},
                    {"id": 81, "name": "n", "bio": None}]
    assert counts[f"public.{table}"].unknown_values == 1


def test_stale_changes_newer_by_source_time_than_their_row_are_logged(spark, session_lake, source, caplog):
    # A MySQL server re-created (or a failover to another server) starts its binlog coordinates again: its changes
    # rank older than the lake's rows and are skipped as stale. That is the ordering model, but it must not be
    # silent. A change delivered again, with the time of the change it repeats, is stale without a word.
    import logging

    from cdclake.pipeline import apply_batch

    table = f"reused_{uuid.uuid4().hex[:6]}"

    def event(op: str, pos: int, key: int, v: str, ts_ms: int) -> str:
        return json.dumps({
            "before": None, "after": {"id": key, "v": v}, "op": op,
            "source": {"connector": "mysql", "db": "inventory", "table": table, "file": "mysql-bin.000003",
                       "pos": pos, "row": 0, "ts_ms": ts_ms}})
    first = [event("c", 748, 1, "a", 1700000000000), event("c", 900, 2, "b", 1700000001000)]
    second = [event("u", 398, 1, "new server", 1700003600000), event("c", 900, 2, "b", 1700000001000)]
    with caplog.at_level(logging.WARNING, logger="cdclake.apply"):
        for i, lines in enumerate((first, second)):
            batch = land_and_normalize(spark, session_lake, source, [(f"{table}{i}.jsonl", "\n".join(lines) + "\n")],
                                       keys=KeySpec.parse([f"inventory.{table}=id"]))
            counts = apply_batch(spark, session_lake, source=source, batch_id=batch.batch_id).tables
    assert counts[f"inventory.{table}"].skipped_stale == 2
    warned = [r.getMessage() for r in caplog.records if "positions may have gone back" in r.getMessage()]
    assert len(warned) == 1 and "1 change(s) skipped as stale" in warned[0], warned


@pytest.mark.parametrize("delete_mode", ["hard", "soft"])
def test_a_primary_key_update_whose_earlier_delete_found_no_row_leaves_the_toast_value_unknown(
        spark, session_lake, source, delete_mode):
    # The lake never had 50 (its row is older than the stream): the delete of 50 removed nothing, and in soft mode
    # flagged a row of nulls. The create of 51 at its LSN, a batch later, has no old value to take: its placeholder
    # is stored as null and counted unknown, as when both land in one batch, not taken for the flagged row's null.
    from cdclake.apply_options import ApplyOptions
    from cdclake.pipeline import apply_batch
    from cdclake.reader import dump_rows

    table = f"movedn_{uuid.uuid4().hex[:6]}"

    def event(op: str, lsn: int, key: int, bio: str | None = None) -> str:
        return json.dumps({
            "before": {"id": key, "name": None, "bio": None} if op == "d" else None,
            "after": None if op == "d" else {"id": key, "name": "n", "bio": bio}, "op": op,
            "source": {"connector": "postgresql", "db": "postgres", "schema": "public", "table": table, "lsn": lsn,
                       "ts_ms": 1700000000000 + lsn}})
    batches = [[event("c", 100, 90, bio="x")], [event("d", 300, 50)],
               [event("c", 300, 51, bio="__debezium_unavailable_value")]]
    options = ApplyOptions(delete_mode=delete_mode)
    for i, lines in enumerate(batches):
        batch = land_and_normalize(spark, session_lake, source, [(f"{table}{i}.jsonl", "\n".join(lines) + "\n")],
                                   keys=KeySpec.parse([f"public.{table}=id"]))
        counts = apply_batch(spark, session_lake, source=source, batch_id=batch.batch_id, default=options).tables
    rows = dump_rows(session_lake, f"public.{table}", all_columns=True)
    live = [{k: r[k] for k in ("id", "bio")} for r in rows if not r.get("_cdc_is_deleted")]
    assert live == [{"id": 51, "bio": None}, {"id": 90, "bio": "x"}]
    assert counts[f"public.{table}"].unknown_values == 1

def test_sqlserver_positions_compare_numerically(spark, session_lake, source):
    events = [  # (commit_lsn, change_lsn, event_serial_no)
        ("00000027:00000a58:0001", "00000027:00000a50:0001", 1),
        ("00000027:00000758:0005", "00000027:00000758:0003", 2),  # the update's second CDC row
        ("00000027:00000758:0005", "00000027:00000758:0003", 1),  # the document's event
        ("0000000B:00000001:0001", "0000000B:00000001:0001", 1),  # upper-case hex: 0xB > 0xa
        ("0000000a:00000fff:ffff", "0000000a:00000fff:ffff", 1),
        ("00000028:00000010:0001", "00000028:00000010:0001", 1),
        ("00000027:00000758:0005", "00000027:00000758:0004", 1),
    ]
    base = json.loads(text("sqlserver_create.json"))
    lines = []
    for i, (commit, change, serial) in enumerate(events):
        event = json.loads(json.dumps(base))
        event["payload"]["source"].update(commit_lsn=commit, change_lsn=change, event_serial_no=str(serial))
        event["payload"]["after"]["id"] = i
        lines.append(json.dumps(event))
    batch = land_and_normalize(spark, session_lake, source, [("sqlserver_lsns.jsonl", "\n".join(lines) + "\n")],
                               keys=KeySpec.parse(["dbo.customers=id"]))

    _, rows = staged(spark, session_lake, batch, "dbo.customers")
    numeric = sorted(range(len(events)), key=lambda i: (int(events[i][0].replace(":", ""), 16),
                                                         int(events[i][1].replace(":", ""), 16), events[i][2]))
    assert [r.after.id for r in rows] == numeric
    assert [split_position(r.position)[0] for r in rows] == [
        sqlserver_lsn_hex(events[i][0]) + sqlserver_lsn_hex(events[i][1]) + hex16(events[i][2]) for i in numeric
    ]
    position = {r.after.id: r.position for r in rows}
    assert position[2] < position[0]  # commit 00000027:00000758:0005 < 00000027:00000a58:0001
    assert position[2] < position[1]  # same LSNs: event_serial_no 1 < 2


def test_sqlserver_tables_of_two_databases_do_not_mix(spark, session_lake, source):
    """One SQL Server connector reads several databases (``database.names``), each with LSNs of its own, and the
    lake id (``dbo.customers``) leaves the database out. Before, the second database's row of the same key was
    compared by LSN with the first's and silently lost as stale (its LSNs are lower); now the first database named
    keeps the lake table and the other's changes are quarantined, naming both source tables."""
    first = json.loads(text("sqlserver_create.json"))  # db testDB, commit_lsn 00000027:00000758:0005, id 1005
    other = json.loads(text("sqlserver_create.json"))
    other["payload"]["source"].update(db="otherDB", commit_lsn="00000010:00000100:0005",
                                      change_lsn="00000010:00000100:0003")
    other["payload"]["after"]["first_name"] = "jane"
    # The first database again, its name in another case (SQL Server's names ignore case; so does database.names).
    again = json.loads(text("sqlserver_create.json"))
    again["payload"]["source"].update(db="TESTDB", commit_lsn="00000027:00000800:0001",
                                      change_lsn="00000027:00000800:0001")
    again["payload"]["after"].update(id=1006, first_name="ann")
    lines = "\n".join(json.dumps(e) for e in (first, other, again)) + "\n"
    batch = land_and_normalize(spark, session_lake, source, [("two_databases.jsonl", lines)],
                               keys=KeySpec.parse(["dbo.customers=id"]))

    _, rows = staged(spark, session_lake, batch, "dbo.customers")
    assert sorted((r.after.id, r.after.first_name) for r in rows) == [(1005, "john"), (1006, "ann")]
    (row,) = quarantined(spark, batch)
    assert row.line == 2
    assert "source table otherdb.dbo.customers maps to lake table dbo.customers" in row.reason
    assert "(the lake id of a table named by its schema leaves the database out)" in row.reason
    assert "holds source table testdb.dbo.customers" in row.reason


def staged_db2_events(spark, settings, source: str, lsns: list[tuple[str, str | None]]) -> list[Row]:
    """The SQL Server seed's create as Db2 events with these (commit_lsn, change_lsn), ``id`` = the index; the
    staged records in position order."""
    base = json.loads(text("sqlserver_create.json"))
    lines = []
    for i, (commit, change) in enumerate(lsns):
        event = json.loads(json.dumps(base))
        event["payload"]["source"].update(connector="db2", commit_lsn=commit, change_lsn=change, event_serial_no=None)
        event["payload"]["after"]["id"] = i
        lines.append(json.dumps(event))
    batch = land_and_normalize(spark, settings, source, [("db2_lsns.jsonl", "\n".join(lines) + "\n")],
                               keys=KeySpec.parse(["dbo.customers=id"]))
    return staged(spark, settings, batch, "dbo.customers")[1]


def test_db2_luw_positions_keep_all_32_digits_of_its_lsns(spark, session_lake, source):
    """Db2 LUW's LSNs are 16 bytes, printed 8:8:16; changes that differ only in their last 12 digits are ordered by
    them (cut to SQL Server's 20 digits, they tied and arrival order decided)."""
    events = [  # (commit_lsn, change_lsn); a snapshot read has no change_lsn
        ("00000000:00001e36:000000000004a300", "00000000:00000000:0000000004461600"),
        ("00000000:00001e36:000000000004a1b4", None),
        ("00000000:00001e36:000000000004a1b4", "00000000:00000000:000000000446140f"),
        ("00000000:00001e36:000000000004a300", "00000000:00000000:00000000044615ff"),
    ]
    rows = staged_db2_events(spark, session_lake, source, events)

    def digits(lsn: str | None) -> str:
        return (lsn or "").replace(":", "").rjust(32, "0")

    numeric = sorted(range(len(events)), key=lambda i: (digits(events[i][0]), digits(events[i][1])))
    assert numeric == [1, 2, 3, 0]
    assert [r.after.id for r in rows] == numeric
    assert [split_position(r.position)[0] for r in rows] == [
        digits(events[i][0]) + digits(events[i][1]) + hex16(0) for i in numeric]


def test_db2_lsns_with_a_label_and_more_than_32_digits_keep_every_digit(spark, session_lake, source):
    """Redpanda Connect's Debezium-style Db2 events (its db2_cdc input) write ``commit_lsn`` as ``CSN:`` + 32 hex
    digits and no ``change_lsn``. Cut to 32 characters, changes that differ in the last digits tied and the later
    batch won: a redelivered create overwrote the newer update."""
    events = ["CSN:00000000000000000000001E36004A2C", "CSN:00000000000000000000001E36004A1B",
              "CSN:0000000000000000000000000000001E36004A1C"]  # 40 digits: wider than Db2 LUW's 32
    rows = staged_db2_events(spark, session_lake, source, [(commit, None) for commit in events])
    assert {r.after.id: split_position(r.position)[0] for r in rows} == {
        0: "00000000000000000000001e36004a2c" + "0" * 32 + hex16(0),
        1: "00000000000000000000001e36004a1b" + "0" * 32 + hex16(0),
        2: "0000000000000000000000000000001e36004a1c".rjust(64, "0") + "0" * 64 + hex16(0)}


def test_mysql_binlog_positions_file_sequence_wins(spark, session_lake, source):
    events = [  # (file, pos, row)
        ("mysql-bin.000010", 4, 0),
        ("mysql-bin.000003", 154, 0),  # the document's event
        ("mysql-bin.000003", 154, 1),
        ("mysql-bin.000003", 1000, 0),
        ("mysql-bin.000009", 2**32 + 7, 0),
        ("mysql-bin.000010", 120, 2),
        ("mysql-bin.1000000", 4, 0),  # past six digits: 1000000 > 999999 although it sorts first as text
        ("mysql-bin.999999", 4, 0),
    ]
    base = json.loads(text("dtle_create_snapshot.json"))
    lines = []
    for i, (file, pos, row) in enumerate(events):
        event = json.loads(json.dumps(base))
        event["payload"]["source"].update(file=file, pos=pos, row=row)
        event["payload"]["after"]["id"] = i
        lines.append(json.dumps(event))
    batch = land_and_normalize(spark, session_lake, source, [("binlog.jsonl", "\n".join(lines) + "\n")],
                               keys=KeySpec.parse(["inventory.customers=id"]))

    _, rows = staged(spark, session_lake, batch, "inventory.customers")
    numeric = sorted(range(len(events)), key=lambda i: (int(events[i][0].rsplit(".", 1)[1]), *events[i][1:]))
    assert [r.after.id for r in rows] == numeric
    assert [split_position(r.position)[0] for r in rows] == [mysql_prefix(*events[i]) for i in numeric]
    position = {r.after.id: r.position for r in rows}
    assert position[1] < position[0]  # mysql-bin.000003 pos 154 < mysql-bin.000010 pos 4


def staged_inserts(spark, settings, source: str, sources: list[dict[str, Any]]) -> list[Any]:
    """Stage one insert of ``inventory.customers`` (dtle's seed event, ``id`` = its index) per source block update;
    the staged rows in position order."""
    base = json.loads(text("dtle_create_snapshot.json"))
    lines = []
    for i, update in enumerate(sources):
        event = json.loads(json.dumps(base))
        event["payload"]["source"].update({"row": 0, "snapshot": "false", **update})
        event["payload"]["op"] = "c"
        event["payload"]["after"]["id"] = i
        lines.append(json.dumps(event))
    batch = land_and_normalize(spark, settings, source, [("inserts.jsonl", "\n".join(lines) + "\n")],
                               keys=KeySpec.parse(["inventory.customers=id"]))
    assert batch.result.quarantined == 0
    return staged(spark, settings, batch, "inventory.customers")[1]


def test_mysql_events_without_binlog_coordinates_keep_arrival_order(spark, session_lake, source):
    # Flink CDC's debezium-json writes MySQL events with `"file": "", "pos": 0` (Apache Paimon's Debezium test data):
    # older than any binlog position, in arrival order among themselves.
    rows = staged_inserts(spark, session_lake, source, [
        {"file": file, "pos": pos} for file, pos in [("", 0), ("", 0), ("mysql-bin.000003", 154), ("", 0)]])
    assert [r.after.id for r in rows] == [0, 1, 3, 2]
    assert [split_position(r.position)[0] for r in rows] == ["0" * 48] * 3 + [mysql_prefix("mysql-bin.000003", 154, 0)]


def test_postgres_events_with_long_min_value_for_lsn_keep_arrival_order(spark, session_lake, source):
    # Apache SeaTunnel's debezium-json writes Long.MIN_VALUE as the LSN of a PostgreSQL event it has none for (its
    # test data: `"lsn": -9223372036854776000`, `"sequence": "[null,\"-9223372036854775808\"]"`): like Flink's
    # MySQL placeholders, older than any real position. Any other negative LSN stays unreadable (broken corpus).
    placeholder = {"connector": "postgresql", "file": None, "pos": None, "row": None, "server_id": None,
                   "sequence": '[null,"-9223372036854775808"]'}
    rows = staged_inserts(spark, session_lake, source, [
        {**placeholder, "lsn": -9223372036854776000}, {**placeholder, "lsn": 24023128, "sequence": None},
        {**placeholder, "lsn": -9223372036854775808}])
    assert [r.after.id for r in rows] == [0, 2, 1]
    assert [split_position(r.position)[0] for r in rows] == ["0" * 48] * 2 + [format(24023128, "016x") * 2]


def test_ticdc_events_are_ordered_by_their_commit_ts(spark, session_lake, source):
    # TiCDC's Debezium protocol: no binlog coordinates (`"file": "", "pos": 0`), the transaction's TiDB timestamp in
    # `source.commit_ts`. Delivered out of commit order (one partition after another), they apply in commit order.
    rows = staged_inserts(spark, session_lake, source, [
        {"connector": "TiCDC", "file": "", "pos": 0, "commit_ts": ts, "cluster_id": "default"}
        for ts in [447507027004751875, 447507027004751873, 447507027004751874]])
    assert [r.after.id for r in rows] == [1, 2, 0]
    assert [split_position(r.position)[0] for r in rows] == [
        "0" * 16 + format(ts, "016x") + "0" * 16 for ts in (447507027004751873, 447507027004751874, 447507027004751875)]


def test_debezium_tidb_connector_events_are_ordered_by_their_commit_ts(spark, session_lake, source):
    # Debezium's TiDB connector (debezium-connector-tidb's TiDbSourceInfoStructMaker) writes TiDB's position without
    # TiCDC's MySQL placeholders: `commit_ts` and `cluster_id`, no file, pos, row or server_id. They were
    # quarantined as having no source position.
    tidb = {"connector": "tidb", "name": "tidb_server", "file": None, "pos": None, "row": None, "server_id": None,
            "gtid": None, "thread": None, "query": None, "cluster_id": "tidb-cluster-1"}
    rows = staged_inserts(spark, session_lake, source, [
        {**tidb, "commit_ts": ts} for ts in [446245805252059138, 446245805252059137, 446245805252059300]])
    assert [r.after.id for r in rows] == [1, 0, 2]
    assert [split_position(r.position)[0] for r in rows] == [
        "0" * 16 + format(ts, "016x") + "0" * 16 for ts in (446245805252059137, 446245805252059138, 446245805252059300)]


def test_oracle_events_are_ordered_by_commit_scn_then_scn(spark, session_lake, source):
    # Debezium's Oracle connector (LogMiner) positions a change by its transaction's commit SCN and its own SCN; a
    # snapshot read has only its SCN (Flink CDC's Oracle test output, Debezium 1.5.4).
    rows = staged_inserts(spark, session_lake, source, [
        {"connector": "oracle", "scn": "3634650", "commit_scn": "3638537"},
        {"connector": "oracle", "scn": "3634640", "commit_scn": "3638537"},
        {"connector": "oracle", "scn": "3634600", "commit_scn": None, "snapshot": "true"},
    ])
    assert [r.after.id for r in rows] == [2, 1, 0]
    assert [split_position(r.position)[0] for r in rows] == [
        format(3634600, "016x") * 2, format(3638537, "016x") + format(3634640, "016x"),
        format(3638537, "016x") + format(3634650, "016x")]


def test_a_source_time_of_zero_is_unknown(spark, session_lake, source):
    # Older MySQL connectors send snapshot reads with source.ts_ms 0: not 1970, but unknown; the envelope's ts_ms
    # (when the connector read the row) stands in, and without one the source time is null.
    base = json.loads(text("dtle_create_snapshot.json"))
    lines = []
    for i, envelope_ts in enumerate([1700000000123, None]):
        event = json.loads(json.dumps(base))
        event["payload"]["source"].update(ts_ms=0, ts_sec=0, pos=154 + i)
        event["payload"]["source"].pop("ts_us", None)
        event["payload"]["ts_ms"] = envelope_ts
        event["payload"]["after"]["id"] = i
        lines.append(json.dumps(event))
    batch = land_and_normalize(spark, session_lake, source, [("zero.jsonl", "\n".join(lines) + "\n")],
                               keys=KeySpec.parse(["inventory.customers=id"]))
    _, rows = staged(spark, session_lake, batch, "inventory.customers")
    assert [(r.after.id, r.source_ts_ms) for r in rows] == [(0, 1700000000123), (1, None)]


def test_debezium_0x_source_time_is_ts_usec(spark, session_lake, source):
    # apache/pulsar's io-debezium-source.md: a Debezium 0.9.2 PostgreSQL update, whose source time is
    # `source.ts_usec` (microseconds), as connectors before 1.0 wrote it. The envelope's ts_ms (1559208957692) is
    # when the connector read the change, not when it happened. Some 0.7 connectors (magma's test fixtures) put
    # nanoseconds in ts_usec: told apart by magnitude.
    update = (FIXTURES.parent / "external" / "pulsar-debezium-0.9.2-update.json").read_text(encoding="utf-8").strip()
    nanos = json.loads(update)
    nanos["payload"]["source"].update(ts_usec=1559208957661080123, lsn=23862873)
    nanos["payload"]["before"]["id"] = nanos["payload"]["after"]["id"] = 108
    batch = land_and_normalize(spark, session_lake, source,
                               [("old.jsonl", update + "\n" + json.dumps(nanos) + "\n")],
                               keys=KeySpec.parse(["inventory.products=id"]))  # the page prints the key apart
    _, rows = staged(spark, session_lake, batch, "inventory.products")
    assert [(r.after.id, r.source_ts_ms) for r in rows] == [(107, 1559208957661), (108, 1559208957661)]
    assert [r.source_ts.microsecond for r in rows] == [661080, 661080]


def test_a_message_key_without_columns_says_the_source_table_has_no_primary_key(spark, session_lake, source):
    # dtle's key for a table without a primary key: a key schema without fields and the payload {} (its
    # kafka3.go encoder). The reason says so, rather than that there is no message key.
    value = {"schema": {"type": "struct", "optional": False, "name": "dtle1.a.u.Envelope", "fields": [
        {"type": "struct", "optional": True, "field": "after", "name": "dtle1.a.u.Value",
         "fields": [{"type": "int32", "optional": True, "field": "x"}]}]},
             "payload": {"before": None, "after": {"x": 1}, "op": "c", "ts_ms": 1700000000000, "source": {
                 "version": "0.0.1", "name": "dtle1", "server_id": 1, "ts_sec": 1700000008, "file": "mysql-bin.000003",
                 "pos": 2200, "row": 0, "snapshot": False, "db": "a", "table": "u"}}}
    key = {"schema": {"type": "struct", "optional": False, "name": "dtle1.a.u.Key"}, "payload": {}}
    line = json.dumps({"topic": "dtle1", "partition": 0, "offset": 15, "key": json.dumps(key),
                       "payload": json.dumps(value)})
    batch = land_and_normalize(spark, session_lake, source, [("keyless.kcat.jsonl", line + "\n")])
    assert (batch.result.tables, batch.result.quarantined) == ({}, 1)
    (row,) = quarantined(spark, batch)
    assert row.reason.startswith("table a.u has no primary key: its message key has no columns (the source table "
                                 "has no primary key), and no pkNames or CREATE TABLE names one; declare one with "
                                 "--key a.u=COL"), row.reason


def test_a_string_converters_message_key_is_named_in_the_reason(spark, session_lake, source):
    # Kafka's StringConverter writes a Struct key as `Struct{id=1}`: there is a message key, but it names no columns.
    # A table that has no other key says so; with a declared key, a delete without a before image cannot be keyed.
    def value(op: str, after: dict[str, Any] | None, pos: int) -> str:
        return json.dumps({"schema": None, "payload": {
            "before": None, "after": after, "op": op, "ts_ms": 1700000000000,
            "source": {"version": "2.1.0.Final", "connector": "mysql", "name": "s", "ts_ms": 1700000000000,
                       "snapshot": "false", "db": "a", "table": "string_keyed", "file": "mysql-bin.000003", "pos": pos,
                       "row": 0}}})

    lines = "".join(json.dumps({"topic": "s", "partition": 0, "offset": i, "key": "Struct{id=1}",
                                "payload": value(op, after, 2200 + i)}) + "\n"
                    for i, (op, after) in enumerate([("c", {"id": 1, "x": 1}), ("d", None)]))
    batch = land_and_normalize(spark, session_lake, source, [("string-keys.kcat.jsonl", lines)])
    assert (batch.result.tables, batch.result.quarantined) == ({}, 2)
    assert {row.reason for row in quarantined(spark, batch)} == {
        'table a.string_keyed has no primary key: its message key is not a JSON object ("Struct{id=1}"; a string '
        "converter writes a key so, the JSON converter names the key's columns), and no pkNames or CREATE TABLE "
        "names one; declare one with --key a.string_keyed=COL[,COL...] (or `key:` in the source config's "
        "`overrides:` for the table)"}

    batch = land_and_normalize(spark, session_lake, f"{source}_keyed", [("string-keys.kcat.jsonl", lines)],
                               keys=KeySpec.parse(["a.string_keyed=id"]))
    assert (batch.result.tables, batch.result.quarantined) == ({"a.string_keyed": 1}, 1)
    (row,) = quarantined(spark, batch)
    assert row.reason == ("missing primary-key value (key columns: id): no row image has it, and the message key is "
                          "not a JSON object (a string converter writes a key so; the JSON converter names the key's "
                          "columns)")


def test_unchanged_toast_placeholders_of_every_column_kind_are_unavailable(spark, session_lake, source):
    # Debezium's PostgreSQL connector sends an unchanged TOASTed value as its placeholder in the column's own shape
    # (UnchangedToastedPlaceholder): the text, base64 bytes, a one-element text, bytes or uuid array, the
    # placeholder's bytes as an int or bigint array (DecoderDifferences.toastedValueIntPlaceholder in its tests), an
    # hstore map of the placeholder to itself, a geometry/geography of a point no real data uses.
    placeholder = b"__debezium_unavailable_value"
    digest = bytearray(hashlib.md5(placeholder).digest())  # java.util.UUID.nameUUIDFromBytes: an MD5, version 3
    digest[6], digest[8] = (digest[6] & 0x0F) | 0x30, (digest[8] & 0x3F) | 0x80
    as_bytes = base64.b64encode(placeholder).decode()

    def geo(name: str, wkb_hex: str) -> tuple[dict[str, Any], dict[str, Any]]:
        return ({"type": "struct", "name": f"io.debezium.data.geometry.{name}", "optional": True, "fields": [
            {"type": "bytes", "optional": False, "field": "wkb"},
            {"type": "int32", "optional": True, "field": "srid"}]},
            {"wkb": base64.b64encode(bytes.fromhex(wkb_hex)).decode(), "srid": 4326})
    geometry = geo("Geometry", "0101000020E6100000000000FC83D797C1000000FC83D797C1")
    geography = geo("Geography", "0101000020E61000000C21E7FDFF7F66401842CEFBFF7F5640")
    columns: dict[str, tuple[dict[str, Any], Any, Any]] = {  # name: (schema, placeholder, a real value)
        "txt": ({"type": "string"}, placeholder.decode(), "a long text"),
        "bin": ({"type": "bytes"}, as_bytes, base64.b64encode(b"\x01\x02").decode()),
        "txt_arr": ({"type": "array", "items": {"type": "string"}}, [placeholder.decode()], ["a", "b"]),
        "bin_arr": ({"type": "array", "items": {"type": "bytes"}}, [as_bytes], ["AQI="]),
        "int_arr": ({"type": "array", "items": {"type": "int32"}}, list(placeholder), [1, 2, 3]),
        "big_arr": ({"type": "array", "items": {"type": "int64"}}, list(placeholder), [2**40]),
        "date_arr": ({"type": "array", "items": {"type": "int32", "name": "io.debezium.time.Date"}},
                     list(placeholder), [19338]),
        "uuid_arr": ({"type": "array", "items": {"type": "string", "name": "io.debezium.data.Uuid"}},
                     [str(uuid.UUID(bytes=bytes(digest)))], ["b68a35a7-0000-4000-8000-000000000000"]),
        "tags": ({"type": "string", "name": "io.debezium.data.Json"},
                 json.dumps({placeholder.decode(): placeholder.decode()}, separators=(",", ":")), '{"k": "v"}'),
        "tags_map": ({"type": "map", "keys": {"type": "string"}, "values": {"type": "string"}},
                     {placeholder.decode(): placeholder.decode()}, {"k": "v"}),
        "geom": (geometry[0], geometry[1], {"wkb": "AQ==", "srid": 4326}),
        "geog": (geography[0], geography[1], {"wkb": "AQ==", "srid": 4326}),
    }
    fields = [{"type": "int32", "optional": False, "field": "id"}] + [
        {**schema, "optional": True, "field": name} for name, (schema, _, _) in columns.items()]
    row = {"type": "struct", "optional": True, "fields": fields, "name": "dbserver1.public.toasty.Value"}
    envelope = {"type": "struct", "optional": False, "name": "dbserver1.public.toasty.Envelope", "fields": [
        {**row, "field": "before"}, {**row, "field": "after"},
        {"type": "struct", "optional": False, "field": "source", "fields": [
            {"type": "string", "field": n} for n in ("connector", "db", "schema", "table")] + [
            {"type": "int64", "field": "lsn"}, {"type": "int64", "field": "ts_ms"}]},
        {"type": "string", "optional": False, "field": "op"}]}

    def event(lsn: int, op: str, after: dict[str, Any]) -> str:
        source = {"connector": "postgresql", "db": "postgres", "schema": "public", "table": "toasty", "lsn": lsn,
                  "ts_ms": 1670000000000 + lsn}
        return json.dumps({"schema": envelope, "payload": {"before": None, "after": {"id": 1, **after},
                                                           "source": source, "op": op}})
    lines = [event(100, "c", {n: real for n, (_, _, real) in columns.items()}),
             event(200, "u", {n: ph for n, (_, ph, _) in columns.items()})]
    batch = land_and_normalize(spark, session_lake, source, [("toast.jsonl", "\n".join(lines) + "\n")],
                               keys=KeySpec.parse(["public.toasty=id"]))
    assert (batch.result.tables, batch.result.quarantined) == ({"public.toasty": 2}, 0)
    _, (create, update) = staged(spark, session_lake, batch, "public.toasty")
    assert create.unavailable == [] and all(create.after[n] is not None for n in columns)
    assert update.unavailable == list(columns)
    assert all(update.after[n] is None for n in columns), update.after


def test_values_at_the_ends_of_the_calendar_and_the_clock_apply_and_dump(spark, session_lake, source):
    # MySQL's DATE and DATETIME start at year 1000 (before the Gregorian reform, which Spark refuses to write to
    # Parquet by default); its TIME spans -838:59:59..838:59:59, sent unwrapped; Debezium's PostgreSQL connector
    # sends `infinity` timestamps as 9223372036825200000 microseconds (year 294247, past Python's datetime).
    from cdclake.pipeline import apply_batch
    from cdclake.reader import dump_rows

    table = f"ends_{uuid.uuid4().hex[:6]}"
    fields = [("id", "int32", None), ("d", "int32", "io.debezium.time.Date"),
              ("at", "int64", "io.debezium.time.MicroTimestamp"), ("t", "int64", "io.debezium.time.MicroTime")]
    row = {"type": "struct", "optional": True, "name": f"s.inventory.{table}.Value", "fields": [
        {"type": t, "optional": n != "id", "field": n, **({"name": logical} if logical else {})}
        for n, t, logical in fields]}
    envelope = {"type": "struct", "optional": False, "fields": [
        {**row, "field": "before"}, {**row, "field": "after"},
        {"type": "struct", "optional": False, "field": "source", "fields": [
            {"type": "string", "field": n} for n in ("connector", "db", "table", "file")] + [
            {"type": "int64", "field": "pos"}, {"type": "int32", "field": "row"}, {"type": "int64", "field": "ts_ms"}]},
        {"type": "string", "optional": False, "field": "op"}]}
    values = [
        (-354285, -30610224000000000, -3723000000),  # 1000-01-01, 1000-01-01T00:00, -01:02:03
        (2932896, 9223372036825200000, 3020399000000),  # 9999-12-31, PostgreSQL infinity, 838:59:59
    ]
    lines = [json.dumps({"schema": envelope, "payload": {
        "before": None, "after": {"id": i, "d": d, "at": at, "t": t}, "op": "c",
        "source": {"connector": "mysql", "db": "inventory", "table": table, "file": "mysql-bin.000003",
                   "pos": 100 + i, "row": 0, "ts_ms": 1700000000000}}}) for i, (d, at, t) in enumerate(values)]
    batch = land_and_normalize(spark, session_lake, source, [("ends.jsonl", "\n".join(lines) + "\n")],
                               keys=KeySpec.parse([f"inventory.{table}=id"]))
    assert (batch.result.tables, batch.result.quarantined) == ({f"inventory.{table}": 2}, 0)
    apply_batch(spark, session_lake, source=source, batch_id=batch.batch_id)
    assert dump_rows(session_lake, f"inventory.{table}") == [
        {"id": 0, "d": "1000-01-01", "at": "1000-01-01T00:00:00.000000", "t": "-01:02:03.000000"},
        {"id": 1, "d": "9999-12-31", "at": "294247-01-10T04:00:25.200000", "t": "838:59:59.000000"},
    ]


def test_dtle_key_change_as_one_update_keyed_by_the_old_key(spark, session_lake, source):
    # dtle (driver/kafka: "update: use before value") writes a primary-key change as ONE update whose Kafka key is
    # the before image's key: the old key is deleted and the after image's key upserted.
    from cdclake.pipeline import apply_batch
    from cdclake.reader import dump_rows

    table = f"k{uuid.uuid4().hex[:8]}"
    base = json.loads(text("dtle_create_snapshot.json"))
    anne = base["payload"]["after"]

    def event(op: str, pos: int, before: dict[str, Any] | None, after: dict[str, Any]) -> str:
        doc = json.loads(json.dumps(base))
        doc["payload"].update(op=op, before=before, after=after)
        doc["payload"]["source"].update(table=table, pos=pos, row=0, snapshot=False)
        return json.dumps(doc)
    key = json.loads(text("dtle_key.json"))
    key["payload"] = {"id": anne["id"]}
    topic = f"dbserver1.inventory.{table}"
    lines = [kcat(0, json.dumps(key), event("c", 200, None, anne), topic=topic),
             kcat(1, json.dumps(key), event("u", 300, anne, {**anne, "id": 1104}), topic=topic)]
    batch = land_and_normalize(spark, session_lake, source, [("dtle.kcat.jsonl", "\n".join(lines) + "\n")])
    assert batch.result.quarantined == 0
    _, rows = staged(spark, session_lake, batch, f"inventory.{table}")
    assert [(r.op, r.key.id) for r in rows] == [("c", 1004), ("d", 1004), ("u", 1104)]
    apply_batch(spark, session_lake, source=source, batch_id=batch.batch_id)
    assert dump_rows(session_lake, f"inventory.{table}") == [{**anne, "id": 1104}]
