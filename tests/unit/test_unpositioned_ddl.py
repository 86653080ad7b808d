"""DDL statements without a source position of their own (CKafka's canal-format DDL has ``id`` 0) and statements a
snapshot writes. The expected rows are written out by hand: what MySQL holds after the statements."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from cdclake.reader import dump_rows, list_tables
from tests.support.canal_batches import apply_messages

# In the extended tier (11 minutes of a CI worker, statements without a source position): `CDCLAKE_TESTS=all ./.ci/run`.
pytestmark = pytest.mark.extended


def _ddl(db: str, table: str, kind: str, sql: str) -> dict[str, Any]:
    return {"data": None, "database": db, "es": 1704067200, "id": 0, "isDdl": True, "mysqlType": None,
            "old": None, "pkNames": None, "sql": sql, "sqlType": None, "table": table, "ts": 1704067200,
            "type": kind}


def _insert(db: str, table: str, pos: int, **values: str) -> dict[str, Any]:
    return {"BINLOG_NAME": "mysql-bin.000003", "BINLOG_POS": pos, "DATABASE": db, "EVENT_SERVER_ID": None,
            "GLOBAL_ID": None, "GROUP_ID": None, "NEW_VALUES": values, "OLD_VALUES": None, "TABLE": table,
            "TIME": "20240101000000", "TYPE": "I"}


def _create(db: str, table: str, columns: str = "`v` varchar(10)") -> dict[str, Any]:
    return _ddl(db, table, "CREATE", f"CREATE TABLE `{table}` (`id` int NOT NULL PRIMARY KEY, {columns})")


def _tables(settings: Any, db: str) -> dict[str, list[dict[str, Any]]]:
    return {tid: dump_rows(settings, tid) for tid in list_tables(settings) if tid.startswith(f"{db}.")}


def test_a_drop_of_several_tables_empties_each_and_is_ordered_by_each_tables_own_changes(spark,
                                                                                           session_lake) -> None:
    db = f"ckdrop{uuid.uuid4().hex[:6]}"
    apply_messages(spark, session_lake, db, "0", [
        _create(db, "m1"), _create(db, "m2"), _create(db, "a"), _create(db, "b"),
        _insert(db, "m1", 100, id="1", v="x"), _insert(db, "m2", 110, id="1", v="x"),
        _ddl(db, "m1", "ERASE", "DROP TABLE `m1`,`m2`"),
        _insert(db, "m2", 300, id="2", v="y"),
        # a's statement has b's lagging change next to it (another partition's): a's own change orders it
        _insert(db, "a", 5000, id="1", v="x"),
        _ddl(db, "a", "ERASE", "DROP TABLE `a`"),
        _insert(db, "b", 200, id="1", v="x"),
    ], fmt="ckafka")
    assert _tables(session_lake, db) == {
        f"{db}.m1": [], f"{db}.m2": [{"id": 2, "v": "y"}], f"{db}.a": [], f"{db}.b": [{"id": 1, "v": "x"}]}


def test_a_table_renamed_away_and_created_again_in_one_batch_keeps_its_earlier_rows(spark, session_lake) -> None:
    db = f"ckrename{uuid.uuid4().hex[:6]}"
    apply_messages(spark, session_lake, db, "0", [
        _create(db, "t"),
        _insert(db, "t", 100, id="1", v="a"),
        _ddl(db, "t", "RENAME", "RENAME TABLE `t` TO `t_old`"),
        _create(db, "t", "`w` int"),
        _insert(db, "t", 110, id="5", w="5"),
        # a swap in one statement: each name's earlier rows go with the table they belong to
        _create(db, "s1"), _create(db, "s2"),
        _insert(db, "s1", 120, id="1", v="one"), _insert(db, "s2", 121, id="1", v="two"),
        _ddl(db, "s1", "RENAME", "RENAME TABLE `s1` TO `tmp`, `s2` TO `s1`, `tmp` TO `s2`"),
        _insert(db, "s1", 130, id="2", v="two-2"),
    ], fmt="ckafka")
    assert _tables(session_lake, db) == {
        f"{db}.t_old": [{"id": 1, "v": "a"}], f"{db}.t": [{"id": 5, "w": 5}],
        f"{db}.s1": [{"id": 1, "v": "two"}, {"id": 2, "v": "two-2"}], f"{db}.s2": [{"id": 1, "v": "one"}]}


def test_a_default_added_in_a_batch_without_the_tables_rows_fills_the_earlier_rows(spark, session_lake) -> None:
    db = f"ckdefault{uuid.uuid4().hex[:6]}"
    apply_messages(spark, session_lake, db, "0", [_create(db, "t"), _insert(db, "t", 100, id="1", v="a")],
                   fmt="ckafka")
    apply_messages(spark, session_lake, db, "1", [
        _ddl(db, "t", "ALTER", "ALTER TABLE `t` ADD COLUMN `c` int NOT NULL DEFAULT 5")], fmt="ckafka")
    apply_messages(spark, session_lake, db, "2", [_insert(db, "t", 200, id="2", v="b", c="7")], fmt="ckafka")
    assert dump_rows(session_lake, f"{db}.t") == [{"id": 1, "v": "a", "c": 5}, {"id": 2, "v": "b", "c": 7}]


def test_an_application_start_up_scripts_create_table_if_not_exists_leaves_the_lake_table(spark,
                                                                                              session_lake) -> None:
    # MySQL logs the script's first version at every start although the table exists: CKafka's rows carry no
    # key, so the statement's key `id` would key the batch's rows, where the lake's table is keyed by (id, n).
    # A table the source dropped in an earlier batch is created again by it, with the statement's columns.
    db = f"ckstartup{uuid.uuid4().hex[:6]}"
    script = [_ddl(db, "t", "CREATE", "CREATE TABLE IF NOT EXISTS `t` (`id` int NOT NULL PRIMARY KEY, `n` int)"),
              _ddl(db, "g", "CREATE", "CREATE TABLE /*!32312 IF NOT EXISTS*/ `g` (`id` int PRIMARY KEY, `v` int)")]
    apply_messages(spark, session_lake, db, "0", [
        *script, _ddl(db, "t", "ALTER", "ALTER TABLE `t` DROP PRIMARY KEY, ADD PRIMARY KEY (`id`, `n`)"),
        _insert(db, "t", 100, id="1", n="1"),
        _insert(db, "g", 110, id="1", v="1")], fmt="ckafka")
    apply_messages(spark, session_lake, db, "1", [_ddl(db, "g", "ERASE", "DROP TABLE `g`")], fmt="ckafka")
    apply_messages(spark, session_lake, db, "2", [
        *script[:1], _insert(db, "t", 200, id="1", n="2"),
        _ddl(db, "g", "CREATE", "CREATE TABLE IF NOT EXISTS `g` (`uid` varchar(8) PRIMARY KEY, `w` int)"),
        _insert(db, "g", 210, uid="u", w="2")], fmt="ckafka")
    tables = _tables(session_lake, db)
    assert tables[f"{db}.t"] == [{"id": 1, "n": 1}, {"id": 1, "n": 2}]
    assert tables[f"{db}.g"] == [{"uid": "u", "w": 2}]


def test_the_drop_table_a_mysql_snapshot_writes_before_each_create_leaves_the_rows(spark, session_lake) -> None:
    db = f"snapddl{uuid.uuid4().hex[:6]}"

    def source(pos: int, snapshot: str, table: str | None) -> dict[str, Any]:
        return {"version": "2.5.0.Final", "connector": "mysql", "name": "my", "ts_ms": 1700000000000,
                "snapshot": snapshot, "db": db, "table": table, "server_id": 1, "gtid": None,
                "file": "mysql-bin.000006", "pos": pos, "row": 0, "thread": 1, "query": None}

    def insert(pos: int, key: int) -> dict[str, Any]:
        return {"before": None, "after": {"id": key, "v": f"v{key}"}, "source": source(pos, "false", "items"),
                "op": "c", "ts_ms": 1700000000000, "transaction": None}

    def ddl(pos: int, sql: str, snapshot: str) -> dict[str, Any]:
        return {"source": source(pos, snapshot, "items"), "databaseName": db, "schemaName": None, "ddl": sql,
                "tableChanges": []}

    create = f"CREATE TABLE `items` (`id` int NOT NULL, `v` varchar(10), PRIMARY KEY (`id`))"
    apply_messages(spark, session_lake, db, "0", [ddl(100, create, "false"), insert(200, 1), insert(300, 2)],
                   fmt="debezium")
    # a schema_only (or recovery) snapshot: the schema is recorded again, no row is read
    apply_messages(spark, session_lake, db, "1", [
        ddl(900, f"DROP TABLE IF EXISTS `{db}`.`items`", "true"), ddl(900, f"DROP DATABASE IF EXISTS `{db}`", "true"),
        ddl(900, f"CREATE DATABASE `{db}`", "true"), ddl(900, create, "last")], fmt="debezium")
    # the same statement while streaming drops the table
    apply_messages(spark, session_lake, db, "2", [insert(1000, 3)], fmt="debezium")
    assert [r["id"] for r in dump_rows(session_lake, f"{db}.items")] == [1, 2, 3]
    apply_messages(spark, session_lake, db, "3", [ddl(1100, f"DROP TABLE IF EXISTS `{db}`.`items`", "false")],
                   fmt="debezium")
    assert dump_rows(session_lake, f"{db}.items") == []


def _update(db: str, table: str, pos: int, old: dict[str, str], **values: str) -> dict[str, Any]:
    return {**_insert(db, table, pos, **values), "OLD_VALUES": old, "TYPE": "U"}


def test_a_table_created_like_another_takes_its_columns_and_key(spark, session_lake) -> None:
    # CKafka's row messages carry no key: MySQL's CREATE TABLE t LIKE s copies s's primary key, so t's updates
    # replace rows by it, in the batch that knows s's CREATE and in a later one, where only the lake has s.
    db = f"cklike{uuid.uuid4().hex[:6]}"
    apply_messages(spark, session_lake, db, "0", [
        _create(db, "s", "`v` varchar(10), `n` int"),
        _ddl(db, "t", "CREATE", "CREATE TABLE `t` LIKE `s`"),
        _insert(db, "t", 100, id="1", v="a", n="1"),
        _update(db, "t", 110, {"id": "1", "v": "a", "n": "1"}, id="1", v="b", n="1"),
    ], fmt="ckafka")
    apply_messages(spark, session_lake, db, "1", [
        _ddl(db, "u", "CREATE", f"CREATE TABLE IF NOT EXISTS `{db}`.`u` LIKE `{db}`.`s`"),
        _insert(db, "u", 200, id="7", v="x", n="2"),
        _update(db, "u", 210, {"id": "7", "v": "x", "n": "2"}, id="7", v="y", n="3"),
    ], fmt="ckafka")
    assert _tables(session_lake, db) == {
        f"{db}.s": [], f"{db}.t": [{"id": 1, "v": "b", "n": 1}], f"{db}.u": [{"id": 7, "v": "y", "n": 3}]}


def test_a_dropped_database_empties_each_of_its_tables(spark, session_lake) -> None:
    # DROP DATABASE drops every table in it: a table created again afterwards holds only its new rows, and one
    # the batch does not mention (the lake has it from an earlier batch) is emptied too. Another database's is not.
    db, other = f"ckdropdb{uuid.uuid4().hex[:6]}", f"ckkeep{uuid.uuid4().hex[:6]}"
    apply_messages(spark, session_lake, db, "0", [
        _create(db, "a"), _create(db, "b"), _create(other, "c"),
        _insert(db, "a", 100, id="1", v="x"), _insert(db, "b", 110, id="1", v="x"),
        _insert(other, "c", 120, id="1", v="x"),
    ], fmt="ckafka")
    apply_messages(spark, session_lake, db, "1", [
        _insert(db, "a", 200, id="2", v="y"),
        _ddl(db, "", "QUERY", f"DROP DATABASE `{db}`"),
        _ddl(db, "", "QUERY", f"CREATE DATABASE `{db}`"),
        _create(db, "a"),
        _insert(db, "a", 300, id="3", v="z"),
    ], fmt="ckafka")
    tables = _tables(session_lake, db)
    aside = [t for t in tables if t.startswith(f"{db}.a__displaced_")]  # the dropped a, emptied, with its history
    assert len(aside) == 1, tables
    assert tables == {f"{db}.a": [{"id": 3, "v": "z"}], aside[0]: [], f"{db}.b": []}
    assert _tables(session_lake, other) == {f"{other}.c": [{"id": 1, "v": "x"}]}


def test_a_table_dropped_and_created_again_in_its_first_batch_keeps_each_tables_key(spark, session_lake) -> None:
    # CKafka's DML names no key: each table's comes from its CREATE TABLE. The dropped table's rows (emptied by the
    # drop) keep the first CREATE's key, the new table's rows the second's; nothing is quarantined.
    db = f"ckrecreate{uuid.uuid4().hex[:6]}"
    apply_messages(spark, session_lake, db, "0", [
        _create(db, "t"), _insert(db, "t", 100, id="1", v="old"),
        _ddl(db, "t", "ERASE", "DROP TABLE `t`"),
        _ddl(db, "t", "CREATE", "CREATE TABLE `t` (`code` varchar(8) NOT NULL PRIMARY KEY, `v` int)"),
        _insert(db, "t", 200, code="k", v="7"),
    ], fmt="ckafka")
    tables = _tables(session_lake, db)
    aside = [t for t in tables if t.startswith(f"{db}.t__displaced_")]
    assert len(aside) == 1, tables
    assert tables == {f"{db}.t": [{"code": "k", "v": 7}], aside[0]: []}


def test_a_truncate_placed_after_a_row_change_stays_after_that_change_delivered_again(spark, session_lake) -> None:
    # The TRUNCATE has no position: it takes the position of the row change before it (alone in its batch: the
    # table's last one in the earlier batches). A copy of that change delivered again in a later batch (Kafka
    # delivers at least once) is older than the TRUNCATE, not a row written after it.
    db = f"cktrunc{uuid.uuid4().hex[:6]}"
    apply_messages(spark, session_lake, db, "0", [
        _create(db, "t"), _create(db, "u"),
        _insert(db, "t", 100, id="1", v="a"), _insert(db, "t", 200, id="2", v="b"),
        _insert(db, "u", 210, id="1", v="a"),
    ], fmt="ckafka")
    apply_messages(spark, session_lake, db, "1", [
        _insert(db, "t", 300, id="3", v="c"),
        _ddl(db, "t", "TRUNCATE", "TRUNCATE TABLE `t`"),
        _ddl(db, "u", "TRUNCATE", "TRUNCATE TABLE `u`"),
    ], fmt="ckafka")
    again = apply_messages(spark, session_lake, db, "2", [
        _insert(db, "t", 200, id="2", v="b"), _insert(db, "t", 300, id="3", v="c"),
        _insert(db, "u", 210, id="1", v="a"),
    ], fmt="ckafka")
    assert _tables(session_lake, db) == {f"{db}.t": [], f"{db}.u": []}
    assert (again[f"{db}.t"].skipped_stale, again[f"{db}.u"].skipped_stale) == (2, 1)


def test_a_table_renamed_then_dropped_or_truncated_or_altered_is_changed_under_its_new_name(spark,
                                                                                          session_lake) -> None:
    # Statements without positions after a RENAME TABLE: they are ordered by the table's changes under its old
    # name (in this batch or earlier ones), not skipped as naming a table the lake does not have. The swap is what
    # pt-online-schema-change and gh-ost end a migration with; the old table is then dropped.
    db = f"ckrenamed{uuid.uuid4().hex[:6]}"
    apply_messages(spark, session_lake, db, "0", [
        _create(db, "t"), _create(db, "_t_new"), _create(db, "a"), _create(db, "b"), _create(db, "c"),
        _insert(db, "t", 100, id="1", v="old"), _insert(db, "_t_new", 110, id="1", v="new"),
        _insert(db, "a", 120, id="1", v="a"), _insert(db, "b", 130, id="1", v="b"),
        _insert(db, "c", 140, id="1", v="c"),
        _create(db, "w"), _create(db, "_w_new"),
        _insert(db, "w", 150, id="1", v="old"), _insert(db, "_w_new", 160, id="2", v="new"),
    ], fmt="ckafka")
    apply_messages(spark, session_lake, db, "1", [
        _ddl(db, "t", "RENAME", f"RENAME TABLE `{db}`.`t` TO `{db}`.`_t_old`, `{db}`.`_t_new` TO `{db}`.`t`"),
        _ddl(db, "_t_old", "ERASE", f"DROP TABLE IF EXISTS `{db}`.`_t_old` /* generated by server */"),
        _ddl(db, "a2", "RENAME", "RENAME TABLE `a` TO `a2`"),
        _ddl(db, "a2", "TRUNCATE", "TRUNCATE TABLE `a2`"),
        _ddl(db, "b2", "RENAME", "RENAME TABLE `b` TO `b2`"),
        _ddl(db, "b2", "ALTER", "ALTER TABLE `b2` ADD COLUMN `n` int NOT NULL DEFAULT 5"),
        _ddl(db, "c_old", "RENAME", "RENAME TABLE `c` TO `c_old`"),
        _ddl(db, "w", "RENAME", f"RENAME TABLE `{db}`.`w` TO `{db}`.`_w_old`, `{db}`.`_w_new` TO `{db}`.`w`"),
    ], fmt="ckafka")
    # alone in a later batch: ordered by the changes the table had under its earlier names
    apply_messages(spark, session_lake, db, "2", [_ddl(db, "c_old", "ERASE", "DROP TABLE `c_old`"),
                                                  _ddl(db, "_w_old", "ERASE", "DROP TABLE `_w_old`")], fmt="ckafka")
    tables = _tables(session_lake, db)
    assert {tid: rows for tid, rows in tables.items() if "__displaced_" not in tid} == {
        f"{db}.t": [{"id": 1, "v": "new"}], f"{db}.a2": [], f"{db}.b2": [{"id": 1, "v": "b", "n": 5}],
        f"{db}.c_old": [], f"{db}._t_old": [], f"{db}.w": [{"id": 2, "v": "new"}], f"{db}._w_old": []}
    assert all(rows == [] for tid, rows in tables.items() if "__displaced_" in tid), tables


def test_a_truncate_among_changes_without_positions_keeps_arrival_order(spark, session_lake) -> None:
    # canal messages with `id` 0 (TiCDC without its extension, hand-made streams) have no position: the TRUNCATE
    # comes after the row before it, and the next batch's rows come after the TRUNCATE.
    db = f"cantrunc{uuid.uuid4().hex[:6]}"

    def message(kind: str, es: int, **fields: Any) -> dict[str, Any]:
        return {"id": 0, "database": db, "table": "t", "pkNames": ["k"], "isDdl": kind == "TRUNCATE", "type": kind,
                "es": es, "ts": es, "sql": "", "sqlType": {"k": 4, "v": 12},
                "mysqlType": {"k": "int", "v": "varchar(10)"}, "data": None, "old": None, **fields}

    apply_messages(spark, session_lake, db, "0", [
        message("INSERT", 1700000000000, data=[{"k": "1", "v": "a"}]),
        message("TRUNCATE", 1700000001000, sql="TRUNCATE TABLE t", pkNames=None, sqlType=None, mysqlType=None),
    ], fmt="canal")
    apply_messages(spark, session_lake, db, "1", [message("INSERT", 1700000002000, data=[{"k": "2", "v": "b"}])],
                   fmt="canal")
    assert dump_rows(session_lake, f"{db}.t") == [{"k": 2, "v": "b"}]


@pytest.mark.parametrize("es", [1700000000000, None], ids=["one-es", "no-es"])
def test_statements_among_changes_without_ids_stay_before_the_next_batchs_changes_of_their_es(
        spark, session_lake, es: int | None) -> None:
    # canal messages with `id` 0 are ordered by `es` (one second in MySQL), then arrival: a TRUNCATE or an ADD
    # COLUMN .. DEFAULT placed after a row change of that `es` comes before the next batch's changes of the same
    # `es` (or of none), which then stay: the row inserted after the TRUNCATE, the NULL written after the ADD.
    db = f"canes{uuid.uuid4().hex[:6]}"

    def message(table: str, kind: str, **fields: Any) -> dict[str, Any]:
        return {"id": 0, "database": db, "table": table, "pkNames": ["k"], "isDdl": kind in ("TRUNCATE", "ALTER"),
                "type": kind, "ts": 1700000000005, "sql": "", "sqlType": {"k": 4, "v": 12},
                "mysqlType": {"k": "int", "v": "varchar(10)"}, "data": None, "old": None,
                **({"es": es} if es else {}), **fields}

    ddl: dict[str, Any] = {"pkNames": None, "sqlType": None, "mysqlType": None}
    apply_messages(spark, session_lake, db, "0", [
        message("t", "INSERT", data=[{"k": "1", "v": "a"}]),
        message("t", "TRUNCATE", sql="TRUNCATE TABLE t", **ddl),
        message("u", "INSERT", data=[{"k": "1", "v": "a"}]),
        message("u", "ALTER", sql="ALTER TABLE u ADD COLUMN c int DEFAULT 5", **ddl),
    ])
    apply_messages(spark, session_lake, db, "1", [
        message("t", "INSERT", data=[{"k": "2", "v": "b"}]),
        message("u", "INSERT", data=[{"k": "2", "v": "b", "c": None}], sqlType={"k": 4, "v": 12, "c": 4},
                mysqlType={"k": "int", "v": "varchar(10)", "c": "int"}),
    ])
    assert _tables(session_lake, db) == {f"{db}.t": [{"k": 2, "v": "b"}],
                                         f"{db}.u": [{"k": 1, "v": "a", "c": 5}, {"k": 2, "v": "b", "c": None}]}
