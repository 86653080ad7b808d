"""canal-family and MongoDB formats on every JSON example of the seed documents 003 (Huawei DRS) and 004 (CKafka).

Fixtures (``tests/fixtures/drs/``, ``tests/fixtures/ckafka/``) are the documents' examples, cut out unchanged
(CKafka's page indents them by four spaces, which is removed; its CREATE TABLE keeps the raw newlines inside the
``sql`` string, as printed). ``test_fixtures_are_the_seed_examples`` checks each is in its document.

Oracles: expected values are read from the fixtures with Python's ``json`` or are literals from the documents;
positions are computed here with ``format(n, "016x")``.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from cdclake.keys import KeySpec
from cdclake.landing import InputFile, land_files
from cdclake.normalize import normalize_batch, read_staged, staging_dir
from cdclake.reader import dump_rows
from cdclake.schema_changes import SKIP_ALTER, SKIP_CREATE, SKIP_RENAME
from tests.support.canal_batches import apply_messages, land_messages
from tests.support.seeds import SEEDS

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
QUARANTINE = "lake.cdclake_meta.quarantine"
UTC = dt.timezone.utc


def text(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def hex16(n: int) -> str:
    return format(n, "016x")


@pytest.fixture()
def source(request: pytest.FixtureRequest) -> str:
    name = re.sub(r"[^a-z0-9_]", "_", request.node.name.lower())[:40]
    return f"flat_{name}_{uuid.uuid4().hex[:6]}"


def run(spark, settings, source: str, names: list[str], fmt: str, keys: list[str] | None = None,
        replace: dict[str, tuple[str, str]] | None = None, time_zone: str | None = None):
    files = []
    for i, name in enumerate(names):
        doc = text(name)
        if replace and name in replace:
            doc = doc.replace(*replace[name])
        files.append(InputFile(f"mem://{source}/{i:02d}-{name.replace('/', '-')}", doc.encode("utf-8")))
    batch_id, created, _, _ = land_files(settings, source=source, files=files)
    assert created
    result = normalize_batch(spark, settings, source=source, batch_id=batch_id, fmt=fmt,
                             keys=KeySpec.parse(keys or []), time_zone=time_zone)
    return batch_id, result


def staged(spark, settings, source: str, batch_id: str, table: str) -> list[Any]:
    df = read_staged(spark, staging_dir(settings, source, batch_id) / table)
    return df.orderBy("position", "op").collect()


def quarantined(spark, source: str) -> list[Any]:
    return spark.sql(f"SELECT * FROM {QUARANTINE} WHERE source = '{source}' ORDER BY line").collect()


def test_fixtures_are_the_seed_examples():
    drs = (SEEDS / "003_8a447dafd9e5a45d.txt").read_text(encoding="utf-8")
    for path in sorted((FIXTURES / "drs").glob("*.json")):
        assert path.read_text(encoding="utf-8").strip() in drs, path.name
    ckafka = (SEEDS / "004_5ed5dc3885970de3.txt").read_text(encoding="utf-8")
    for path in sorted((FIXTURES / "ckafka").glob("*.json")):
        indented = "\n".join("    " + line if line else line for line in path.read_text().strip().split("\n"))
        assert indented.strip() in ckafka, path.name


def test_drs_mysql_update_that_changes_the_key(spark, session_lake, source):
    batch_id, result = run(spark, session_lake, source, ["drs/mysql_update.json"], "drs")
    doc = json.loads(text("drs/mysql_update.json"))
    (new,), (old,) = doc["data"], doc["old"]
    assert result.quarantined == 0
    # id 103 -> 104: the old key is deleted and the new one upserted, at the message's position.
    assert result.tables == {"test01.test": 2}
    delete, upsert = staged(spark, session_lake, source, batch_id, "test01.test")
    assert (delete.op, delete.key.id, delete.after) == ("d", int(old["id"]), None)
    assert (upsert.op, upsert.key.id) == ("u", int(new["id"]))
    assert delete.position == upsert.position
    assert upsert.position.split("/")[0] == hex16(doc["id"])
    assert upsert.source_ts == dt.datetime.fromtimestamp(doc["es"] / 1000, UTC).replace(tzinfo=None)
    row = upsert.after
    assert row.c3 == 103 and row.c10 == "华为云huaweicloud" and row.c13 == new["c13"]
    assert row.c4 == dt.datetime(2021, 6, 25, 17, 51, 53)                      # datetime: no zone
    assert row.c5 == dt.datetime.fromtimestamp(1624614713.201, UTC).replace(tzinfo=None)  # timestamp: epoch s
    assert (row.c7, row.c8, row.c9) == (10357.0, 12510357.0, Decimal("9874510357"))
    assert bytes(row.c12) == bytes(json.loads(new["c12"])) and bytes(row.c14) == bytes(json.loads(new["c14"]))
    assert bytes(row.c11) == b"" and bytes(row.c2) == b""
    assert upsert.before.c13 == old["c13"] and upsert.before.id == 103


def test_a_drs_delete_whose_row_is_in_old_and_data_empty_deletes_it(spark, session_lake, source):
    def message(position: int, kind: str, data: list[dict[str, str]] | None,
                old: list[dict[str, str]] | None) -> dict[str, Any]:
        return {"mysqlType": {"id": "int", "v": "varchar"}, "id": position, "es": 1700000000000,
                "ts": 1700000000007, "database": source, "table": "del", "type": kind, "isDdl": False, "sql": "",
                "sqlType": {"id": 4, "v": 12}, "data": data, "old": old, "pkNames": ["id"]}

    apply_messages(spark, session_lake, source, "0", [
        message(1, "INSERT", [{"id": "1", "v": "a"}, {"id": "2", "v": "b"}, {"id": "3", "v": "c"}], None),
        message(2, "DELETE", [], [{"id": "1", "v": "a"}]),  # the document: a DELETE's row is in `old`
        message(3, "DELETE", None, [{"id": "2", "v": "b"}]),
    ], fmt="drs")
    assert dump_rows(session_lake, f"{source}.del") == [{"id": 3, "v": "c"}]


def test_a_key_declared_for_the_table_overrides_the_streams(spark, session_lake, source):
    # pkNames says `id`; the declaration (config `key`, Debezium's message.key.columns idea) says c3. The update
    # changes `id` but not c3: under the declared key it is a plain update, not a key change.
    batch_id, result = run(spark, session_lake, source, ["drs/mysql_update.json"], "drs",
                           keys=["test01.test=c3", "id"])
    assert result.tables == {"test01.test": 1}
    (upsert,) = staged(spark, session_lake, source, batch_id, "test01.test")
    assert (upsert.op, upsert.key.asDict()) == ("u", {"c3": 103})


def test_drs_relational_gaussdb_update(spark, session_lake, source):
    batch_id, result = run(spark, session_lake, source, ["drs/gauss_update.json"], "drs",
                           keys=["schema01.table01=smallint_column"])
    assert (result.tables, result.quarantined) == ({"schema01.table01": 1}, 0)
    (row,) = staged(spark, session_lake, source, batch_id, "schema01.table01")
    assert (row.op, row.key.smallint_column) == ("u", 12)
    assert row.after.timestamp_column == dt.datetime(2021, 12, 16, 12, 31, 49, 344365)
    assert row.before.timestamp_column == dt.datetime(2014, 7, 2, 6, 14, 0, 742000)
    assert (row.after.boolean_column, row.before.boolean_column) == (False, True)
    assert bytes(row.after.bytea_column) == b"bytea_data"
    assert row.after.int4range_column == "[11,20)" and row.after.char_column == "g"
    assert json.loads(row.after.jsonb_column) == {"key1": "value1", "key2": "value2"}
    assert row.position.split("/")[0] == hex16(332)


def test_drs_relational_tables_of_two_databases_do_not_mix(spark, session_lake, source):
    """The same schema and table in two databases map to one lake table: the first source table named keeps it,
    the other's changes are quarantined (before, the second row overwrote the first)."""
    doc = text("drs/gauss_update.json")
    other = doc.replace('"database01"', '"database02"').replace('"id": 332', '"id": 333')
    files = [InputFile(f"mem://{source}/{i}.json", d.encode("utf-8")) for i, d in enumerate([doc, other])]
    batch_id, _, _, _ = land_files(session_lake, source=source, files=files)
    result = normalize_batch(spark, session_lake, source=source, batch_id=batch_id, fmt="drs",
                             keys=KeySpec.parse(["schema01.table01=smallint_column"]))
    assert (result.tables, result.quarantined) == ({"schema01.table01": 1}, 1)
    (row,) = quarantined(spark, source)
    assert "source table database02.schema01.table01 maps to lake table schema01.table01" in row.reason
    assert "(the lake id of a table named by its schema leaves the database out)" in row.reason
    assert "holds source table database01.schema01.table01" in row.reason


def test_a_drs_relational_table_recorded_without_its_database_takes_the_first_database_named(spark, session_lake,
                                                                                             source):
    """A lake table made before the source table's name held the database records ``schema.table``: its database's
    changes go on into it (the record now names the database), another database's are quarantined."""
    from cdclake.catalog import SOURCE_TABLE_PROPERTY
    from cdclake.identity import spark_table_name
    from cdclake.pipeline import apply_batch

    table = f"t{uuid.uuid4().hex[:8]}"
    doc = text("drs/gauss_update.json").replace('"table01"', f'"{table}"')
    tid, name = f"schema01.{table}", spark_table_name(f"schema01.{table}")

    def batch(db: str, id_: int):
        message = doc.replace('"database01"', f'"{db}"').replace('"id": 332', f'"id": {id_}')
        batch_id, _, _, _ = land_files(session_lake, source=source, files=[
            InputFile(f"mem://{source}/{id_}.json", message.encode("utf-8"))])
        result = normalize_batch(spark, session_lake, source=source, batch_id=batch_id, fmt="drs",
                                 keys=KeySpec.parse([f"{tid}=smallint_column"]))
        apply_batch(spark, session_lake, source=source, batch_id=batch_id)
        return result

    assert batch("database01", 400).quarantined == 0
    spark.sql(f"ALTER TABLE {name} SET TBLPROPERTIES ('{SOURCE_TABLE_PROPERTY}'='schema01.{table}')")
    assert batch("database01", 401).quarantined == 0
    recorded = {r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES {name}").collect()}
    assert recorded[SOURCE_TABLE_PROPERTY] == f"database01.schema01.{table}"
    assert batch("database02", 402).quarantined == 1


def test_drs_relational_without_key_is_quarantined_with_how_to_declare_it(spark, session_lake, source):
    _, result = run(spark, session_lake, source, ["drs/gauss_update.json"], "drs")
    assert (result.tables, result.quarantined) == ({}, 1)
    (row,) = quarantined(spark, source)
    assert "--key schema01.table01=" in row.reason and row.table_id == "schema01.table01"


MONGO = ["drs/mongo_insert.json", "drs/mongo_replace.json", "drs/mongo_update_set.json",
         "drs/mongo_update_unset_set.json", "drs/mongo_delete.json"]


def test_drs_mongodb_records(spark, session_lake, source):
    batch_id, result = run(spark, session_lake, source, MONGO, "drs")
    assert (result.tables, result.quarantined) == ({"ljx.ljx": 5}, 0)
    insert, replace, set_, unset_set, delete = staged(spark, session_lake, source, batch_id, "ljx.ljx")
    oid = "64650cf67dc36a464e76e583"
    assert [r.op for r in (insert, replace, set_, unset_set, delete)] == ["c", "u", "u", "u", "d"]
    assert {r.key._id for r in (insert, replace, set_, unset_set, delete)} == {oid}
    assert json.loads(insert.after.document) == {"_id": oid, "c1": "baz", "tags": ["mongodb", "database", "NoSQL"]}
    assert json.loads(replace.after.document) == {"_id": oid, "c1": "sss"}
    # A partial update keeps the stored document (unavailable) and carries its operators as the patch.
    assert (set_.after.document, set_.unavailable, json.loads(set_.patch)) == (None, ["document"],
                                                                              {"$set": {"c1": "aaa"}})
    assert json.loads(unset_set.patch) == {"$unset": {"c1": True}, "$set": {"column1": "aaa"}}
    assert delete.after is None and delete.patch is None
    assert insert.position.split("/")[0] == hex16(1684344064) + hex16(1) + hex16(256)
    assert replace.position.split("/")[0] == hex16(1684344904) + hex16(9) + hex16(340)


def test_mongo_shell_helpers_become_json_but_text_inside_strings_stays(spark):
    from pyspark.sql import functions as F

    from cdclake.formats.mongo import _not_a_document, shell_to_json

    oid = "64650cf67dc36a464e76e005"
    texts = {
        f'{{"_id": ObjectId("{oid}"), "n": NumberLong(7), "i": NumberInt("8"), "d": NumberDecimal("1.50"), '
        f'"at": ISODate("2023-05-17T10:00:00Z"), "b": new BinData(0, "AQID"), "c": BinData(4, "AQ=="), '
        f'"t": Timestamp(1684344064, 1)}}': {
            "_id": oid, "n": 7, "i": 8, "d": "1.50", "at": "2023-05-17T10:00:00Z", "b": "AQID", "c": "AQ==",
            "t": {"t": 1684344064, "i": 1}},
        # String data that reads like a helper is data (it was rewritten to "counts as 5 or 6").
        f'{{"_id": ObjectId("{oid}"), "note": "counts as NumberLong(5) or NumberInt(6)", '
        f'"q": "say \\"ObjectId(\\"{oid}\\")\\" (sic)", "n": NumberLong(9)}}': {
            "_id": oid, "note": "counts as NumberLong(5) or NumberInt(6)", "q": f'say "ObjectId("{oid}")" (sic)',
            "n": 9},
    }
    df = spark.createDataFrame([(t,) for t in texts], "text string")
    converted = [r[0] for r in df.select(shell_to_json(F.col("text"))).collect()]
    assert [json.loads(c) for c in converted] == list(texts.values())

    # What the MongoDB Java driver's shell mode also writes is not converted: the reason names it.
    unsupported = [f'{{"_id": ObjectId("{oid}"), "at": new Date(-62198755200000)}}',
                   f'{{"_id": ObjectId("{oid}"), "note": "Date(1)", "re": /^abc/i}}', '{"_id": 1, "lo": MinKey}']
    df = spark.createDataFrame([(t,) for t in unsupported], "text string")
    reasons = [r[0] for r in df.select(_not_a_document("value", shell_to_json(F.col("text")))).collect()]
    assert [r.split(": unsupported shell syntax ")[1].split(" (")[0] for r in reasons] == [
        "new Date(", "/^abc/i", "MinKey"]
    assert reasons[0].startswith("field value is not a document (mongo shell JSON): unsupported shell syntax")


@pytest.mark.parametrize("split", [None, 2, 3], ids=["one-batch", "patches-in-next-batch", "each-apart"])
def test_drs_mongodb_partial_updates_patch_the_stored_document(spark, session_lake, source, split):
    from cdclake.pipeline import apply_batch

    names = MONGO[:4]
    groups = [names] if split is None else [names[:split], names[split:]]
    if split == 3:
        groups = [[n] for n in names]
    db = f"m{uuid.uuid4().hex[:8]}"  # the session lake is shared: a collection of this test's own
    for group in groups:
        files = [InputFile(f"mem://{source}/{n.replace('/', '-')}",
                           text(n).replace('"db": "ljx"', f'"db": "{db}"').encode("utf-8")) for n in group]
        batch_id, _, _, _ = land_files(session_lake, source=source, files=files)
        normalize_batch(spark, session_lake, source=source, batch_id=batch_id, fmt="drs")
        apply_batch(spark, session_lake, source=source, batch_id=batch_id)
    (row,) = dump_rows(session_lake, f"{db}.ljx")
    # insert, replace {c1: sss}, $set c1=aaa, $unset c1 + $set column1=aaa
    assert json.loads(row["document"]) == {"_id": "64650cf67dc36a464e76e583", "column1": "aaa"}


def test_each_drs_mongodb_change_of_a_batch_is_its_own_changelog_row_and_count(spark, session_lake, source):
    # Patches are folded into full documents change by change: the changelog holds the document after each change
    # (it held one folded `noop` row per key), and changes older than the stored document are each counted stale.
    from cdclake.apply import changelog_table_id
    from cdclake.settings import CATALOG_NAME

    db = f"m{uuid.uuid4().hex[:8]}"
    docs = [json.loads(text(n).replace('"db": "ljx"', f'"db": "{db}"')) for n in MONGO]
    first = apply_messages(spark, session_lake, source, "0", docs[:4], fmt="drs")[f"{db}.ljx"]
    # The delete, and the replace and the $set delivered again: older than the stored document.
    second = apply_messages(spark, session_lake, source, "1", [docs[1], docs[2], docs[4]], fmt="drs")[f"{db}.ljx"]
    assert (first.inserted, first.updated, first.skipped_stale, first.rows_after) == (1, 0, 0, 1)  # per key
    assert (second.deleted, second.skipped_stale, second.rows_after) == (1, 2, 0)
    changelog = spark.table(f"{CATALOG_NAME}.{changelog_table_id(f'{db}.ljx')}").orderBy("_cdc_position").collect()
    oid = "64650cf67dc36a464e76e583"
    assert [(r["_cdc_action"], r["document"] and json.loads(r["document"])) for r in changelog] == [
        ("insert", {"_id": oid, "c1": "baz", "tags": ["mongodb", "database", "NoSQL"]}),
        ("update", {"_id": oid, "c1": "sss"}),
        ("update", {"_id": oid, "c1": "aaa"}),
        ("update", {"_id": oid, "column1": "aaa"}),
        ("delete", None),
    ]


def test_long_string_values_are_read_in_every_regex_that_matches_json_strings(spark, session_lake, source):
    # Java's regex engine recursed once per character of a string in `"(?:[^"\\]|\\.)*"`: a string of a few
    # thousand characters overflowed the stack and the driver died (a canal row with a fractional number, whose
    # strings are matched to quote the numbers; a MongoDB document patched or converted from shell syntax).
    text_value = 'quote \\" and ' + "x" * 60000 + " é"
    db = f"m{uuid.uuid4().hex[:8]}"
    mongo = [json.loads(text(n).replace('"db": "ljx"', f'"db": "{db}"')) for n in MONGO[:1] + MONGO[2:3]]
    mongo[0]["value"] = mongo[0]["value"].replace('"baz"', json.dumps(text_value))
    apply_messages(spark, session_lake, source, "0", mongo, fmt="drs")
    (row,) = dump_rows(session_lake, f"{db}.ljx")
    assert json.loads(row["document"])["c1"] == "aaa" and json.loads(row["document"])["tags"][0] == "mongodb"

    canal_db = f"c{uuid.uuid4().hex[:8]}"
    message = {"data": [{"id": "1", "note": text_value, "amount": 12345678901234567.89}], "database": canal_db,
               "es": 1, "id": 1, "isDdl": False, "mysqlType": {"id": "int", "note": "longtext",
                                                              "amount": "decimal(20,2)"},
               "old": None, "pkNames": ["id"], "sql": "", "sqlType": {"id": 4, "note": 2005, "amount": 3},
               "table": "items", "ts": 1, "type": "INSERT"}
    line = json.dumps(message).replace("1.2345678901234568e+16", "12345678901234567.89")
    assert "12345678901234567.89" in line
    from cdclake.pipeline import apply_batch

    batch_id, _, _, _ = land_files(session_lake, source=source,
                                   files=[InputFile(f"mem://{source}/long.jsonl", (line + "\n").encode("utf-8"))])
    assert normalize_batch(spark, session_lake, source=source, batch_id=batch_id, fmt="canal").quarantined == 0
    apply_batch(spark, session_lake, source=source, batch_id=batch_id)
    assert dump_rows(session_lake, f"{canal_db}.items") == [
        {"id": 1, "note": text_value, "amount": "12345678901234567.89"}]


def test_a_drs_mongodb_update_with_the_oplogs_format_version_1_is_applied(spark, session_lake, source):
    # MongoDB 3.6-4.4 oplog updates carry "$v": 1 beside the operators: a format version, not an operator.
    # ("$v": 2 is the diff format, {"$v": 2, "diff": ...}, which cdclake does not read: quarantined.)
    from cdclake.pipeline import apply_batch

    db = f"m{uuid.uuid4().hex[:8]}"
    docs = [text(n).replace('"db": "ljx"', f'"db": "{db}"') for n in ("drs/mongo_insert.json",
                                                                      "drs/mongo_update_set.json")]
    docs[1] = docs[1].replace('"{\\"$set\\"', '"{\\"$v\\": 1, \\"$set\\"')
    assert '$v' in docs[1]
    files = [InputFile(f"mem://{source}/{i}.json", d.encode("utf-8")) for i, d in enumerate(docs)]
    batch_id, _, _, _ = land_files(session_lake, source=source, files=files)
    result = normalize_batch(spark, session_lake, source=source, batch_id=batch_id, fmt="drs")
    assert result.quarantined == 0, result
    apply_batch(spark, session_lake, source=source, batch_id=batch_id)
    (row,) = dump_rows(session_lake, f"{db}.ljx")
    assert json.loads(row["document"])["c1"] == "aaa"


def test_ckafka_format_one_with_declared_key(spark, session_lake, source):
    names = ["ckafka/dml_insert.json", "ckafka/dml_update.json", "ckafka/dml_delete.json"]
    batch_id, result = run(spark, session_lake, source, names, "ckafka", keys=["inventory.customers=id"])
    assert (result.tables, result.quarantined) == ({"inventory.customers": 3}, 0)
    rows = staged(spark, session_lake, source, batch_id, "inventory.customers")
    assert [r.op for r in rows] == ["c", "u", "d"]
    assert [r.position.split("/")[0] for r in rows] == [hex16(3) + hex16(p) + hex16(0) for p in (154, 484, 805)]
    # No types in Format I: every column is a string.
    assert rows[0].after.asDict() == json.loads(text("ckafka/dml_insert.json"))["NEW_VALUES"]
    assert rows[1].after.first_name == "Anne Marie" and rows[1].before.first_name == "Anne"
    assert rows[2].before.first_name == "Anne Marie" and rows[2].key.id == "1004"
    assert rows[0].source_ts == dt.datetime(1970, 1, 1, 8, 0, 0)


@pytest.mark.parametrize("time", ['19700101080000"', "1970-01-01 08:00", "19701301080000"],
                         ids=["trailing-quote", "not-the-pattern", "month-13"])
def test_ckafka_time_that_does_not_parse_leaves_the_source_time_unknown(spark, session_lake, source, time):
    # Spark's default parser policy fails the whole job on a text the pre-3.0 parser would read (the first case).
    batch_id, result = run(spark, session_lake, source, ["ckafka/dml_insert.json"], "ckafka",
                           keys=["inventory.customers=id"],
                           replace={"ckafka/dml_insert.json": ('"19700101080000"', json.dumps(time))})
    assert (result.tables, result.quarantined) == ({"inventory.customers": 1}, 0)
    (row,) = staged(spark, session_lake, source, batch_id, "inventory.customers")
    assert (row.op, row.source_ts, row.after.id) == ("c", None, "1004")


def test_ckafka_create_table_gives_key_and_types(spark, session_lake, source):
    # The document's CREATE TABLE is for dip_test.customers; the DML is for inventory.customers. Point the DDL at
    # the DML's database so the stream describes one table.
    names = ["ckafka/ddl_create_database.json", "ckafka/ddl_create_table.json", "ckafka/dml_insert.json",
             "ckafka/dml_update.json", "ckafka/ddl_alter_table.json", "ckafka/ddl_rename_table.json",
             "ckafka/ddl_drop_table.json", "ckafka/ddl_drop_database.json"]
    batch_id, result = run(spark, session_lake, source, names, "ckafka",
                           replace={"ckafka/ddl_create_table.json": ('"dip_test"', '"inventory"')})
    # test.user (ALTER TABLE only) is unknown and keyless: nothing to create.
    assert result.tables == {"inventory.customers": 2}
    assert result.skipped == {
        "DDL create database: no effect on tables": 1,
        "DDL drop database: no effect on tables": 1,
        SKIP_CREATE: 1,
        SKIP_ALTER: 1,
        # Under the default `evolve` DDL policy (tests/e2e/test_ddl_policies.py covers the policies):
        SKIP_RENAME: 1,
        "TRUNCATE (or DROP TABLE) of a table the lake does not have: nothing to remove (its position is kept, so "
        "older changes that arrive later stay out)": 1,
    }
    insert, update = staged(spark, session_lake, source, batch_id, "inventory.customers")
    assert insert.key.id == 1004 and insert.after.id == 1004     # int, from the CREATE TABLE
    assert update.after.first_name == "Anne Marie"
    assert list(quarantined(spark, source)) == []


@pytest.mark.parametrize("fmt", ["ckafka", "auto"])
def test_ckafka_drop_table_alone_in_its_batch_follows_the_earlier_batches(spark, session_lake, source, fmt):
    # CKafka's canal-format DDL has no position (`id` 0). Alone in a batch (Kafka decides batch boundaries), the
    # DROP TABLE comes after its table's changes in the earlier batches and before the later ones: 1004 and 1005 go,
    # 1006 (a later batch) stays, also when the drop's batch is replayed after it. Another table's partition may be
    # ahead (its change at 5000 landed before 1006 at 1000): only the dropped table's changes order the drop.
    # With --format auto, finding the earlier batch's position once ran the driver out of memory (1 GB).
    from cdclake.apply_options import ApplyOptions
    from cdclake.pipeline import apply_batch

    db = f"c{uuid.uuid4().hex[:8]}"

    def ddl(kind: str, sql: str) -> dict[str, Any]:
        return {"data": None, "database": db, "es": 1655812326, "id": 0, "isDdl": True, "mysqlType": None,
                "old": None, "pkNames": None, "sql": sql, "sqlType": None, "table": "customers", "ts": 1655812326,
                "type": kind}

    def insert(key: int, pos: int, table: str = "customers") -> dict[str, Any]:
        return {"BINLOG_NAME": "mysql-bin.000003", "BINLOG_POS": pos, "DATABASE": db, "EVENT_SERVER_ID": None,
                "GLOBAL_ID": None, "GROUP_ID": None, "NEW_VALUES": {"id": str(key), "name": f"n{key}"},
                "OLD_VALUES": None, "TABLE": table, "TIME": "20160611015029", "TYPE": "I"}
    batches = [
        [ddl("CREATE", "CREATE TABLE `customers` (`id` int NOT NULL, `name` varchar(255), PRIMARY KEY (`id`))"),
         insert(1004, 154)],
        [insert(1005, 900), insert(1, 5000, "orders")],
        [ddl("ERASE", f"DROP TABLE IF EXISTS `{db}`.`customers`")],
        [insert(1006, 1000)],
    ]
    ids = []
    for n, docs in enumerate(batches):
        content = "".join(json.dumps(d) + "\n" for d in docs)
        batch_id, _, _, _ = land_files(session_lake, source=source, files=[
            InputFile(f"mem://{source}/{n}.jsonl", content.encode("utf-8"))])
        ids.append(batch_id)

    def run_batch(batch_id: str) -> list[dict[str, Any]]:
        result = normalize_batch(spark, session_lake, source=source, batch_id=batch_id, fmt=fmt,
                                 keys=KeySpec.parse([f"{db}.orders=id"]))
        assert result.quarantined == 0, quarantined(spark, source)
        apply_batch(spark, session_lake, source=source, batch_id=batch_id, default=ApplyOptions())
        return dump_rows(session_lake, f"{db}.customers")
    tables = [run_batch(batch_id) for batch_id in ids]
    assert [[r["id"] for r in rows] for rows in tables] == [[1004], [1004, 1005], [], [1006]]
    assert run_batch(ids[2]) == [{"id": 1006, "name": "n1006"}]  # the drop, replayed


def test_auto_detects_every_dialect_in_one_batch(spark, session_lake, source):
    names = ["drs/mysql_update.json", "drs/mongo_insert.json", "ckafka/dml_insert.json",
             "debezium/pg_create.json", "debezium/sqlserver_create.json", "debezium/dtle_create_snapshot.json"]
    # The Debezium documents print values without their keys: declare `id` (messages' own keys still win).
    _, result = run(spark, session_lake, source, names, "auto", keys=["id"])
    assert result.quarantined == 0
    assert set(result.tables) == {"test01.test", "ljx.ljx", "inventory.customers", "public.customers",
                                  "dbo.customers"}


def test_a_format_rejects_another_dialect_by_name(spark, session_lake, source):
    _, result = run(spark, session_lake, source, ["drs/mongo_insert.json", "ckafka/dml_insert.json"], "canal")
    assert result.quarantined == 2
    reasons = [r.reason for r in quarantined(spark, source)]
    assert [r.split(" message")[0] for r in reasons] == ["message looks like a mongo", "message looks like a ckafka"]
    assert all("--format canal does not read" in r for r in reasons)


def test_values_that_do_not_convert_are_quarantined_with_column_and_value(spark, session_lake, source):
    doc = json.loads(text("drs/mysql_update.json"))
    doc["data"][0]["c3"] = "abc"
    doc["old"] = None
    doc["type"] = "INSERT"
    good = json.loads(text("drs/mysql_update.json"))
    good["type"], good["old"], good["id"] = "INSERT", None, doc["id"] + 1
    content = json.dumps(doc, ensure_ascii=False) + "\n" + json.dumps(good, ensure_ascii=False) + "\n"
    batch_id, created, _, _ = land_files(session_lake, source=source,
                                         files=[InputFile(f"mem://{source}/x.jsonl", content.encode("utf-8"))])
    result = normalize_batch(spark, session_lake, source=source, batch_id=batch_id, fmt="canal")
    assert (result.tables, result.quarantined) == ({"test01.test": 1}, 1)
    (row,) = quarantined(spark, source)
    assert row.reason == 'value does not convert to the column type: after column c3 (int): ["abc"]'
    assert row.line == 1


def test_mysql_zero_dates_become_null_not_failed_casts(spark, session_lake, source):
    # MySQL's "no date" (canal and DRS pass it through as text) is null, as Debezium makes it; a date with only
    # some zero parts has no such meaning and still fails.
    doc = json.loads(text("drs/mysql_update.json"))
    doc["type"], doc["old"] = "INSERT", None
    doc["data"][0].update(c4="0000-00-00 00:00:00", c5="0000-00-00 00:00:00")
    bad = json.loads(json.dumps(doc))
    bad["id"] += 1
    bad["data"][0].update(id="105", c4="2021-00-00 00:00:00")
    content = json.dumps(doc, ensure_ascii=False) + "\n" + json.dumps(bad, ensure_ascii=False) + "\n"
    batch_id, _, _, _ = land_files(session_lake, source=source,
                                   files=[InputFile(f"mem://{source}/z.jsonl", content.encode("utf-8"))])
    result = normalize_batch(spark, session_lake, source=source, batch_id=batch_id, fmt="drs")
    assert (result.tables, result.quarantined) == ({"test01.test": 1}, 1)
    (row,) = staged(spark, session_lake, source, batch_id, "test01.test")
    assert (row.after.c4, row.after.c5, row.after.c3) == (None, None, 103)
    (rejected,) = quarantined(spark, source)
    assert rejected.reason == ('value does not convert to the column type: after column c4 (timestamp_ntz): '
                               '["2021-00-00 00:00:00"]')


def test_a_batch_whose_messages_widen_columns_types_them_with_the_wider_types(spark, session_lake, source):
    # canal reports each message's column types. Column v is int in the first message and bigint in the second,
    # w the other way round: whichever schema the batch's schema pass sees last, both are typed bigint.
    def message(n: int, v: tuple[str, str, int], w: tuple[str, str, int]) -> str:
        return json.dumps({"data": [{"id": "1", "v": v[0], "w": w[0]}], "database": "db", "es": 1683008289000 + n,
                           "id": n, "isDdl": False, "mysqlType": {"id": "int", "v": v[1], "w": w[1]}, "old": None,
                           "pkNames": ["id"], "sql": "", "sqlType": {"id": 4, "v": v[2], "w": w[2]}, "table": "t",
                           "ts": 1683008289719 + n, "type": "INSERT" if n == 1 else "UPDATE"})
    content = (message(1, ("30", "int", 4), ("40000000000", "bigint", -5)) + "\n"
               + message(2, ("30000000000", "bigint", -5), ("40", "int", 4)) + "\n")
    batch_id, _, _, _ = land_files(session_lake, source=source,
                                   files=[InputFile(f"mem://{source}/w.jsonl", content.encode("utf-8"))])
    result = normalize_batch(spark, session_lake, source=source, batch_id=batch_id, fmt="canal")
    assert (result.tables, result.quarantined) == ({"db.t": 2}, 0)
    rows = staged(spark, session_lake, source, batch_id, "db.t")
    assert [(r.after.v, r.after.w) for r in rows] == [(30, 40000000000), (30000000000, 40)]


def test_a_column_widened_in_a_later_batch_widens_the_table_its_changelog_and_history(spark, session_lake, source):
    from cdclake.apply import changelog_table_id, history_table_id
    from cdclake.apply_options import ApplyOptions
    from cdclake.catalog import table_schema
    from cdclake.identity import spark_table_name
    from cdclake.pipeline import apply_batch

    db = f"w{uuid.uuid4().hex[:8]}"  # the session lake is shared: a table of this test's own
    first = {"data": [{"id": "1", "v": "30"}], "database": db, "es": 1683008289000, "id": 1, "isDdl": False,
             "mysqlType": {"id": "int", "v": "int"}, "old": None, "pkNames": ["id"], "sql": "",
             "sqlType": {"id": 4, "v": 4}, "table": "t", "ts": 1683008289719, "type": "INSERT"}
    second = {**first, "data": [{"id": "1", "v": "30000000000"}], "old": [{"v": "30"}], "id": 2, "es": 1683168079000,
              "mysqlType": {"id": "int", "v": "bigint"}, "sqlType": {"id": 4, "v": -5}, "type": "UPDATE"}
    for n, doc in enumerate([first, second]):
        batch_id, _, _, _ = land_files(session_lake, source=source, files=[
            InputFile(f"mem://{source}/{n}.jsonl", (json.dumps(doc) + "\n").encode("utf-8"))])
        assert normalize_batch(spark, session_lake, source=source, batch_id=batch_id, fmt="canal").quarantined == 0
        apply_batch(spark, session_lake, source=source, batch_id=batch_id, default=ApplyOptions(history=True))
    tid = f"{db}.t"
    assert dump_rows(session_lake, tid) == [{"id": 1, "v": 30000000000}]
    for table in (tid, changelog_table_id(tid), history_table_id(tid)):
        assert table_schema(spark, table)["v"].dataType.simpleString() == "bigint", table
    values = spark.table(spark_table_name(changelog_table_id(tid))).orderBy("_cdc_position").select("v").collect()
    assert [r.v for r in values] == [30, 30000000000]


def test_a_full_sync_landed_after_incremental_batches_fits_their_wider_decimal(spark, session_lake, source):
    # DRS writes a bare `decimal` type: an incremental batch without DDL types the column decimal(38,10). The full
    # sync's CREATE TABLE (decimal(12,2)) arrives later; its values fit the table's column without loss.
    from cdclake.apply_options import ApplyOptions
    from cdclake.pipeline import apply_batch

    db = f"d{uuid.uuid4().hex[:8]}"
    common = {"es": 1624614713000, "ts": 1625058726990, "database": db, "table": "pay", "old": None}
    full_sync = [
        {**common, "mysqlType": None, "id": 1, "type": "INIT_DDL", "isDdl": True, "sqlType": None, "data": None,
         "sql": "CREATE TABLE `pay` (`id` int NOT NULL, `amount` decimal(12,2), PRIMARY KEY (`id`))",
         "pkNames": None},
        {**common, "mysqlType": {"id": "int", "amount": "decimal"}, "id": 2, "type": "INIT", "isDdl": False,
         "sql": "", "sqlType": {"id": 4, "amount": 3}, "data": [{"id": "1", "amount": "10.50"}], "pkNames": ["id"]},
    ]
    incremental = [{**full_sync[1], "id": 10, "type": "INSERT", "data": [{"id": "2", "amount": "3.25"}]}]
    for n, docs in enumerate([incremental, full_sync]):
        content = "".join(json.dumps(d) + "\n" for d in docs)
        batch_id, _, _, _ = land_files(session_lake, source=source, files=[
            InputFile(f"mem://{source}/{n}.jsonl", content.encode("utf-8"))])
        assert normalize_batch(spark, session_lake, source=source, batch_id=batch_id, fmt="drs").quarantined == 0
        apply_batch(spark, session_lake, source=source, batch_id=batch_id, default=ApplyOptions())
    rows = dump_rows(session_lake, f"{db}.pay")
    assert [(r["id"], Decimal(str(r["amount"]))) for r in rows] == [(1, Decimal("10.50")), (2, Decimal("3.25"))]


def test_a_decimal_whose_scale_grows_in_a_later_batch_keeps_the_table_scale_and_quarantines_what_does_not_fit(
        spark, session_lake, source):
    # Apache Paimon's canal typenochange test: `v` is decimal(10,2), then (MODIFY COLUMN) decimal(15,4). Iceberg
    # cannot change a scale: values that have no more than 2 fraction digits still go in (the precision widens
    # for the 11 integer digits decimal(15,4) allows); a value with 4 is quarantined, not rounded.
    from cdclake.apply_options import ApplyOptions
    from cdclake.catalog import table_schema
    from cdclake.pipeline import apply_batch

    db = f"s{uuid.uuid4().hex[:8]}"

    def insert(n: int, k: str, v: str, v_type: str) -> dict[str, Any]:
        return {"data": [{"k": k, "v": v}], "database": db, "es": 1683880554000, "id": n, "isDdl": False,
                "mysqlType": {"k": "int", "v": v_type}, "old": None, "pkNames": ["k"], "sql": "",
                "sqlType": {"k": 4, "v": 3}, "table": "d", "ts": 1683880554351, "type": "INSERT"}

    batches = [[insert(1, "1", "1.2", "decimal(10,2)")],
               [insert(2, "2", "2.3", "decimal(15,4)"), insert(3, "3", "2.3456", "decimal(15,4)"),
                insert(4, "4", "12345678901.5000", "decimal(15,4)")]]
    quarantined_counts = []
    for n, docs in enumerate(batches):
        content = "".join(json.dumps(d) + "\n" for d in docs)
        batch_id, _, _, _ = land_files(session_lake, source=source, files=[
            InputFile(f"mem://{source}/{n}.jsonl", content.encode("utf-8"))])
        quarantined_counts.append(
            normalize_batch(spark, session_lake, source=source, batch_id=batch_id, fmt="canal").quarantined)
        apply_batch(spark, session_lake, source=source, batch_id=batch_id, default=ApplyOptions())
    assert quarantined_counts == [0, 1]
    assert table_schema(spark, f"{db}.d")["v"].dataType.simpleString() == "decimal(13,2)"
    rows = dump_rows(session_lake, f"{db}.d")
    assert [(r["k"], Decimal(str(r["v"]))) for r in rows] == [
        (1, Decimal("1.20")), (2, Decimal("2.30")), (4, Decimal("12345678901.50"))]
    (row,) = [r for r in quarantined(spark, source) if r.table_id == f"{db}.d"]
    assert row.reason == 'value does not convert to the column type: after column v (decimal(13,2)): ["2.3456"]'


def test_a_canal_column_that_mysqltype_does_not_list_is_kept(spark, session_lake, source):
    # Flink's canal-data-with-init.txt has rows with a column `other` that `mysqlType` does not list: its values
    # are kept (typed by inference over the images), not dropped.
    doc = {"data": [{"id": "1", "name": "a", "other": "val1"}, {"id": "2", "name": "b", "other": None}],
           "database": "db", "es": 1589373515000, "id": 3, "isDdl": False,
           "mysqlType": {"id": "INTEGER", "name": "VARCHAR(255)"}, "old": None, "pkNames": ["id"], "sql": "",
           "sqlType": {"id": 4, "name": 12}, "table": "t2", "ts": 1589373515477, "type": "INSERT"}
    batch_id, _, _, _ = land_files(session_lake, source=source, files=[
        InputFile(f"mem://{source}/x.jsonl", (json.dumps(doc) + "\n").encode("utf-8"))])
    result = normalize_batch(spark, session_lake, source=source, batch_id=batch_id, fmt="canal")
    assert (result.tables, result.quarantined) == ({"db.t2": 2}, 0)
    rows = staged(spark, session_lake, source, batch_id, "db.t2")
    assert [r.after.asDict() for r in rows] == [{"id": 1, "name": "a", "other": "val1"},
                                                {"id": 2, "name": "b", "other": None}]


def test_column_names_that_differ_only_in_case_are_one_column(spark, session_lake, source):
    # MySQL column names are case-insensitive: `k1` in one message and `K1` in a later one (Paimon's
    # case-insensitive test) are one column. A schema that has both (PostgreSQL's quoted names can) is quarantined
    # with the reason; the other tables of the batch proceed.
    def message(n: int, table: str, row: dict[str, str]) -> str:
        return json.dumps({"data": [row], "database": "db", "es": 1684770070000 + n, "id": n, "isDdl": False,
                           "mysqlType": {c: "int" if c.lower() == "k1" else "varchar(10)" for c in row},
                           "old": None, "pkNames": [next(iter(row))], "sql": "", "sqlType": {}, "table": table,
                           "ts": 1684770071286 + n, "type": "INSERT"})
    lines = [message(1, "other", {"id": "1", "v": "a"}), message(2, "t1", {"k1": "5", "v0": "five"}),
             message(3, "t1", {"K1": "7", "v0": "seven"}), message(4, "t2", {"k1": "1", "K1": "2"})]
    batch_id, _, _, _ = land_files(session_lake, source=source, files=[
        InputFile(f"mem://{source}/c.jsonl", ("\n".join(lines) + "\n").encode("utf-8"))])
    result = normalize_batch(spark, session_lake, source=source, batch_id=batch_id, fmt="canal")
    assert (result.tables, result.quarantined) == ({"db.other": 1, "db.t1": 2}, 1)
    rows = staged(spark, session_lake, source, batch_id, "db.t1")
    assert [(r.key.asDict(), r.after.asDict()) for r in rows] == [
        ({"k1": 5}, {"k1": 5, "v0": "five"}), ({"k1": 7}, {"k1": 7, "v0": "seven"})]
    (rejected,) = quarantined(spark, source)
    assert rejected.reason.startswith("table db.t2: columns k1 and K1 differ only in case"), rejected.reason


def test_ckafka_truncate_without_position_takes_the_next_rows_position(spark, session_lake, source):
    truncate = {"data": None, "database": "inventory", "es": 1655812326, "id": 0, "isDdl": True, "sql":
                "TRUNCATE TABLE `customers`", "table": "customers", "type": "TRUNCATE", "pkNames": None}
    lines = [text("ckafka/dml_insert.json"), json.dumps(truncate), text("ckafka/dml_update.json")]
    content = "".join(lines)
    batch_id, _, _, _ = land_files(session_lake, source=source,
                                   files=[InputFile(f"mem://{source}/x.json", content.encode("utf-8"))])
    result = normalize_batch(spark, session_lake, source=source, batch_id=batch_id, fmt="ckafka",
                             keys=KeySpec.parse(["inventory.customers=id"]))
    assert result.quarantined == 0
    rows = staged(spark, session_lake, source, batch_id, "inventory.customers")
    assert [r.op for r in rows] == ["c", "t", "u"]
    assert rows[1].position.split("/")[0] == rows[2].position.split("/")[0] == hex16(3) + hex16(484) + hex16(0)
    assert rows[0].position < rows[1].position < rows[2].position



def ticdc(kind: str, rows: list[dict[str, str]], old: list[dict[str, str]] | None = None, *,
          commit_ts: int | None = None, table: str = "t") -> str:
    """A TiCDC canal-json DML message as its protocol page documents it: ``id`` always 0; with the TiDB extension
    (``commit_ts``), ``_tidb.commitTs``."""
    message: dict[str, Any] = {
        "id": 0, "database": "tidb_test", "table": table, "pkNames": ["id"], "isDdl": False, "type": kind,
        "es": 1639633141221, "ts": 1639633142960, "sql": "", "sqlType": {"id": 4, "v": 12},
        "mysqlType": {"id": "int", "v": "varchar"}, "data": rows, "old": old,
    }
    if commit_ts is not None:
        message["_tidb"] = {"commitTs": commit_ts}
    return json.dumps(message)


def test_ticdc_canal_json_without_message_ids_applies_in_arrival_order(spark, session_lake, source):
    from cdclake.pipeline import apply_batch

    table = f"t{uuid.uuid4().hex[:8]}"
    watermark = {"id": 0, "database": "", "table": "", "pkNames": None, "isDdl": False, "type": "TIDB_WATERMARK",
                 "es": 1659085352032, "ts": 1659085354502, "sql": "", "sqlType": None, "mysqlType": None,
                 "data": None, "old": None, "_tidb": {"watermarkTs": 434919270523076621}}
    lines = [
        ticdc("INSERT", [{"id": "1", "v": "a"}], table=table),
        ticdc("UPDATE", [{"id": "1", "v": "b"}], [{"id": "1", "v": "a"}], table=table),
        ticdc("INSERT", [{"id": "2", "v": "x"}], table=table),
        json.dumps(watermark),
        ticdc("DELETE", [{"id": "2", "v": "x"}], table=table),
        ticdc("INSERT", [{"id": "3", "v": "y"}], table=table),
    ]
    batch_id, _, _, _ = land_files(session_lake, source=source, files=[
        InputFile(f"mem://{source}/ticdc.jsonl", ("\n".join(lines) + "\n").encode("utf-8"))])
    result = normalize_batch(spark, session_lake, source=source, batch_id=batch_id, fmt="canal")
    assert result.quarantined == 0
    assert result.skipped == {"TiCDC watermark event (type TIDB_WATERMARK, not a row change)": 1}
    rows = staged(spark, session_lake, source, batch_id, f"tidb_test.{table}")
    # One `es` (TiCDC's commit time in milliseconds) and no id: arrival order decides.
    assert {r.position.split("/")[0] for r in rows} == {hex16(1639633141221) + "0" * 16}
    apply_batch(spark, session_lake, source=source, batch_id=batch_id)
    assert [(r["id"], r["v"]) for r in dump_rows(session_lake, f"tidb_test.{table}")] == [(1, "b"), (3, "y")]


def test_canal_changes_without_a_message_id_are_ordered_by_their_event_time(spark, session_lake) -> None:
    # `id` 0 (TiCDC without its extension, some DTS products) says nothing about order, but `es` (the binlog
    # event's time) still does: a later change with id 0 is newer than an earlier one with an id, and an older
    # change delivered late, or again, in a later batch is stale instead of applied over newer ones.
    db = f"noid{uuid.uuid4().hex[:6]}"

    def message(table: str, kind: str, es: int, id_: int, row: dict[str, str],
                old: dict[str, str] | None = None) -> dict[str, Any]:
        return {"id": id_, "database": db, "table": table, "pkNames": ["id"], "isDdl": False, "type": kind,
                "es": es, "ts": es + 5, "sql": "", "sqlType": {"id": 4, "v": 12},
                "mysqlType": {"id": "int(11)", "v": "varchar(10)"}, "data": [row], "old": [old] if old else None}

    t0 = 1701000000000
    apply_messages(spark, session_lake, db, "0", [
        message("mixed", "INSERT", t0, 5, {"id": "1", "v": "a"}),
        message("mixed", "UPDATE", t0 + 1000, 0, {"id": "1", "v": "b"}, {"v": "a"}),
        message("late", "INSERT", t0, 0, {"id": "1", "v": "a"}),
        message("late", "UPDATE", t0 + 3000, 0, {"id": "1", "v": "c"}, {"v": "b"}),
    ])
    counts = apply_messages(spark, session_lake, db, "1", [
        message("late", "UPDATE", t0 + 2000, 0, {"id": "1", "v": "b"}, {"v": "a"}),  # late
        message("late", "INSERT", t0, 0, {"id": "1", "v": "a"}),  # again
        message("mixed", "UPDATE", t0 + 1000, 0, {"id": "1", "v": "b"}, {"v": "a"}),  # again
    ])
    assert dump_rows(session_lake, f"{db}.mixed") == [{"id": 1, "v": "b"}]
    assert dump_rows(session_lake, f"{db}.late") == [{"id": 1, "v": "c"}]
    assert (counts[f"{db}.late"].skipped_stale, counts[f"{db}.mixed"].skipped_stale) == (2, 1)


def test_ticdc_messages_without_the_rows_values_are_quarantined(spark, session_lake, source):
    # TiCDC's large-message handling (pingcap/docs ticdc-sink-to-kafka.md): a handle-key-only message carries the
    # key columns only, a claim-check message none; applied as images they would set the other columns to null.
    table = f"t{uuid.uuid4().hex[:8]}"
    handle_key = json.loads(ticdc("INSERT", [{"id": "2"}], table=table, commit_ts=163963314122145239))
    handle_key["_tidb"]["onlyHandleKey"] = True
    claim_check = json.loads(ticdc("INSERT", [{"id": "3", "v": ""}], table=table, commit_ts=163963314122145240))
    claim_check["_tidb"]["claimCheckLocation"] = "s3://claim-check-bucket/${uuid}.json"
    lines = [ticdc("INSERT", [{"id": "1", "v": "a"}], table=table, commit_ts=163963314122145238),
             json.dumps(handle_key), json.dumps(claim_check)]
    batch_id, _, _, _ = land_files(session_lake, source=source, files=[
        InputFile(f"mem://{source}/ticdc.jsonl", ("\n".join(lines) + "\n").encode("utf-8"))])
    result = normalize_batch(spark, session_lake, source=source, batch_id=batch_id, fmt="canal")
    assert (result.tables, result.quarantined) == ({f"tidb_test.{table}": 1}, 2)
    assert [(r.line, r.reason) for r in quarantined(spark, source)] == [
        (2, "TiCDC handle-key-only message (_tidb.onlyHandleKey): it carries the key columns only, the row's values "
            "must be read from TiDB"),
        (3, "TiCDC claim-check message: the row is stored outside the message, at "
            "s3://claim-check-bucket/${uuid}.json")]


def test_ticdc_commit_ts_orders_changes_delivered_out_of_order(spark, session_lake, source):
    from cdclake.pipeline import apply_batch

    table = f"t{uuid.uuid4().hex[:8]}"
    lines = [  # TiCDC's partitions are read one after another: file order is not commit order
        ticdc("UPDATE", [{"id": "1", "v": "c"}], [{"id": "1", "v": "b"}], commit_ts=434919270523076623, table=table),
        ticdc("INSERT", [{"id": "1", "v": "a"}], commit_ts=434919270523076621, table=table),
        ticdc("UPDATE", [{"id": "1", "v": "b"}], [{"id": "1", "v": "a"}], commit_ts=434919270523076622, table=table),
    ]
    batch_id, _, _, _ = land_files(session_lake, source=source, files=[
        InputFile(f"mem://{source}/ticdc.jsonl", ("\n".join(lines) + "\n").encode("utf-8"))])
    result = normalize_batch(spark, session_lake, source=source, batch_id=batch_id, fmt="canal")
    assert result.quarantined == 0
    rows = staged(spark, session_lake, source, batch_id, f"tidb_test.{table}")
    assert [r.position.split("/")[0] for r in rows] == [hex16(434919270523076621 + i) for i in range(3)]
    apply_batch(spark, session_lake, source=source, batch_id=batch_id)
    assert [(r["id"], r["v"]) for r in dump_rows(session_lake, f"tidb_test.{table}")] == [(1, "c")]


def canal(kind: str, rows: list[dict[str, str]], old: list[dict[str, str]] | None = None, *, id_: int, es: int,
          table: str) -> str:
    """A canal flat message as the canal server writes it: ``id`` is its batch id, ``es`` the binlog time (ms)."""
    return json.dumps({
        "id": id_, "database": "canal_test", "table": table, "pkNames": ["id"], "isDdl": False, "type": kind,
        "es": es, "ts": es + 40, "sql": "", "sqlType": {"id": 4, "v": 12},
        "mysqlType": {"id": "int", "v": "varchar"}, "data": rows, "old": old,
    })


def test_canal_message_ids_that_restart_with_the_canal_server_are_ordered_by_event_time(spark, session_lake,
                                                                                       source):
    # canal's `id` is its server's batch id and starts again after a restart: Apache Paimon's captured canal test
    # data goes from id 94 to ids 14..45 with later `es`. Ordered by `id`, the later update would be stale.
    from cdclake.pipeline import apply_batch

    table = f"t{uuid.uuid4().hex[:8]}"
    before_restart = [
        canal("INSERT", [{"id": "1", "v": "a"}], id_=92, es=1683006706000, table=table),
        canal("UPDATE", [{"id": "1", "v": "b"}], [{"v": "a"}], id_=94, es=1683006724000, table=table),
    ]
    after_restart = [
        canal("UPDATE", [{"id": "1", "v": "c"}], [{"v": "b"}], id_=18, es=1683008290000, table=table),
        canal("INSERT", [{"id": "2", "v": "x"}], id_=18, es=1683008290000, table=table),
    ]
    for i, lines in enumerate([before_restart, after_restart]):
        batch_id, _, _, _ = land_files(session_lake, source=source, files=[
            InputFile(f"mem://{source}/canal-{i}.jsonl", ("\n".join(lines) + "\n").encode("utf-8"))])
        result = normalize_batch(spark, session_lake, source=source, batch_id=batch_id, fmt="canal")
        assert result.quarantined == 0
        if i == 1:
            rows = staged(spark, session_lake, source, batch_id, f"canal_test.{table}")
            assert {r.position.split("/")[0] for r in rows} == {hex16(1683008290000) + hex16(18)}
        apply_batch(spark, session_lake, source=source, batch_id=batch_id)
    assert [(r["id"], r["v"]) for r in dump_rows(session_lake, f"canal_test.{table}")] == [(1, "c"), (2, "x")]


def test_drs_orders_by_its_event_sequence_number_alone(spark, session_lake, source):
    # DRS documents `id` as its monotonically increasing event sequence number: --format drs orders by it, as
    # does any format for a message with DRS's relational fields (dbType/columnType).
    table = f"t{uuid.uuid4().hex[:8]}"
    lines = [canal("INSERT", [{"id": "1", "v": "a"}], id_=27677, es=1624614713000, table=table)]
    relational = json.loads(canal("INSERT", [{"id": "2", "v": "b"}], id_=27678, es=1624614713000, table=table))
    relational.update(dbType="GaussDB", schema="canal_test", opType=relational.pop("type"))
    lines.append(json.dumps(relational))
    for fmt in ("drs", "canal"):
        batch_id, _, _, _ = land_files(session_lake, source=f"{source}_{fmt}", files=[
            InputFile(f"mem://{source}/{fmt}.jsonl", ("\n".join(lines) + "\n").encode("utf-8"))])
        result = normalize_batch(spark, session_lake, source=f"{source}_{fmt}", batch_id=batch_id, fmt=fmt)
        assert result.quarantined == 0
        rows = staged(spark, session_lake, f"{source}_{fmt}", batch_id, f"canal_test.{table}")
        first = hex16(27677) if fmt == "drs" else hex16(1624614713000) + hex16(27677)
        assert sorted(r.position.split("/")[0] for r in rows) == sorted([first, hex16(27678)])


def test_inlong_canal_json_with_op_type_is_ordered_by_event_time_not_as_drs(spark, session_lake) -> None:
    # apache/inlong's canal-json-inlong format (inlong-sort/sort-formats/format-json, canal-json-inlong-data.txt)
    # writes `opType` (its op-type metadata) beside `type` and `mysqlType`, `batchId` instead of `id`, numbers as
    # JSON numbers. Only DRS's relational variant names dbType/columnType: this is a canal message, ordered by
    # `es`, so the insert delivered again after the delete is stale instead of bringing the row back.
    db = f"inlong{uuid.uuid4().hex[:6]}"

    def message(kind: str, es: int, batch: int) -> dict[str, Any]:
        return {"data": [{"id": 3, "name": "HAHA"}], "type": kind, "pkNames": ["id"], "database": db,
                "mysqlType": {"name": "VARCHAR(63)", "id": "BIGINT(20)"}, "opType": kind, "es": es,
                "batchId": batch, "sqlType": {"name": 12, "id": -5}, "updateBefore": None, "ts": es + 2752,
                "isDdl": False, "table": "TEST"}

    insert = message("INSERT", 1651208797000, 2)
    apply_messages(spark, session_lake, db, "0", [insert, message("DELETE", 1651208805000, 3)])
    counts = apply_messages(spark, session_lake, db, "1", [insert])  # delivered again
    assert dump_rows(session_lake, f"{db}.test") == []
    assert counts[f"{db}.test"].skipped_stale == 1


def test_canal_json_without_id_and_isddl_applies_in_arrival_order(spark, session_lake, source):
    # apache/flink-cdc KafkaDataSourceITCase (produceCanalJsonMessages) writes canal-json without `id`, `es`,
    # `isDdl`, `mysqlType`: values are typed by JSON inference, arrival order decides.
    from cdclake.pipeline import apply_batch

    db = f"mydb_{uuid.uuid4().hex[:6]}"
    messages = [
        {"old": None, "data": [{"id": 1, "name": "Alice", "age": 30}], "type": "INSERT"},
        {"old": [{"id": 1, "name": "Alice", "age": 30}], "data": [{"id": 1, "name": "Alice", "age": 31}],
         "type": "UPDATE"},
        {"old": None, "data": [{"id": 2, "name": "Bob", "age": 40}], "type": "INSERT"},
        {"old": None, "data": [{"id": 2, "name": "Bob", "age": 40}], "type": "DELETE"},
    ]
    lines = [json.dumps({**m, "database": db, "table": "users", "pkNames": ["id"]}) for m in messages]
    batch_id, _, _, _ = land_files(session_lake, source=source, files=[
        InputFile(f"mem://{source}/flink-cdc.jsonl", ("\n".join(lines) + "\n").encode("utf-8"))])
    result = normalize_batch(spark, session_lake, source=source, batch_id=batch_id, fmt="canal")
    assert (result.tables, result.quarantined) == ({f"{db}.users": 4}, 0)
    apply_batch(spark, session_lake, source=source, batch_id=batch_id)
    assert dump_rows(session_lake, f"{db}.users") == [{"id": 1, "name": "Alice", "age": 31}]


def test_canal_pknames_repeated_per_row_are_one_key(spark, session_lake, source):
    # canal writes `pkNames` once per row of a multi-row message: ["ID", "ID"] (canal's FlatMessage examples).
    from cdclake.pipeline import apply_batch

    table = f"asd_{uuid.uuid4().hex[:6]}"

    def message(n: int, kind: str, ids: list[str]) -> str:
        return json.dumps({"data": [{"ID": i, "TEST_NAME": "123"} for i in ids], "database": "test",
                           "es": 1554045359000 + n, "id": n, "isDdl": False,
                           "mysqlType": {"ID": "int(11)", "TEST_NAME": "varchar(255)"}, "old": None,
                           "pkNames": ["ID"] * len(ids), "sql": "", "sqlType": {"ID": 4, "TEST_NAME": 12},
                           "table": table, "ts": 1554045360514 + n, "type": kind})
    for lines, expected in (([message(15, "INSERT", ["22", "2223", "7"])], [22, 2223, 7]),
                            ([message(16, "DELETE", ["22", "2223"])], [7])):
        batch_id, _, _, _ = land_files(session_lake, source=source, files=[
            InputFile(f"mem://{source}/{lines[0][-40:-20]}.jsonl", ("\n".join(lines) + "\n").encode("utf-8"))])
        result = normalize_batch(spark, session_lake, source=source, batch_id=batch_id, fmt="canal")
        assert result.quarantined == 0
        apply_batch(spark, session_lake, source=source, batch_id=batch_id)
        assert sorted(r["ID"] for r in dump_rows(session_lake, f"test.{table}")) == sorted(expected)


@pytest.mark.parametrize("split", [None, 3], ids=["one-batch", "drop-and-rename-in-a-later-batch"])
def test_drop_table_then_rename_another_onto_its_name(spark, session_lake, source, split):
    # canal's FlatMessage notes: DROP TABLE asd, then `alter table asd_copy rename to asd`. The drop empties the
    # earlier asd (moved aside as asd__displaced_<hash>), not the renamed table, whose rows are older than the drop.
    # Each table's SCD history goes with it.
    from cdclake.apply import history_table_id
    from cdclake.apply_options import ApplyOptions
    from cdclake.catalog import table_exists
    from cdclake.identity import spark_table_name
    from cdclake.pipeline import apply_batch

    db = f"test_{uuid.uuid4().hex[:6]}"

    def ddl(n: int, kind: str, table: str, sql: str) -> str:
        return json.dumps({"data": None, "database": db, "es": 1554044748000 + n, "id": n, "isDdl": True,
                           "sql": sql, "table": table, "ts": 1554044748116 + n, "type": kind})

    def insert(n: int, table: str, key: str) -> str:
        return json.dumps({"data": [{"ID": key}], "database": db, "es": 1554044748000 + n, "id": n,
                           "isDdl": False, "mysqlType": {"ID": "int(11)"}, "old": None, "pkNames": ["ID"],
                           "sql": "", "sqlType": {"ID": 4}, "table": table, "ts": 1554044748117 + n,
                           "type": "INSERT"})
    lines = [
        insert(3, "asd", "1"),
        ddl(5, "CREATE", "asd_copy", f"CREATE TABLE `{db}`.`asd_copy` (`ID` int(11) NOT NULL, PRIMARY KEY (`ID`))"),
        insert(6, "asd_copy", "2223"),
        ddl(9, "ERASE", "asd", "DROP TABLE `asd` /* generated by server */"),
        ddl(10, "RENAME", "asd", "alter table `asd_copy` rename to `asd`"),
        insert(11, "asd", "5"),
    ]
    groups = [lines] if split is None else [lines[:split], lines[split:]]
    for i, group in enumerate(groups):
        batch_id, _, _, _ = land_files(session_lake, source=source, files=[
            InputFile(f"mem://{source}/{i}.jsonl", ("\n".join(group) + "\n").encode("utf-8"))])
        result = normalize_batch(spark, session_lake, source=source, batch_id=batch_id, fmt="canal")
        assert result.quarantined == 0, quarantined(spark, source)
        apply_batch(spark, session_lake, source=source, batch_id=batch_id, default=ApplyOptions(history=True))
    assert sorted(r["ID"] for r in dump_rows(session_lake, f"{db}.asd")) == [5, 2223]
    tables = {r.tableName for r in spark.sql(f"SHOW TABLES IN lake.{db}").collect()}
    assert "asd_copy" not in tables
    displaced = [t for t in tables if t.startswith("asd__displaced_")]
    assert len(displaced) == 1, tables
    assert dump_rows(session_lake, f"{db}.{displaced[0]}") == []  # the earlier asd: its row 1, dropped

    def versions(tid: str) -> list[tuple[int, bool]]:
        rows = spark.table(spark_table_name(history_table_id(tid))).collect()
        return sorted((r["ID"], r["_cdc_valid_to"] is None) for r in rows)
    assert versions(f"{db}.asd") == [(5, True), (2223, True)]
    # Row 1 was applied when the drop came in a later batch (the drop closes its version); in one batch the drop
    # made its insert stale.
    assert versions(f"{db}.{displaced[0]}") == ([] if split is None else [(1, False)])
    assert not table_exists(spark, history_table_id(f"{db}.asd_copy"))


def _insert(db: str, table: str, key: list[str], n: int = 3) -> str:
    """A canal INSERT of two rows of ``db.table`` (columns k double, id int, v varchar), at message id ``n``."""
    return json.dumps({
        "data": [{"k": "1.5", "id": "1", "v": "a"}, {"k": "2.5", "id": "2", "v": "b"}], "database": db,
        "es": 1589373515000 + n, "id": n, "isDdl": False,
        "mysqlType": {"k": "double", "id": "int", "v": "varchar(9)"}, "old": None, "pkNames": key, "sql": "",
        "sqlType": {"k": 8, "id": 4, "v": 12}, "table": table, "ts": 1589373515477, "type": "INSERT"}) + "\n"


@pytest.mark.parametrize(("key", "bucket"), [(["k"], None), (["k", "id"], "CLUSTERED BY (id)\nINTO 16 BUCKETS")],
                         ids=["double-key", "double-then-int-key"])
def test_a_table_keyed_by_a_double_is_bucketed_by_a_key_column_iceberg_can_bucket(spark, session_lake, source, key,
                                                                                    bucket):
    # Iceberg's bucket transform takes no float, double or boolean: the default spec (bucket on the first key
    # column) made the CREATE TABLE fail, and with it the whole apply.
    from cdclake.pipeline import apply_batch

    db = f"d{uuid.uuid4().hex[:8]}"
    batch_id, _, _, _ = land_files(session_lake, source=source, files=[
        InputFile(f"mem://{source}/x.jsonl", _insert(db, "t", key).encode("utf-8"))])
    normalize_batch(spark, session_lake, source=source, batch_id=batch_id, fmt="canal")
    counts = apply_batch(spark, session_lake, source=source, batch_id=batch_id)
    assert counts.tables[f"{db}.t"].inserted == 2
    assert dump_rows(session_lake, f"{db}.t") == [{"k": 1.5, "id": 1, "v": "a"}, {"k": 2.5, "id": 2, "v": "b"}]
    ddl = spark.sql(f"SHOW CREATE TABLE lake.{db}.t").first()[0]
    assert ("BUCKETS" not in ddl and "PARTITIONED" not in ddl) if bucket is None else (bucket in ddl), ddl


def test_a_table_that_fails_to_apply_does_not_stop_the_others(spark, session_lake, source):
    from cdclake.apply_options import ApplyOptions
    from cdclake.exceptions import ApplyFailedError
    from cdclake.pipeline import apply_batch, is_applied

    db = f"f{uuid.uuid4().hex[:8]}"
    text = _insert(db, "a_bad", ["id"], 3) + _insert(db, "b_good", ["id"], 4)
    batch_id, _, _, _ = land_files(session_lake, source=source, files=[
        InputFile(f"mem://{source}/x.jsonl", text.encode("utf-8"))])
    normalize_batch(spark, session_lake, source=source, batch_id=batch_id, fmt="canal")
    # A configured spec Iceberg refuses (a bucket on a double) fails the first table's CREATE TABLE.
    bad = {f"{db}.a_bad": ApplyOptions(partition=("bucket(4, k)",))}
    with pytest.raises(ApplyFailedError, match=rf"1 table\(s\) failed .* {db}\.a_bad: ") as caught:
        apply_batch(spark, session_lake, source=source, batch_id=batch_id, options=bad)
    assert set(caught.value.failures) == {f"{db}.a_bad"}
    assert [r["id"] for r in dump_rows(session_lake, f"{db}.b_good")] == [1, 2]
    assert not is_applied(session_lake, source, batch_id)
    result = apply_batch(spark, session_lake, source=source, batch_id=batch_id)  # the re-run, without the bad spec
    assert (result.tables[f"{db}.a_bad"].inserted, result.tables[f"{db}.b_good"].inserted) == (2, 0)
    assert is_applied(session_lake, source, batch_id)


def test_a_create_table_without_a_key_is_quarantined_and_a_replay_with_the_key_creates_the_table(
        spark, session_lake, source):
    # apache/flink-cdc CanalJsonDeserializationSchemaTest's `CREATE TABLE test_table (id INT)`: no primary key, no
    # rows. It was counted as "key and column types learned" although no table could be made from it.
    from cdclake.catalog import table_exists
    from cdclake.pipeline import replay_quarantine

    table = f"t{uuid.uuid4().hex[:8]}"
    create = {"data": None, "database": "mydb", "es": 1700000000000, "id": 7, "isDdl": True, "mysqlType": None,
              "old": None, "pkNames": None, "sql": f"CREATE TABLE {table} (id INT, name VARCHAR(20))",
              "sqlType": None, "table": table, "ts": 1700000000001, "type": "CREATE"}
    batch_id, _, _, _ = land_files(session_lake, source=source, files=[
        InputFile(f"mem://{source}/ddl.jsonl", (json.dumps(create) + "\n").encode("utf-8"))])
    result = normalize_batch(spark, session_lake, source=source, batch_id=batch_id, fmt="canal")
    assert (result.tables, result.quarantined, result.skipped) == ({}, 1, {})
    (row,) = quarantined(spark, source)
    assert row.reason.startswith(f"table mydb.{table} has no primary key: no message key, pkNames or CREATE TABLE")

    (replayed,) = replay_quarantine(spark, session_lake, source=source, keys=KeySpec.parse([f"mydb.{table}=id"]))
    assert (replayed.normalized.tables, replayed.normalized.quarantined) == ({f"mydb.{table}": 0}, 0)
    assert table_exists(spark, f"mydb.{table}")
    assert list(quarantined(spark, source)) == []


def test_canal_values_sent_as_json_numbers_keep_their_exact_text(spark, session_lake, source):
    # openetl-go's canal-json test writes `"data":[{"id":42,...}]`: numbers, not canal's strings. A fractional
    # number was read through a double: decimal(20,2) 12345678901234567.89 became ...568.00, a varchar 1.10 became
    # "1.1" (and a later "1.10" string of the same key another row). Numbers inside strings stay as sent.
    from cdclake.pipeline import apply_batch

    table = f"t{uuid.uuid4().hex[:8]}"
    types = {"id": "bigint", "d": "decimal(20,2)", "k": "varchar(20)", "note": "varchar(80)", "f": "double"}

    def message(n: int, kind: str, row: str) -> str:
        return (f'{{"data":[{row}],"database":"edge","table":"{table}","isDdl":false,"sql":"","pkNames":["k"],'
                f'"mysqlType":{json.dumps(types)},"old":null,"es":{1700000000000 + n},"id":{n},"type":"{kind}"}}')

    note = r'ratio: 1.50, \"q\": 2.5e3'
    batches = [[message(1, "INSERT", f'{{"id":1,"d":12345678901234567.89,"k":1.10,"note":"{note}","f":-2.5E-3}}'),
                message(2, "INSERT", '{"id":2,"d":-0.10,"k":"x","note":null,"f":1e2}')],
               [message(3, "UPDATE", '{"id":3,"d":0.5,"k":"1.10","note":"","f":1}')]]
    dumps = []
    for i, lines in enumerate(batches):
        batch_id, _, _, _ = land_files(session_lake, source=source, files=[
            InputFile(f"mem://{source}/{i}.jsonl", ("\n".join(lines) + "\n").encode("utf-8"))])
        assert normalize_batch(spark, session_lake, source=source, batch_id=batch_id, fmt="canal").quarantined == 0
        apply_batch(spark, session_lake, source=source, batch_id=batch_id)
        dumps.append([(r["k"], r["id"], r["d"], r["note"], r["f"]) for r in dump_rows(session_lake, f"edge.{table}")])
    assert dumps == [  # (decimals are dumped as their text)
        [("1.10", 1, "12345678901234567.89", r'ratio: 1.50, "q": 2.5e3', -0.0025), ("x", 2, "-0.10", None, 100.0)],
        [("1.10", 3, "0.50", "", 1.0), ("x", 2, "-0.10", None, 100.0)],
    ]


def test_a_keyless_tables_alter_is_held_with_it_so_the_replay_fills_the_added_columns_default(
        spark, session_lake, source):
    # hudi-debezium-schema-adapter's TestSchemaChange: `create table test (id int(11), name varchar(50))`, no key.
    # The ALTER's DEFAULT fills the rows before it (as MySQL does); it was counted as learned, and so missing from
    # the replay once a key was declared.
    from cdclake.pipeline import replay_quarantine

    table = f"t{uuid.uuid4().hex[:8]}"

    def message(n: int, kind: str, sql: str = "", rows: list[dict[str, str]] | None = None) -> dict[str, Any]:
        types = {"id": "int", "name": "varchar(20)", **({"age": "int"} if rows and "age" in rows[0] else {})}
        return {"data": rows, "database": "mydb", "es": 1700000000000 + n * 1000, "id": n, "isDdl": not rows,
                "mysqlType": types if rows else None, "old": None, "pkNames": None, "sql": sql,
                "sqlType": None, "table": table, "ts": 1700000000001 + n * 1000, "type": kind}

    batch_id = land_messages(session_lake, source, "keyless", [
        message(1, "CREATE", f"CREATE TABLE {table} (id INT, name VARCHAR(20))"),
        message(2, "INSERT", rows=[{"id": "1", "name": "a"}]),
        message(3, "ALTER", f"ALTER TABLE {table} ADD COLUMN age INT DEFAULT 5"),
        message(4, "INSERT", rows=[{"id": "2", "name": "b", "age": "7"}]),
        message(5, "CINDEX", f"ALTER TABLE {table} ADD INDEX ix_name (name)"),  # held too, though it adds nothing
    ])
    result = normalize_batch(spark, session_lake, source=source, batch_id=batch_id, fmt="canal")
    assert (result.tables, result.quarantined, result.skipped) == ({}, 5, {})

    replay_quarantine(spark, session_lake, source=source, keys=KeySpec.parse([f"mydb.{table}=id"]))
    assert [(r["id"], r["name"], r["age"]) for r in dump_rows(session_lake, f"mydb.{table}")] == [
        (1, "a", 5), (2, "b", 7)]
    assert list(quarantined(spark, source)) == []


@pytest.mark.parametrize("message, reason", [
    # SeaTunnel's CanalJsonSerDeSchemaTest serializer output: `data` is one object, not canal's array of rows.
    ({"data": {"id": 1}, "type": "INSERT"}, "message value is JSON but field data is not an array, as a canal "
     "message's is (an array of row objects): {\"id\":1}; if this is not a canal message, no format cdclake reads "
     "matches it: its top-level fields: data, type"),
    # An Airbyte CDK record (airbytehq/airbyte): `data` is its row.
    ({"namespace": "ns", "stream": "tbl", "data": {"k": 1, "_ab_cdc_lsn": None}, "emitted_at": 3133641600000},
     "message value is JSON but field data is not an array, as a canal message's is (an array of row objects): "
     "{\"k\":1,\"_ab_cdc_lsn\":null}; if this is not a canal message, no format cdclake reads matches it: its "
     "top-level fields: namespace, stream, data, emitted_at"),
    ({"payload": {"op": "c", "source": "mysql"}}, "message value is JSON but field payload.source is not an object: "
                                                 "mysql"),
    ({"type": "INSERT"}, "unrecognized message: not a message --format auto reads (a Debezium/dtle event, canal/DRS "
                         "flat message, DRS MongoDB record or CKafka Format I row; a bare row, as Debezium's "
                         "ExtractNewRecordState/unwrap transform writes it, is not a change event); its top-level "
                         "fields: type"),
], ids=["data object", "airbyte record", "source string", "type only"])
def test_reasons_name_the_field_that_does_not_fit(spark, session_lake, source, message, reason):
    batch_id, _, _, _ = land_files(session_lake, source=source, files=[
        InputFile(f"mem://{source}/bad.jsonl", (json.dumps(message) + "\n").encode("utf-8"))])
    result = normalize_batch(spark, session_lake, source=source, batch_id=batch_id, fmt="auto")
    assert result.quarantined == 1
    assert [r.reason for r in quarantined(spark, source)] == [reason]


def test_timestamp_texts_without_an_offset_are_read_in_the_sources_time_zone(spark, session_lake, source):
    # canal and TiCDC write a MySQL TIMESTAMP as text in their server's zone (pingcap/ticdc's consistency-checker
    # data: es 14:58:40.951Z, the row's timestamp "22:58:40.992217", UTC+8); CKafka's seed TIME 19700101080000 is
    # the epoch in UTC+8. A DATETIME is wall-clock time and stays as written.
    from pyspark.sql import functions as F

    table = f"t{uuid.uuid4().hex[:8]}"
    row = {"id": "1", "ts": "2026-02-05 22:58:40.992217", "dt": "2026-02-05 22:58:40", "tz": "2026-02-05 22:58:40Z"}
    message = {"id": 3, "database": "tidb_test", "table": table, "pkNames": ["id"], "isDdl": False, "type": "INSERT",
               "es": 1770303520951, "ts": 1770303520999, "sql": "", "sqlType": {"id": 4, "ts": 93, "dt": 93, "tz": 93},
               "mysqlType": {"id": "int", "ts": "timestamp", "dt": "datetime", "tz": "timestamp"},
               "data": [row], "old": None}
    batch_id, _, _, _ = land_files(session_lake, source=source, files=[
        InputFile(f"mem://{source}/tz.jsonl", (json.dumps(message) + "\n").encode("utf-8"))])
    result = normalize_batch(spark, session_lake, source=source, batch_id=batch_id, fmt="canal",
                             time_zone="Asia/Shanghai")
    assert (result.tables, result.quarantined) == ({f"tidb_test.{table}": 1}, 0)
    staged_row = read_staged(spark, staging_dir(session_lake, source, batch_id) / f"tidb_test.{table}").select(
        F.unix_micros("after.ts").alias("ts"), F.col("after.dt").cast("string").alias("dt"),
        F.unix_micros("after.tz").alias("tz")).first()
    utc = dt.datetime(2026, 2, 5, 14, 58, 40, 992217, tzinfo=dt.timezone.utc)
    assert staged_row.ts == int(utc.timestamp()) * 1_000_000 + utc.microsecond
    assert staged_row.dt == "2026-02-05 22:58:40"
    assert staged_row.tz == int(dt.datetime(2026, 2, 5, 22, 58, 40, tzinfo=dt.timezone.utc).timestamp()) * 1_000_000

    batch_id, _ = run(spark, session_lake, source, ["ckafka/dml_insert.json"], "ckafka",
                      keys=["inventory.customers=id"], time_zone="+08:00")
    times = read_staged(spark, staging_dir(session_lake, source, batch_id) / "inventory.customers").select(
        F.unix_millis("source_ts").alias("ms")).collect()
    assert [t.ms for t in times] == [0]
    # The same message from a source in UTC, in the same process (whose parse of CKafka is built once per zone).
    batch_id, _ = run(spark, session_lake, f"{source}_utc", ["ckafka/dml_insert.json"], "ckafka",
                      keys=["inventory.customers=id"])
    times = read_staged(spark, staging_dir(session_lake, f"{source}_utc", batch_id) / "inventory.customers").select(
        F.unix_millis("source_ts").alias("ms")).collect()
    assert [t.ms for t in times] == [8 * 3600 * 1000]


@pytest.mark.parametrize("zone", ["Asia/Shanghai", "UTC", "+08:00", "-05:30"])
def test_a_time_zone_is_an_iana_name_or_an_offset(zone):
    from cdclake.config import check_time_zone

    assert check_time_zone(zone) == zone


@pytest.mark.parametrize("zone", ["Mars/Olympus", "+8", "CST-8 ", ""])
def test_a_time_zone_that_is_neither_is_refused(zone):
    from cdclake.config import check_time_zone
    from cdclake.exceptions import ConfigError

    with pytest.raises(ConfigError, match="expected an IANA name"):
        check_time_zone(zone)


@pytest.mark.parametrize("one_batch", [True, False], ids=["one batch", "a batch per message"])
def test_a_column_added_with_a_default_fills_the_rows_written_before_it(spark, session_lake, source, one_batch):
    # MySQL fills an added column's DEFAULT into every existing row and writes no row events for that; a
    # `DEFAULT CURRENT_TIMESTAMP` (Tencent CKafka's DDL example) is the ALTER's time. Found by a sweep of canal
    # streams: the lake kept null in rows 1 and 2.
    from cdclake.pipeline import apply_batch

    table = f"t{uuid.uuid4().hex[:8]}"
    alter = {"id": 2, "database": "canal_test", "table": table, "isDdl": True, "type": "ALTER", "es": 1700000002000,
             "ts": 1700000002040, "data": None, "old": None, "pkNames": None, "mysqlType": None, "sqlType": None,
             "sql": f"ALTER TABLE {table} ADD COLUMN qty int DEFAULT 0 AFTER v, ADD COLUMN tag varchar(5), "
                    "ADD COLUMN created datetime NULL DEFAULT CURRENT_TIMESTAMP"}
    wide = {"id": 4, "type": "INSERT"}
    after = json.loads(canal("INSERT", [{"id": "3", "v": "c", "qty": "5", "tag": "t", "created": None}], id_=3,
                             es=1700000003000, table=table))
    after["mysqlType"].update(qty="int", tag="varchar(5)", created="datetime")
    after["sqlType"].update(qty=4, tag=12, created=93)
    update = {**after, **wide, "type": "UPDATE", "es": 1700000004000,
              "data": [{"id": "2", "v": "b", "qty": None, "tag": None, "created": None}], "old": [{"qty": "0"}]}
    lines = [canal("INSERT", [{"id": "1", "v": "a"}, {"id": "2", "v": "b"}], id_=1, es=1700000001000, table=table),
             json.dumps(alter), json.dumps(after), json.dumps(update)]
    for batch in ([lines] if one_batch else [[line] for line in lines]):
        batch_id, _, _, _ = land_files(session_lake, source=source, files=[
            InputFile(f"mem://{source}/{uuid.uuid4().hex}.jsonl", ("\n".join(batch) + "\n").encode("utf-8"))])
        assert normalize_batch(spark, session_lake, source=source, batch_id=batch_id, fmt="canal").quarantined == 0
        apply_batch(spark, session_lake, source=source, batch_id=batch_id)

    rows = [(r["id"], r["v"], r["qty"], r["tag"], r["created"]) for r in dump_rows(session_lake, f"canal_test.{table}")]
    assert rows == [(1, "a", 0, None, "2023-11-14T22:13:22.000000"),
                    (2, "b", None, None, None),  # set to null after the ALTER: stays null
                    (3, "c", 5, "t", None)]


def land_lines(spark, settings, source: str, docs: list[dict[str, Any]], fmt: str):
    """Land ``docs`` (one message per line) as one batch and normalize it."""
    batch_id = land_messages(settings, source, "lines", docs)
    return batch_id, normalize_batch(spark, settings, source=source, batch_id=batch_id, fmt=fmt)


def test_canal_enum_and_set_values_sent_as_numbers_are_stored_as_their_labels(spark, session_lake, source):
    # alibaba/canal's binlog reader hands an enum value over as its member index (sqlType INTEGER) and a set value
    # as its bitmask (sqlType BIT); `mysqlType` lists the members.
    doc = {"data": [{"id": "1", "e": "2", "s": "5"}, {"id": "2", "e": "1", "s": "0"}], "database": "db",
           "es": 1624614713000, "id": 101, "isDdl": False, "old": None, "pkNames": ["id"], "sql": "",
           "mysqlType": {"id": "int(11)", "e": "enum('a','b','c')", "s": "set('x','y','z')"},
           "sqlType": {"id": 4, "e": 4, "s": -7}, "table": "kinds", "ts": 1624614713100, "type": "INSERT"}
    batch_id, result = land_lines(spark, session_lake, source, [doc], "canal")
    assert (result.tables, result.quarantined) == ({"db.kinds": 2}, 0)
    rows = staged(spark, session_lake, source, batch_id, "db.kinds")
    assert sorted(list(r.after.asDict().values()) for r in rows) == [[1, "b", "x,z"], [2, "a", ""]]


def test_ckafka_create_table_with_a_spatial_column_gives_the_key(spark, session_lake, source):
    # CKafka's Format I rows carry no key: it comes from the stream's CREATE TABLE, which has a `point` column.
    create = {"data": None, "database": "dip_test", "es": 1655812330, "id": 0, "isDdl": True, "mysqlType": None,
              "old": None, "pkNames": None, "sqlType": None, "table": "shops", "ts": 1655812330, "type": "CREATE",
              "sql": "CREATE TABLE `shops` (\n`id` int NOT NULL AUTO_INCREMENT,\n`name` varchar(255) NOT NULL,\n"
                     "`loc` point DEFAULT NULL SRID 4326,\nPRIMARY KEY (`id`)\n) ENGINE=InnoDB DEFAULT CHARSET=utf8"}
    insert = {"BINLOG_NAME": "mysql-bin.000003", "BINLOG_POS": 900, "DATABASE": "dip_test", "EVENT_SERVER_ID": None,
              "GLOBAL_ID": None, "GROUP_ID": None, "NEW_VALUES": {"id": "1", "name": "s1", "loc": None},
              "OLD_VALUES": None, "TABLE": "shops", "TIME": "20220621200000", "TYPE": "I"}
    batch_id, result = land_lines(spark, session_lake, source, [create, insert], "auto")
    assert (result.tables, result.quarantined) == ({"dip_test.shops": 1}, 0)
    (row,) = staged(spark, session_lake, source, batch_id, "dip_test.shops")
    assert row.key.asDict() == {"id": 1} and row.after.asDict() == {"id": 1, "name": "s1", "loc": None}


def test_a_table_without_key_whose_create_table_could_not_be_read_says_so(spark, session_lake, source):
    create = {"data": None, "database": "dip_test", "es": 1655812330, "id": 0, "isDdl": True, "mysqlType": None,
              "old": None, "pkNames": None, "sqlType": None, "table": "odd", "ts": 1655812330, "type": "CREATE",
              "sql": "CREATE TABLE `odd` (`id` int NOT NULL, `v` varchar(10) NOT NULL DEFAULT, PRIMARY KEY (`id`))"}
    insert = {"BINLOG_NAME": "mysql-bin.000003", "BINLOG_POS": 900, "DATABASE": "dip_test", "EVENT_SERVER_ID": None,
              "GLOBAL_ID": None, "GROUP_ID": None, "NEW_VALUES": {"id": "1", "v": "a"}, "OLD_VALUES": None,
              "TABLE": "odd", "TIME": "20220621200000", "TYPE": "I"}
    _, result = land_lines(spark, session_lake, source, [create, insert], "auto")
    assert (result.tables, result.quarantined) == ({}, 2)
    reasons = [r.reason for r in quarantined(spark, source)]
    assert reasons[0].startswith("DDL not understood: cannot parse mysql DDL"), reasons
    assert reasons[1].startswith("table dip_test.odd has no primary key") and (
        "; the batch's CREATE TABLE of it could not be read (DDL not understood: cannot parse mysql DDL" in reasons[1]
    ), reasons


def test_canal_binary_values_that_read_like_byte_lists_are_their_latin1_bytes(spark, session_lake, source):
    # canal (and TiCDC's canal-json) write a MySQL binary value as `new String(bytes, ISO_8859_1)`: a blob holding
    # the JSON text `[1, 2]` or `[]` arrives as that text. --format canal keeps those bytes; only DRS writes byte
    # lists (`Arrays.toString(byte[])`), so --format drs reads them as such.
    table = f"t{uuid.uuid4().hex[:8]}"
    message = {"id": 3, "database": "canal_test", "table": table, "pkNames": ["id"], "isDdl": False,
               "type": "INSERT", "es": 1700000000000, "ts": 1700000000100, "sql": "",
               "sqlType": {"id": 4, "vb": 2004, "bl": 2004, "raw": 2004},
               "mysqlType": {"id": "int(11)", "vb": "varbinary(20)", "bl": "blob", "raw": "blob"},
               "data": [{"id": "1", "vb": "[1, 2]", "bl": "[]", "raw": "\u0000\u00ff"}], "old": None}
    expected = {"canal": {"id": 1, "vb": b"[1, 2]", "bl": b"[]", "raw": b"\x00\xff"},
                "drs": {"id": 1, "vb": b"\x01\x02", "bl": b"", "raw": b"\x00\xff"}}
    for fmt, values in expected.items():
        batch_id, result = land_lines(spark, session_lake, f"{source}_{fmt}", [message], fmt)
        assert (result.tables, result.quarantined) == ({f"canal_test.{table}": 1}, 0)
        (row,) = staged(spark, session_lake, f"{source}_{fmt}", batch_id, f"canal_test.{table}")
        got = row.after.asDict()
        assert {k: bytes(v) if isinstance(v, (bytes, bytearray)) else v for k, v in got.items()} == values, fmt


def test_a_multi_row_canal_update_with_fewer_old_rows_than_rows(spark, session_lake, source):
    # Older canal versions write a row's `old` entry only when a column of it changed (alibaba/canal
    # MQMessageUtils.messageConverter: `if (!rowOld.isEmpty()) old.add(rowOld)`), and the columns it writes are those
    # changed in the row or an earlier one (its updated names grow over the rows): only leading rows lack one, and
    # the entries belong to the last rows. Paired by index, row 2 below would take row 3's old key for its own and
    # delete row 3, and row 1 row 2's before image.
    from cdclake.pipeline import apply_batch

    table = f"t{uuid.uuid4().hex[:8]}"
    tid = f"canal_test.{table}"
    insert = json.loads(canal("INSERT", [{"id": "1", "v": "a"}, {"id": "2", "v": "b"}, {"id": "3", "v": "c"}],
                              id_=1, es=1683006706000, table=table))
    apply_messages(spark, session_lake, source, "insert", [insert])
    unchanged_first = json.loads(canal("UPDATE", [{"id": "1", "v": "a"}, {"id": "2", "v": "B"}, {"id": "3", "v": "C"}],
                                       [{"v": "b"}, {"v": "c"}], id_=2, es=1683006707000, table=table))
    no_old_rows = json.loads(canal("UPDATE", [{"id": "1", "v": "a"}], [], id_=2, es=1683006707500, table=table))
    no_old_rows["pkNames"] = None  # as `old: null`: no row changed, nothing to pair
    batch_id, result = land_lines(spark, session_lake, source, [unchanged_first, no_old_rows], "canal")
    assert result.quarantined == 0
    assert [(r.key.id, r.after.v, r.before and r.before.v)
            for r in staged(spark, session_lake, source, batch_id, tid)] == [
        (1, "a", None), (2, "B", "b"), (3, "C", "c"), (1, "a", None)]
    apply_batch(spark, session_lake, source=source, batch_id=batch_id)
    assert [(r["id"], r["v"]) for r in dump_rows(session_lake, tid)] == [(1, "a"), (2, "B"), (3, "C")]

    key_changed = json.loads(canal("UPDATE", [{"id": "1", "v": "a"}, {"id": "20", "v": "B"}],
                                   [{"id": "2"}], id_=3, es=1683006708000, table=table))
    # Its one old row cannot be row 2's (v was C there already), so it cannot be paired.
    misfit = json.loads(canal("UPDATE", [{"id": "1", "v": "A"}, {"id": "3", "v": "C"}], [{"v": "C"}], id_=4,
                              es=1683006709000, table=table))
    batch_id, result = land_lines(spark, session_lake, source, [key_changed, misfit], "canal")
    assert (result.quarantined, result.tables) == (2, {tid: 3})
    assert {r.reason for r in quarantined(spark, source)} == {
        "UPDATE with 2 data rows but 1 old rows (canal leaves out the old row of the leading rows in which no column "
        "changed), whose first does not fit data row 2 (a column it names holds its old value there): which row "
        "each old row belongs to cannot be told"}
    apply_batch(spark, session_lake, source=source, batch_id=batch_id)
    assert [(r["id"], r["v"]) for r in dump_rows(session_lake, tid)] == [(1, "a"), (3, "C"), (20, "B")]
