"""Debezium change events (PostgreSQL, SQL Server, MySQL, Oracle connectors) and dtle's Debezium-compatible MySQL
output.

Accepts values with the JSON converter's ``schema`` + ``payload`` envelope and payload-only values, keys likewise
(or no key). Mapping onto the canonical record:

- ``op``: c/u/d/r/t as given; ``c`` with a truthy ``source.snapshot`` (older connectors, dtle) is a snapshot read
  ``r``. ``m`` (logical-decoding message) and tombstones (null value) are skipped with a counted reason.
- schema-change events (``ddl`` + ``databaseName``, on Debezium's and dtle's schema-change topics) are DDL records:
  :mod:`cdclake.normalize` learns keys and columns from ``CREATE TABLE`` and applies ``TRUNCATE``. One without DDL
  text (SQL Server's: ``tableChanges`` only) is skipped with a counted reason, as are the BEGIN/END messages of
  Debezium's transaction-metadata topic and its heartbeats.
- table: ``source.schema`` (else ``source.db``; MySQL and MariaDB: ``source.db``) + ``source.table``
  (:func:`cdclake.identity.table_id`).
- source position, by what ``source`` carries:
  PostgreSQL ``max(last commit LSN, lsn)`` + ``lsn`` (16 hex digits each; the last commit LSN is the first element
  of ``source.sequence``), the order Debezium delivers changes in;
  SQL Server (and Db2) ``commit_lsn`` + ``change_lsn`` (20 hex digits each, colons and a label such as ``CSN:``
  dropped; 32 each when one has more than 20, as Db2 LUW's do; 64 when more than 32) + ``event_serial_no`` (16);
  MySQL/dtle binlog file sequence number + ``pos`` + ``row`` (16 hex digits each);
  Oracle ``commit_scn`` (``scn`` for a snapshot read) + ``scn`` (16 hex digits each);
  TiCDC ``commit_ts`` (also Debezium's TiDB connector, which writes no binlog fields); a writer that names no
  connector and no position, or writes a placeholder (MySQL's ``"file": ""`` with ``"pos": 0``, PostgreSQL's
  ``lsn`` Long.MIN_VALUE): arrival order (:data:`NO_BINLOG_POSITION`).
- ``source_ts``: ``source.ts_us`` / ``ts_usec`` (before 1.0) / ``ts_ms`` / ``ts_sec``; ``snapshot``: ``source.snapshot``
  unless false; ``last`` for a record with ``last_snapshot_record: true`` (PostgreSQL before 1.0).
"""

from __future__ import annotations

from typing import Any, Iterable

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from cdclake.formats.common import (
    CORRUPT, null_string, positive_integer, shorter_than, table_identity, unquote_json_text,
)
from cdclake.formats.connect import ColumnType, envelope_row_schema, field_name, struct_columns
from cdclake.formats.message import KEY_SCHEMA, FROM_JSON_OPTIONS, PAYLOAD_FIELDS, Rule, Shape
from cdclake.quarantine import KEY_NOT_JSON
from cdclake.records import hex_segment

SNAPSHOT_TRUE = ("true", "first", "last", "first_in_data_collection", "last_in_data_collection", "incremental")
OPS = ("c", "u", "d", "r", "t")


def _body(j: Column) -> Column:
    return F.when(j["payload"].isNotNull(), j["payload"]).otherwise(
        F.struct(*[j[f.name].alias(f.name) for f in PAYLOAD_FIELDS]))


NO_BINLOG_POSITION = "0" * 48
"""The source position of MySQL events whose binlog coordinates are empty (``"file": "", "pos": 0``, as Flink's
debezium-json writes them), and of change events whose source names no connector and no position (Flink CDC's
pipeline Kafka sink writes only ``db`` and ``table``): older than every real position, so their order is arrival
order (the position's landing tail), and a change with real coordinates wins over them."""

_LONG_MIN_LSN = r"^-(9223372036854775808|9223372036854776000|9\.223372036854776[Ee]\+?18)$"
"""Long.MIN_VALUE as an ``lsn`` text: a writer's placeholder for "no LSN" (:func:`_source_position`)."""

_POSITION_FIELDS = ("lsn", "commit_lsn", "change_lsn", "file", "pos", "commit_ts", "scn", "commit_scn")


def _tidb_position(src: Column) -> Column:
    """TiCDC's Debezium events and Debezium's TiDB connector's (no binlog coordinates; ``commit_ts``, the
    transaction's TiDB timestamp): 16 zeros + ``commit_ts`` + ``row`` (16 hex digits each), above
    :data:`NO_BINLOG_POSITION`; null without ``commit_ts``."""
    commit_ts = F.trim(src["commit_ts"])
    return F.when(positive_integer(commit_ts),
                  F.concat(F.lit("0" * 16), hex_segment(commit_ts), hex_segment(F.coalesce(src["row"], F.lit("0")))))


def binlog_position(file: Column, pos: Column, row: Column) -> Column:
    """MySQL binlog coordinates -> file sequence number + pos + row (16 hex digits each), or null."""
    seq = F.regexp_extract(file, r"(\d+)$", 1)
    return F.when(
        file.isNotNull() & pos.rlike(r"^\s*\d+\s*$") & (seq != ""),
        F.concat(hex_segment(seq), hex_segment(F.trim(pos)), hex_segment(F.coalesce(row, F.lit("0")))),
    )


def _source_position(src: Column, *, unpositioned: bool = True) -> Column:
    """The change's source position (see the README's ordering table); with ``unpositioned``, a source without a
    connector and a position gets :data:`NO_BINLOG_POSITION`, else null."""
    lsn = src["lsn"]
    commit_lsn = src["commit_lsn"]
    change_lsn = src["change_lsn"]

    def lsn_digits(c: Column) -> Column:
        # A label before the digits is dropped (Redpanda Connect's Debezium-style Db2 events: "CSN:0000...1E36").
        return F.lower(F.regexp_replace(F.regexp_replace(F.coalesce(c, F.lit("")), r"^\s*[A-Za-z]*[G-Zg-z][A-Za-z]*:",
                                                         ""), r"[:\s]", ""))

    def lsn_position(width: int) -> Column:
        return F.concat(F.lpad(lsn_digits(commit_lsn), width, "0"), F.lpad(lsn_digits(change_lsn), width, "0"),
                        hex_segment(F.coalesce(src["event_serial_no"], F.lit("0"))))

    # SQL Server's and Db2 for z/OS's LSNs have 20 hex digits, Db2 LUW's 32 (8:8:16); `lpad` would cut a longer
    # text, so each gets the width that holds it (one source's LSNs all have one form).
    lsn_length = F.greatest(F.length(lsn_digits(commit_lsn)), F.length(lsn_digits(change_lsn)))

    scn, commit_scn = F.trim(src["scn"]), F.trim(src["commit_scn"])
    return (
        F.when(lsn.isNotNull() & lsn.rlike(r"^\d+$"), _postgres_position(lsn, src["sequence"], src["snapshot"]))
        # Apache SeaTunnel's debezium-json writes Long.MIN_VALUE (as a long or a double) for a PostgreSQL event
        # without an LSN, as Flink's writes MySQL's `"file": "", "pos": 0`: a writer's "no position".
        .when(F.trim(lsn).rlike(_LONG_MIN_LSN), F.lit(NO_BINLOG_POSITION))
        # Oracle: the transaction's commit SCN (a snapshot read has none: its SCN), then the change's SCN.
        .when(scn.rlike(r"^\d+$"),
              F.concat(hex_segment(F.when(commit_scn.rlike(r"^\d+$"), commit_scn).otherwise(scn)), hex_segment(scn)))
        .when((commit_lsn.isNotNull() | change_lsn.isNotNull()) & (lsn_length > 32) & (lsn_length <= 64),
              lsn_position(64))
        .when((commit_lsn.isNotNull() | change_lsn.isNotNull()) & (lsn_length > 20) & (lsn_length <= 32),
              lsn_position(32))
        .when((commit_lsn.isNotNull() | change_lsn.isNotNull()) & (lsn_length <= 20), lsn_position(20))
        .when((F.trim(src["file"]) == "") & (F.trim(src["pos"]) == "0"),
              F.coalesce(_tidb_position(src), F.lit(NO_BINLOG_POSITION)))
        # Debezium's TiDB connector writes TiDB's position alone (`commit_ts`, `cluster_id`), no binlog fields.
        .when(src["file"].isNull() & src["pos"].isNull() & src["commit_ts"].isNotNull(), _tidb_position(src))
        .when(F.lit(unpositioned) & _no_position_fields(src), F.lit(NO_BINLOG_POSITION))
        .otherwise(binlog_position(src["file"], src["pos"], src["row"]))
    )


AFTER_SNAPSHOT = "~"
"""Suffix of the source position of a PostgreSQL change streamed without a last commit LSN (``sequence``
``[null, lsn]``). Debezium's offset after a snapshot has none until the first transaction streamed after it
commits, so that transaction's changes carry none, and it can hold changes written before the snapshot's LSN (it
was open then, and committed after). Normalize raises such a position above the snapshot's
(``normalize._after_snapshot``); the suffix itself sorts after the digits, as the raised position does."""


def _postgres_position(lsn: Column, sequence: Column, snapshot: Column) -> Column:
    """``max(last commit LSN, lsn)`` + ``lsn``, 16 hex digits each (see :data:`AFTER_SNAPSHOT` for a streamed change
    without a last commit LSN).

    PostgreSQL decodes transactions in commit order, but a change keeps the LSN it was written at, so LSNs of
    concurrent transactions interleave: a change written before an incremental snapshot's high watermark and
    committed after it has the lower LSN, yet is the newer change. Debezium's ``sequence`` (``[last commit LSN,
    lsn]``, the commit LSN of the transaction delivered before) restores the delivery order: every change of a
    transaction is below its commit LSN, which is the next transaction's last commit LSN. The maximum keeps a
    snapshot read (``[null, snapshot LSN]``) and any event without ``sequence`` at its LSN, as before.
    """
    elements = F.from_json(sequence, "array<string>")
    last_commit = F.when(elements[0].rlike(r"^\d+$"), elements[0].cast("decimal(20,0)"))
    position = F.concat(hex_segment(F.greatest(lsn.cast("decimal(20,0)"), F.coalesce(last_commit, F.lit(0)))),
                        hex_segment(lsn))
    streamed = F.coalesce(F.lower(F.trim(snapshot)), F.lit("false")) == "false"
    first_after_snapshot = streamed & (F.size(elements) == 2) & elements[0].isNull()
    return F.when(first_after_snapshot, F.concat(position, F.lit(AFTER_SNAPSHOT))).otherwise(position)


def _no_position_fields(src: Column) -> Column:
    """The source names no connector and no position (a Debezium-compatible writer, not a Debezium connector:
    a connector always writes its position, so an event of one without it is damaged)."""
    absent = src["connector"].isNull()
    for name in _POSITION_FIELDS:
        absent = absent & src[name].isNull()
    return absent


def _source_ts(src: Column, envelope_ts: Column) -> Column:
    """The source's time of the change; 0 means unknown (older MySQL connectors' snapshot reads): then the next."""
    def known(value: Column) -> Column:
        return F.when(value.cast("long") > 0, value.cast("long"))

    # Debezium before 1.0 wrote `ts_usec` (PostgreSQL); some 0.7 connectors put nanoseconds there.
    usec = known(src["ts_usec"])
    return F.coalesce(
        F.timestamp_micros(known(src["ts_us"])),
        F.timestamp_micros(F.when(usec > 10**17, F.floor(usec / 1000).cast("long")).otherwise(usec)),
        F.timestamp_millis(known(src["ts_ms"])),
        F.timestamp_seconds(known(src["ts_sec"])),
        F.timestamp_millis(known(envelope_ts)),
    )


_NULL_SCHEMA_ENVELOPE = r'^\s*\{\s*"schema"\s*:\s*null\s*,\s*"payload"\s*:'
"""A message key in the JSON converter's envelope whose schema is null (its `payload` is the key)."""


def _key(j: Column) -> tuple[Column, Column]:
    """(key payload text, key schema text) of the message key."""
    k = F.from_json(F.col("key"), KEY_SCHEMA, FROM_JSON_OPTIONS)
    # The JSON converter (schemas enabled) writes `{"schema": null, "payload": ...}` for a key it has no schema for.
    enveloped = k["payload"].isNotNull() & (k["schema"].isNotNull() | F.col("key").rlike(_NULL_SCHEMA_ENVELOPE))
    text = F.when(enveloped, unquote_json_text(k["payload"])).otherwise(unquote_json_text(F.col("key")))
    return text, F.when(enveloped, k["schema"])


AVRO_ENCODING_ADVICE = ("the event is in Avro's JSON encoding, not the JSON converter's; publish it with Kafka "
                        "Connect's JsonConverter (or decode the Avro first)")


def _any_avro_union(fields: Iterable[Column]) -> Column:
    """Whether any of these text fields is an object: Avro's JSON encoding wraps each optional value in its union
    branch (``"lsn": {"long": 25178840}``, ``"ddl": {"string": "ALTER TABLE .."}``)."""
    found = F.lit(False)
    for value in fields:
        found = found | F.coalesce(F.ltrim(value).startswith("{"), F.lit(False))
    return found


def _avro_string(field: Column) -> Column:
    """A source field's text, unwrapped from its Avro union branch (``{"string": "customers"}``) when the event is
    in Avro's JSON encoding: such an event is quarantined (:func:`_change_rules`), recorded under its table."""
    return F.when(F.ltrim(field).startswith("{"), F.get_json_object(field, "$.string")).otherwise(field)


def _change_columns(j: Column, row: Column, row_index: Column) -> dict[str, Column]:
    b = F.col("_b")
    src = b["source"]
    raw_op = F.lower(F.trim(b["op"]))
    snapshot_flag = F.lower(F.trim(src["snapshot"]))
    # Debezium's PostgreSQL connector before 1.0: `snapshot` is a boolean, and its snapshot's last record has
    # `last_snapshot_record: true` (what `snapshot: last` says since).
    snapshot_flag = F.when((snapshot_flag == "true") & (F.lower(F.trim(src["last_snapshot_record"])) == "true"),
                           F.lit("last")).otherwise(snapshot_flag)
    snapshot = F.when(snapshot_flag.isin(*SNAPSHOT_TRUE), snapshot_flag).when(raw_op == "r", F.lit("true"))
    op = F.when((raw_op == "c") & snapshot.isNotNull() & (snapshot != "incremental"), F.lit("r")).otherwise(raw_op)
    # MySQL and MariaDB name a table by database; a `schema` beside it (written by hand) is not a namespace.
    by_database = F.coalesce(F.lower(_avro_string(src["connector"])).isin("mysql", "mariadb"), F.lit(False))
    schema = F.when(~by_database, F.nullif(_avro_string(src["schema"]), F.lit("")))
    namespace = F.coalesce(schema, F.nullif(_avro_string(src["db"]), F.lit("")), F.lit("default"))
    # A MongoDB connector event names a collection (it is quarantined, named by it: `quarantine list` shows where).
    table = F.coalesce(_avro_string(src["table"]), src["collection"], F.lit(""))
    key_text, key_schema = _key(j)
    identity = table_identity(namespace, table)
    # The lake id leaves the database out (`dbo.customers`), but the source table is the database's: SQL Server's
    # connector reads several databases at once (`database.names`), each with LSNs of its own, so the same schema
    # and table of two databases are two source tables (the second is kept out of the lake table, as DRS's are).
    # Database names are one name whatever their case (SQL Server's, Oracle's `database.dbname` that Debezium
    # upper-cases unless quoted, Flink CDC's Oracle source that sent it in lower case while it read the snapshot).
    database = F.lower(F.nullif(F.trim(_avro_string(src["db"])), F.lit("")))
    qualified = (identity["table_id"].isNotNull() & schema.isNotNull() & database.isNotNull()
                 & (database != F.lower(F.trim(schema))))
    identity["table_name"] = F.when(qualified, F.concat_ws(".", database, F.trim(schema), F.trim(table))).otherwise(
        identity["table_name"])
    return {
        **identity,
        "op": op,
        "source_pos": _source_position(src),
        "source_ts": _source_ts(src, b["ts_ms"]),
        "snapshot": snapshot,
        "key_text": key_text,
        "before_text": unquote_json_text(b["before"]),
        "after_text": unquote_json_text(b["after"]),
        # A schema that declares no row image (`"schema": {}`, or an Envelope with `"fields": []`, as some writers
        # send) declares nothing: typed as payload-only. Spark keeps the object's text compact, so the fields are
        # found as they are written; a schema of 1024 bytes or more has them (the test stops there, unscanned).
        "row_schema": F.when(j["payload"].isNotNull() & F.coalesce(
            (F.octet_length(j["schema"]) >= 1024) | j["schema"].contains('"field":"after"')
            | j["schema"].contains('"field":"before"'), F.lit(False)), j["schema"]),
        "key_schema": key_schema,
        "ddl": null_string(),
    }


def _change_rules(j: Column, row: Column, cols: dict[str, Column]) -> list[Rule]:
    b = F.col("_b")
    raw_op = F.lower(F.trim(b["op"]))
    k = F.from_json(F.col("key"), KEY_SCHEMA, FROM_JSON_OPTIONS)
    op = cols["op"]

    def field(path: str) -> Column:  # a field's name as the message spells it: under payload, or at the top
        return F.when(j["payload"].isNotNull(), F.lit(f"payload.{path}")).otherwise(F.lit(path))

    # Avro's JSON encoding wraps each optional value in its union branch (`"lsn": {"long": 25178840}`), and a row
    # image in its record's (`"after": {"dbserver1.inventory.customers.Value": {...}}`).
    image = F.coalesce(cols["after_text"], cols["before_text"], cols["key_text"])
    avro_union = _any_avro_union(b["source"][name] for name in ("connector", "table", "lsn", "snapshot", "txId"))
    avro_union = avro_union | (image.startswith('{"') & image.rlike(r'^\{\s*"[\w.-]+\.Value"\s*:\s*\{'))
    return [
        # A damaged JSON key must not fall back silently to the row image's key columns. Keys that are not
        # JSON at all (a string converter's key) still do.
        (F.col("key").rlike(r"^\s*\{") & k[CORRUPT].isNotNull(), F.lit(KEY_NOT_JSON),
         "quarantine"),
        # A message key where a value belongs (a dump written as key, value, key, value, ...).
        (raw_op.isNull() & b["source"].isNull() & F.get_json_object(j["schema"], "$.name").endswith(".Key"),
         F.concat(F.lit("a message key, not a change event (its schema is named "),
                  F.get_json_object(j["schema"], "$.name"),
                  F.lit("): the input has keys where values belong, each key and value a line of its own, as "
                        "kafka-console-consumer --property print.key=true writes them with a line break for "
                        "key.separator (or kcat -K with one), which cdclake does not frame; print them with the "
                        "default tab separator, or land kcat -C -J envelopes, which keep each key with its value")),
         "quarantine"),
        (raw_op.isNull() & b["source"].isNull(), F.concat(
            F.lit("missing fields payload.op and payload.source: not a change event (a row flattened by "
                  "ExtractNewRecordState/unwrap is not read; publish the change events); its payload fields: "),
            F.coalesce(F.array_join(F.json_object_keys(_body_text(j)), ", "), F.lit("none"))), "quarantine"),
        (raw_op.isNull(), F.concat(F.lit("missing field "), field("op")), "quarantine"),
        (raw_op == "m", F.lit("logical decoding message (op=m)"), "skip"),
        (~raw_op.isin(*OPS),
         F.concat(F.lit("unknown op '"), b["op"], F.lit("' (expected c, u, d, r, t or m)")), "quarantine"),
        (b["source"].isNull(), F.concat(F.lit("missing field "), field("source")), "quarantine"),
        (avro_union, F.concat(
            F.lit("source fields or row images are Avro union objects (connector "),
            F.substring(b["source"]["connector"], 1, 60),
            F.lit(f"): {AVRO_ENCODING_ADVICE}")), "quarantine"),
        # Before Debezium 0.8 its MongoDB source had no connector name: replica set `rs` and namespace `ns`.
        (F.lower(b["source"]["connector"]).contains("mongo")
         | (b["source"]["collection"].isNotNull() & b["source"]["connector"].isNull())
         | (b["source"]["rs"].isNotNull() & b["source"]["ns"].isNotNull()),
         F.lit("a Debezium MongoDB connector event (its source has a collection, or rs and ns): not supported; "
               "cdclake reads MongoDB changes in Huawei DRS's format (--format drs)"), "quarantine"),
        (b["source"]["collection"].isNotNull(),
         F.concat(F.lit("a Debezium event of a collection, not a table (connector "), b["source"]["connector"],
                  F.lit("): not supported; cdclake reads the PostgreSQL, MySQL, SQL Server, Db2, Informix, Oracle "
                        "and TiCDC connectors' change events")), "quarantine"),
        # (Without a position either, the event is not from a connector cdclake orders: that reason names it.)
        (cols["table_id"].isNull() & cols["source_pos"].isNotNull(),
         F.concat(F.lit("missing field "), field("source.table")), "quarantine"),
        (cols["source_pos"].isNull(), _no_position_reason(b["source"]), "quarantine"),
        (image.contains('"set"') & image.rlike(_YB_CELL), F.lit(YB_CELLS_REASON), "quarantine"),
        (op.isin("c", "u", "r") & cols["after_text"].isNull(),
         F.concat(F.lit("op="), op, F.lit(" without an after image (payload.after is null)")), "quarantine"),
        (op.isin("c", "u", "r") & ~F.trim(cols["after_text"]).startswith("{"),
         F.lit("payload.after is not a JSON object"), "quarantine"),
        ((op == "d") & cols["before_text"].isNull() & cols["key_text"].isNull(),
         F.lit("op=d without a before image or a message key: no key to delete"), "quarantine"),
    ]


_YB_CELL = (r'\{\s*"value"\s*:\s*(?:null|true|false|-?[0-9.eE+-]+|"[^"\\]*+(?:\\.[^"\\]*+)*+")'
            r'\s*,\s*"set"\s*:\s*(?:true|false)\s*\}')
"""A column of YugabyteDB's ``yboutput`` plugin: ``{"value": ..., "set": true}`` (an unchanged column is null)."""

YB_CELLS_REASON = ("row image columns are YugabyteDB yboutput cells ({\"value\": ..., \"set\": ...}), which "
                   "cdclake does not read: publish the events through YugabyteDB's PGCompatible transform (plain "
                   "column values) and replica identity FULL or DEFAULT")


def _no_position_reason(src: Column) -> Column:
    """Why a change has no source position, naming its connector: an unsupported connector (Vitess, Spanner,
    CockroachDB, Cassandra) reads as such, not as a damaged event."""
    connector = F.trim(src["connector"])
    # A position field that is there but not a non-negative integer (a writer's placeholder, `"lsn": -1`) is named.
    unreadable = F.coalesce(*[
        F.when(~F.trim(src[name]).rlike(r"^\d+$"),
               F.concat(F.lit(f"; its {name} "), F.substring(src[name], 1, 40),
                        F.lit(" is not a non-negative integer")))
        for name in ("lsn", "scn", "pos", "commit_ts")], F.lit(""))
    return F.concat(
        F.lit("no source position: payload.source"),
        F.when(connector != "", F.concat(F.lit(" (connector "), connector, F.lit(")"))).otherwise(F.lit("")),
        F.lit(" has no readable lsn, commit_lsn/change_lsn, scn, commit_ts, or file (ending in a number) + pos; "
              "cdclake orders changes of the PostgreSQL, MySQL, SQL Server, Db2, Informix, Oracle and TiDB (TiCDC, "
              "Debezium's TiDB connector) connectors"),
        unreadable,
    )


def _ddl_columns(j: Column, row: Column, row_index: Column) -> dict[str, Column]:
    b = F.col("_b")
    src, pos = b["source"], b["position"]
    connector = F.lower(F.coalesce(src["connector"], F.lit("mysql")))
    dialect = (F.when(connector.contains("sqlserver"), F.lit("tsql")).when(connector.contains("oracle"), "oracle")
               .when(connector.contains("postgres"), "postgres").otherwise("mysql"))
    namespace = F.coalesce(F.nullif(b["schemaName"], F.lit("")), F.nullif(b["databaseName"], F.lit("")),
                           src["db"])
    snapshot = F.lower(F.coalesce(pos["snapshot"], src["snapshot"]))
    return {
        "table_id": null_string(),
        "op": null_string(),
        "source_pos": F.coalesce(binlog_position(pos["file"], pos["pos"], pos["row"]),
                                 binlog_position(src["file"], src["pos"], src["row"]),
                                 _source_position(src, unpositioned=False)),
        "source_ts": F.coalesce(F.timestamp_seconds(pos["ts_sec"].cast("long")), _source_ts(src, b["ts_ms"])),
        "snapshot": F.when(snapshot.isin(*SNAPSHOT_TRUE), snapshot),
        "key_text": null_string(),
        "before_text": null_string(),
        "after_text": null_string(),
        "row_schema": F.to_json(F.struct(dialect.alias("dialect"), namespace.alias("namespace"),
                                         b["tableChanges"].alias("table_changes"))),
        "key_schema": null_string(),
        "ddl": b["ddl"],
    }


NO_DDL_TEXT_SKIP = "schema change event without DDL text (tableChanges only): columns come from the change events"
TRANSACTION_SKIP = "transaction metadata (status BEGIN/END)"
HEARTBEAT_SKIP = "heartbeat (ts_ms only)"
NO_CHANGE_SKIP = ("event without op, row image or table (a TiCDC WATERMARK event, or an empty record): no change "
                  "to apply")


def _ddl_rules(j: Column, row: Column, cols: dict[str, Column]) -> list[Rule]:
    no_text = F.trim(F.coalesce(cols["ddl"], F.lit(""))) == ""
    b = F.col("_b")
    avro_union = _any_avro_union((b["ddl"], b["databaseName"], b["source"]["snapshot"], b["source"]["table"]))
    return [
        (avro_union, F.lit('schema change event fields are Avro union objects (ddl or databaseName as {"string": '
                           f"...}}): {AVRO_ENCODING_ADVICE}"), "quarantine"),
        # Debezium's SQL Server (and Db2/Informix) connector writes no DDL text, only the table's new structure.
        (no_text & F.col("_b")["tableChanges"].isNotNull(), F.lit(NO_DDL_TEXT_SKIP), "skip"),
        (no_text, F.lit("schema change event without ddl text"), "quarantine"),
        (F.lit(True), F.lit("ddl"), "ddl"),
    ]


def _either(j: Column, name: str) -> Column:
    """A body field, from the payload of a schema envelope or from the top level."""
    return F.coalesce(j["payload"][name], j[name])


def _is_ddl(j: Column) -> Column:
    """A schema-change event: DDL text or ``tableChanges`` (SQL Server's have no text), or Flink CDC's
    ``historyRecord`` holding them, and no ``op``."""
    return ((_either(j, "ddl").isNotNull() | _either(j, "tableChanges").isNotNull()
             | _either(j, "historyRecord").isNotNull())
            & _either(j, "op").isNull())


_HISTORY_FIELDS = ("position", "databaseName", "schemaName", "ddl", "tableChanges")
_HISTORY_RECORD = StructType([f for f in PAYLOAD_FIELDS if f.name in _HISTORY_FIELDS])


def _ddl_body(j: Column) -> Column:
    """The schema-change event's body. Flink CDC (``includeSchemaChanges``) writes Debezium's schema-history record
    as JSON text in ``historyRecord`` beside the change's ``source``: its fields are taken from there."""
    b = _body(j)
    history = F.from_json(_either(j, "historyRecord"), _HISTORY_RECORD, FROM_JSON_OPTIONS)
    return F.when(_either(j, "historyRecord").isNull(), b).otherwise(F.struct(*[
        (F.coalesce(history[f.name], b[f.name]) if f.name in _HISTORY_FIELDS else b[f.name]).alias(f.name)
        for f in PAYLOAD_FIELDS]))


HEARTBEAT_SCHEMA = "io.debezium.connector.common.Heartbeat"
_HEARTBEAT_VALUE = r'^\s*\{\s*(?:"op"\s*:\s*"hb"\s*,\s*)?"ts_ms"\s*:\s*\d+\s*(?:,\s*"op"\s*:\s*"hb"\s*)?\}\s*$'
"""A heartbeat's value without the schema envelope: only ``ts_ms`` (Redpanda Connect's Debezium-style inputs add
``"op": "hb"``)."""


def _is_heartbeat(j: Column) -> Column:
    """A message of Debezium's heartbeat topic (``__debezium-heartbeat.<prefix>``, ``heartbeat.interval.ms``): its
    value is only ``ts_ms``; in the schema envelope, the schema is named :data:`HEARTBEAT_SCHEMA`."""
    # Cheap tests first (`AND` stops at the first false): the rest read the value's or the schema's text.
    enveloped = (j["payload"].isNotNull() & j["payload"]["op"].isNull() & j["payload"]["source"].isNull()
                 & F.coalesce(j["schema"].contains(HEARTBEAT_SCHEMA), F.lit(False)))
    bare = shorter_than(F.col("value"), 64) & F.coalesce(F.col("value").rlike(_HEARTBEAT_VALUE), F.lit(False))
    return enveloped | F.coalesce(bare, F.lit(False))


def _is_no_change(j: Column) -> Column:
    """A Debezium-shaped event that changes nothing: no ``op``, no row image, no table and no DDL. TiCDC sends
    one (``enable-tidb-extension``) as its WATERMARK event, with ``source.commit_ts``; Flink CDC's deserializer
    ignores ``{"payload": {"source": {}, "ts_ms": 1}}``."""
    source = _either(j, "source")
    return ((j["payload"].isNotNull() | source.isNotNull()) & _either(j, "op").isNull()
            & _either(j, "before").isNull() & _either(j, "after").isNull()
            & (F.trim(F.coalesce(source["table"], F.lit(""))) == "") & ~_is_ddl(j)
            # Last (`AND` stops at the first false): nothing but bookkeeping in the body. A row flattened by
            # ExtractNewRecordState (`{"schema", "payload": {"id": 1, "__op": "c"}}`) is not an empty event.
            & (F.size(F.array_except(F.json_object_keys(_body_text(j)), F.array(*map(F.lit, _NO_CHANGE_FIELDS))))
               == 0))


_NO_CHANGE_FIELDS = ("schema", "payload", "source", "ts_ms", "ts_us", "ts_ns", "transaction", "op", "before", "after")


def _body_text(j: Column) -> Column:
    """The JSON text of the event's body: the envelope's payload, else the whole value."""
    return F.when(j["payload"].isNotNull(), F.get_json_object(F.col("value"), "$.payload")).otherwise(F.col("value"))


def _is_transaction(j: Column) -> Column:
    """A message of Debezium's transaction-metadata topic (``provide.transaction.metadata``): BEGIN or END of a
    transaction, with its ``id``; no change."""
    status = F.upper(F.trim(_either(j, "status")))
    return (F.coalesce(status.isin("BEGIN", "END"), F.lit(False)) & _either(j, "id").isNotNull()
            & _either(j, "op").isNull())


DDL_SHAPE = Shape(
    name="debezium_ddl",
    detect=_is_ddl,
    columns=_ddl_columns,
    rules=_ddl_rules,
    prepare=lambda j: {"_b": _ddl_body(j)},
)
METADATA_SHAPE = Shape(
    name="debezium_meta",
    detect=lambda j: _is_transaction(j) | _is_heartbeat(j) | _is_no_change(j),
    columns=lambda j, row, row_index: {},
    rules=lambda j, row, cols: [(_is_transaction(j), F.lit(TRANSACTION_SKIP), "skip"),
                                (_is_heartbeat(j), F.lit(HEARTBEAT_SKIP), "skip"),
                                (F.lit(True), F.lit(NO_CHANGE_SKIP), "skip")],
)
CHANGE_SHAPE = Shape(
    name="debezium",
    # Exclusive of the others: an enveloped schema-change, transaction, heartbeat or no-change message also has a
    # `payload`.
    detect=lambda j: ~_is_ddl(j) & ~_is_transaction(j) & ~_is_heartbeat(j) & ~_is_no_change(j) & (
        j["payload"].isNotNull()
        | (j["coll"].isNull() & j["op"].isNotNull()
           & (j["source"].isNotNull() | j["after"].isNotNull() | j["before"].isNotNull()))),
    columns=_change_columns,
    rules=_change_rules,
    prepare=lambda j: {"_b": _body(j)},
)


def table_columns(row_schema: dict[str, Any]) -> list[ColumnType]:
    """Columns from a Debezium value envelope schema (its ``after``/``before`` struct)."""
    row = envelope_row_schema(row_schema)
    return struct_columns(row) if row else []


def key_columns(key_schema: dict[str, Any] | None) -> list[str]:
    """Key columns from the key's Connect schema."""
    if key_schema and key_schema.get("fields"):
        return [field_name(f) for f in key_schema["fields"]]
    return []
