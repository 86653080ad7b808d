"""DDL statements and row changes within one batch, where the order of the messages decides: a column dropped and
added again, and statements that share a source position (canal's binlog second and batch id). The expected rows
are written out by hand: what MySQL holds after the statements."""

from __future__ import annotations

import uuid

import pytest

from cdclake.reader import dump_rows, list_tables
from tests.support.canal_batches import apply_messages, canal

# In the extended tier (8 minutes of a CI worker; a schema change between row changes of one batch also runs in CI,
# in the seed and external-stream tests): `CDCLAKE_TESTS=all ./.ci/run`.
pytestmark = pytest.mark.extended


def _ddl(database: str, sql: str, position: int, kind: str = "ALTER", table: str = "items") -> dict[str, object]:
    return {"data": None, "database": database, "es": position, "id": position, "isDdl": True, "mysqlType": None,
            "old": None, "pkNames": None, "sql": sql, "sqlType": None, "table": table, "ts": position,
            "type": kind}


def test_a_column_dropped_and_added_again_in_one_batch_starts_empty(spark, session_lake) -> None:
    source = f"dropadd_{uuid.uuid4().hex[:6]}"
    empty, defaulted, tied = (f"{name}{uuid.uuid4().hex[:6]}" for name in ("empty", "defaulted", "tied"))
    messages = []
    for db, add, at in ((empty, "ADD COLUMN `name` varchar(20)", 1),
                        (defaulted, "ADD COLUMN `name` varchar(20) DEFAULT 'z'", 1),
                        (tied, "ADD COLUMN `name` varchar(20)", 0)):  # tied: every message in one canal second
        messages += [
            canal(db, "INSERT", [{"id": "1", "name": "a"}, {"id": "3", "name": "c"}], 10),
            canal(db, "UPDATE", [{"id": "3", "name": "c2"}], 10 + at, old=[{"name": "c"}]),
            _ddl(db, "ALTER TABLE `items` DROP COLUMN `name`", 10 + 2 * at),
            _ddl(db, f"ALTER TABLE `items` {add}", 10 + 3 * at),
            canal(db, "INSERT", [{"id": "2", "name": "b"}], 10 + 4 * at),
            canal(db, "UPDATE", [{"id": "3", "name": "c3"}], 10 + 5 * at, old=[{"name": None}]),
        ]
    apply_messages(spark, session_lake, source, "0", messages)

    def rows(db: str) -> list[tuple[int, str | None]]:
        return [(r["id"], r["name"]) for r in dump_rows(session_lake, f"{db}.items")]

    assert {"empty": rows(empty), "defaulted": rows(defaulted), "tied": rows(tied)} == {
        "empty": [(1, None), (2, "b"), (3, "c3")],
        "defaulted": [(1, "z"), (2, "b"), (3, "c3")],
        "tied": [(1, None), (2, "b"), (3, "c3")],
    }


def test_statements_that_share_a_source_position_apply_in_message_order(spark, session_lake) -> None:
    source = f"tieddl_{uuid.uuid4().hex[:6]}"
    columns, tables = (f"{name}{uuid.uuid4().hex[:6]}" for name in ("columns", "tables"))
    titled = {"id": ("int", 4), "title": ("varchar(20)", 12)}
    create = "CREATE TABLE `items` (`id` int NOT NULL, `name` varchar(20), PRIMARY KEY (`id`))"
    messages = [
        # the same RENAME COLUMN twice, with the way back between: three statements, not a copy of the first
        canal(columns, "INSERT", [{"id": "1", "name": "a"}], 7),
        _ddl(columns, "ALTER TABLE `items` RENAME COLUMN `name` TO `title`", 7),
        _ddl(columns, "ALTER TABLE `items` RENAME COLUMN `title` TO `name`", 7),
        _ddl(columns, "ALTER TABLE `items` RENAME COLUMN `name` TO `title`", 7),
        canal(columns, "INSERT", [{"id": "2", "title": "b"}], 7, types=titled),
        # a table renamed away and its name created again: the rows before the rename stay with the renamed table
        canal(tables, "INSERT", [{"id": "1", "name": "a"}], 7),
        _ddl(tables, "RENAME TABLE `items` TO `moved`", 7, kind="RENAME"),
        _ddl(tables, create, 7, kind="CREATE"),
        canal(tables, "INSERT", [{"id": "2", "name": "b"}], 7),
    ]
    apply_messages(spark, session_lake, source, "0", messages)
    lake = {tid: dump_rows(session_lake, tid) for tid in (f"{columns}.items", f"{tables}.moved", f"{tables}.items")
            if tid in set(list_tables(session_lake))}
    assert lake == {f"{columns}.items": [{"id": 1, "title": "a"}, {"id": 2, "title": "b"}],
                    f"{tables}.moved": [{"id": 1, "name": "a"}], f"{tables}.items": [{"id": 2, "name": "b"}]}


def test_a_mysql_not_null_column_added_without_a_default_fills_the_earlier_rows_with_its_types(spark,
                                                                                                session_lake) -> None:
    db = f"implicit{uuid.uuid4().hex[:6]}"
    added = {**{"id": ("int", 4), "name": ("varchar(20)", 12)}, "n": ("int", 4), "e": ("enum('x','y')", 4),
             "s": ("varchar(10)", 12), "u": ("int", 4)}
    apply_messages(spark, session_lake, db, "0", [
        canal(db, "INSERT", [{"id": "1", "name": "a"}], 10),
        _ddl(db, "ALTER TABLE `items` ADD COLUMN `n` int NOT NULL, ADD COLUMN `e` enum('x','y') NOT NULL, "
                 "ADD COLUMN `s` varchar(10) NOT NULL COMMENT 'label', ADD COLUMN `u` int NOT NULL DEFAULT 7", 11),
        canal(db, "INSERT", [{"id": "2", "name": "b", "n": "3", "e": "y", "s": "t", "u": "4"}], 12, types=added),
    ])
    assert dump_rows(session_lake, f"{db}.items") == [
        {"id": 1, "name": "a", "n": 0, "e": "x", "s": "", "u": 7},
        {"id": 2, "name": "b", "n": 3, "e": "y", "s": "t", "u": 4}]


def test_a_change_from_before_an_added_default_that_arrives_later_takes_the_default(spark, session_lake) -> None:
    # Out of order, or a quarantined change replayed after the ALTER's batch: MySQL filled its row too.
    db = f"latefill{uuid.uuid4().hex[:6]}"
    with_c = {"id": ("int", 4), "name": ("varchar(20)", 12), "c": ("int", 4)}
    batches = [
        [canal(db, "INSERT", [{"id": "1", "name": "a"}], 100)],
        [_ddl(db, "ALTER TABLE `items` ADD COLUMN `c` int DEFAULT 5", 300)],
        [canal(db, "INSERT", [{"id": "4", "name": "d"}], 150),
         canal(db, "INSERT", [{"id": "5", "name": "e", "c": "6"}], 400, types=with_c)],
        # dropped and added again without a default: rows from before start empty, late ones too
        [_ddl(db, "ALTER TABLE `items` DROP COLUMN `c`", 500), _ddl(db, "ALTER TABLE `items` ADD COLUMN `c` int", 510)],
        [canal(db, "INSERT", [{"id": "6", "name": "f"}], 200)],
    ]
    lake = []
    for n, messages in enumerate(batches):
        apply_messages(spark, session_lake, db, str(n), messages)
        lake.append([(r["id"], r.get("c")) for r in dump_rows(session_lake, f"{db}.items")])
    assert lake[2] == [(1, 5), (4, 5), (5, 6)]
    assert lake[4] == [(1, None), (4, None), (5, None), (6, None)]


def test_a_default_added_in_a_batch_follows_its_column_through_a_later_rename_or_drop(spark, session_lake) -> None:
    # MySQL filled the ADD's default into the rows before it; a RENAME COLUMN later in the batch keeps those values
    # under the new name, a DROP COLUMN removes them (a column added again starts empty).
    source = f"defren_{uuid.uuid4().hex[:6]}"
    renamed, readded = (f"{name}{uuid.uuid4().hex[:6]}" for name in ("renamed", "readded"))
    messages = []
    for db, then, column in ((renamed, "RENAME COLUMN `c` TO `d`", "d"), (readded, "DROP COLUMN `c`", "c")):
        messages += [canal(db, "INSERT", [{"id": "1", "name": "a"}], 10),
                     _ddl(db, "ALTER TABLE `items` ADD COLUMN `c` int NOT NULL DEFAULT 5", 20),
                     _ddl(db, f"ALTER TABLE `items` {then}", 30)]
        if db == readded:
            messages.append(_ddl(db, "ALTER TABLE `items` ADD COLUMN `c` int", 40))
        messages.append(canal(db, "INSERT", [{"id": "2", "name": "b", column: "6"}], 50,
                              types={"id": ("int", 4), "name": ("varchar(20)", 12), column: ("int", 4)}))
    apply_messages(spark, session_lake, source, "0", messages)
    assert {db: dump_rows(session_lake, f"{db}.items") for db in (renamed, readded)} == {
        renamed: [{"id": 1, "name": "a", "d": 5}, {"id": 2, "name": "b", "d": 6}],
        readded: [{"id": 1, "name": "a", "c": None}, {"id": 2, "name": "b", "c": 6}],
    }


def test_one_alter_table_that_renames_or_drops_a_column_and_defines_one_of_that_name(spark, session_lake) -> None:
    # MySQL runs a statement's renames and drops before its added and changed columns. `CHANGE c c bigint`, the
    # usual way to widen a column, keeps the lake's column: it was quarantined as a rename onto an existing
    # column (a rename that changes only the case still is: Spark's column names ignore case). A column dropped
    # or renamed away and added again with a DEFAULT in one statement holds the default in the older rows (it was
    # missing from the table).
    source = f"oneddl_{uuid.uuid4().hex[:6]}"
    widened, moved, readded = (f"{n}{uuid.uuid4().hex[:6]}" for n in ("widened", "moved", "readded"))
    as_int = {"id": ("int", 4), "c": ("int", 4)}
    apply_messages(spark, session_lake, source, "0", [
        canal(db, "INSERT", [{"id": "1", "c": "5"}], 10, types=as_int) for db in (widened, moved, readded)])
    apply_messages(spark, session_lake, source, "1", [
        _ddl(widened, "ALTER TABLE `items` CHANGE COLUMN `c` `c` bigint NOT NULL", 20),
        canal(widened, "INSERT", [{"id": "2", "c": "5000000000"}], 30, types={**as_int, "c": ("bigint", -5)}),
        # No row after these: the statement alone defines the table's columns.
        _ddl(moved, "ALTER TABLE `items` RENAME COLUMN `c` TO `d`, ADD COLUMN `c` varchar(5) DEFAULT 'x'", 20),
        _ddl(readded, "ALTER TABLE `items` DROP COLUMN `c`, ADD COLUMN `c` int DEFAULT 7", 20),
    ])
    assert {db: dump_rows(session_lake, f"{db}.items") for db in (widened, moved, readded)} == {
        widened: [{"id": 1, "c": 5}, {"id": 2, "c": 5000000000}],
        moved: [{"id": 1, "d": 5, "c": "x"}],
        readded: [{"id": 1, "c": 7}],
    }


def test_enum_and_set_numbers_are_read_by_each_messages_own_member_list(spark, session_lake) -> None:
    # canal sends an enum's index (sqlType 4) and a set's bitmask (-7); a batch holds messages from before and after
    # an ALTER that changed the lists: `2` is `c` of enum('a','c') and `b` of enum('a','b','c').
    db = f"enums{uuid.uuid4().hex[:6]}"
    before = {"id": ("int", 4), "en": ("enum('a','c')", 4), "st": ("set('x','z')", -7)}
    after = {"id": ("int", 4), "en": ("enum('a','b','c')", 4), "st": ("set('x','y','z')", -7)}
    apply_messages(spark, session_lake, db, "0", [
        canal(db, "INSERT", [{"id": "1", "en": "2", "st": "2"}], 100, types=before),
        {**canal(db, "ALTER", [], 110), "data": None, "isDdl": True, "mysqlType": None, "sqlType": None,
         "sql": "ALTER TABLE items MODIFY en enum('a','b','c'), MODIFY st set('x','y','z')"},
        canal(db, "INSERT", [{"id": "2", "en": "3", "st": "4"}, {"id": "3", "en": "2", "st": "3"}], 120,
              types=after),
    ])
    assert dump_rows(session_lake, f"{db}.items") == [
        {"id": 1, "en": "c", "st": "z"}, {"id": 2, "en": "c", "st": "z"}, {"id": 3, "en": "b", "st": "x,y"}]


def test_a_column_dropped_and_added_again_with_another_type_keeps_its_history_aside(spark, session_lake) -> None:
    # The changelog (and history) keep a dropped column's values; the column added again as another type must not
    # make every later apply of the table fail on them.
    from cdclake.apply import changelog_table_id
    from cdclake.settings import CATALOG_NAME

    db = f"retype{uuid.uuid4().hex[:6]}"
    as_int = {"id": ("int", 4), "c": ("int", 4)}
    as_text = {"id": ("int", 4), "c": ("varchar(10)", 12)}
    apply_messages(spark, session_lake, db, "0", [canal(db, "INSERT", [{"id": "1", "c": "5"}], 100, types=as_int)])
    apply_messages(spark, session_lake, db, "1", [_ddl(db, "ALTER TABLE `items` DROP COLUMN `c`", 200),
                                                  canal(db, "INSERT", [{"id": "2"}], 210, types={"id": ("int", 4)})])
    apply_messages(spark, session_lake, db, "2", [_ddl(db, "ALTER TABLE `items` ADD COLUMN `c` varchar(10)", 300),
                                                  canal(db, "INSERT", [{"id": "3", "c": "abc"}], 310, types=as_text)])
    assert dump_rows(session_lake, f"{db}.items") == [{"id": 1, "c": None}, {"id": 2, "c": None},
                                                      {"id": 3, "c": "abc"}]
    changelog = spark.table(f"{CATALOG_NAME}.{changelog_table_id(f'{db}.items')}")
    assert sorted((r["id"], r["c"], r["c__1"]) for r in changelog.collect()) == [
        (1, None, 5), (2, None, None), (3, "abc", None)]


def test_a_table_dropped_and_created_again_starts_with_its_new_columns_and_key(spark, session_lake) -> None:
    # MySQL after `DROP TABLE items; CREATE TABLE items (...)` holds only the new table: its columns (a name reused
    # with another type, a dropped column's name back) and its key, not the dropped table's.
    later, same, fresh = (f"{name}{uuid.uuid4().hex[:6]}" for name in ("later", "same", "fresh"))
    old_types = {"id": ("int", 4), "name": ("varchar(20)", 12), "gone": ("int", 4)}
    new_types = {"code": ("varchar(8)", 12), "name": ("int", 4), "gone": ("int", 4)}
    create = ("CREATE TABLE `items` (`code` varchar(8) NOT NULL, `name` int, `gone` int, "
              "PRIMARY KEY (`code`))")

    def recreated(db: str, at: int) -> list[dict[str, object]]:
        row = canal(db, "INSERT", [{"code": "k", "name": "7", "gone": "8"}], at + 2, types=new_types)
        return [_ddl(db, "DROP TABLE `items`", at, kind="ERASE"), _ddl(db, create, at + 1, kind="CREATE"),
                {**row, "pkNames": ["code"]}]

    for db in (later, same):
        history = [canal(db, "INSERT", [{"id": "1", "name": "a", "gone": "1"}], 10, types=old_types),
                   _ddl(db, "ALTER TABLE `items` DROP COLUMN `gone`", 11),
                   canal(db, "INSERT", [{"id": "2", "name": "b"}], 12)]
        if db == later:  # the drop and the new table in a later batch than the dropped table's rows
            apply_messages(spark, session_lake, db, "0", history)
            apply_messages(spark, session_lake, db, "1", recreated(db, 20))
        else:
            apply_messages(spark, session_lake, db, "0", history + recreated(db, 20))
    # a test script's `DROP TABLE IF EXISTS` of a table the lake never had: no table moved aside
    apply_messages(spark, session_lake, fresh, "0", [
        _ddl(fresh, "DROP TABLE IF EXISTS `items`", 5, kind="ERASE"), *recreated(fresh, 6)[1:]])

    tables = set(list_tables(session_lake))
    for db in (later, same, fresh):
        assert dump_rows(session_lake, f"{db}.items") == [{"code": "k", "name": 7, "gone": 8}], db
        aside = sorted(t for t in tables if t.startswith(f"{db}.items__displaced_"))
        if db == fresh:
            assert aside == [], tables
        else:  # the dropped table, emptied, with its history
            assert len(aside) == 1 and dump_rows(session_lake, aside[0]) == [], tables


def test_an_older_batch_applied_again_after_its_table_was_dropped_and_created_again_changes_nothing(
        spark, session_lake) -> None:
    # The older batch's CREATE TABLE and ALTER TABLE describe the dropped table: applied again after the new table
    # was made, they gave the new table the dropped table's columns (`v`, `z`), as empty columns.
    from cdclake.normalize import normalize_batch
    from cdclake.pipeline import apply_batch
    from tests.support.canal_batches import land_messages

    db = f"redo{uuid.uuid4().hex[:6]}"
    old_types = {"id": ("int", 4), "v": ("varchar(20)", 12)}
    new_types = {"id": ("int", 4), "w": ("int", 4)}
    older = land_messages(session_lake, db, "0", [
        _ddl(db, "CREATE TABLE `items` (`id` int NOT NULL, `v` varchar(20), PRIMARY KEY (`id`))", 10, kind="CREATE"),
        canal(db, "INSERT", [{"id": "1", "v": "a"}], 11, types=old_types),
        _ddl(db, "ALTER TABLE `items` ADD COLUMN `z` int", 12),
    ])
    newer = land_messages(session_lake, db, "1", [
        _ddl(db, "DROP TABLE `items`", 20, kind="ERASE"),
        _ddl(db, "CREATE TABLE `items` (`id` int NOT NULL, `w` int, PRIMARY KEY (`id`))", 21, kind="CREATE"),
        canal(db, "INSERT", [{"id": "5", "w": "50"}], 22, types=new_types),
    ])
    for batch_id in (older, newer, older):
        assert normalize_batch(spark, session_lake, source=db, batch_id=batch_id, fmt="canal").quarantined == 0
        apply_batch(spark, session_lake, source=db, batch_id=batch_id)
    assert dump_rows(session_lake, f"{db}.items") == [{"id": 5, "w": 50}]
    aside = [t for t in list_tables(session_lake) if t.startswith(f"{db}.items__displaced_")]
    assert len(aside) == 1 and dump_rows(session_lake, aside[0]) == [], aside


def test_a_dropped_database_drops_the_tables_its_batch_knows_only_by_rows(spark, session_lake) -> None:
    # The batch is the lake's first of the database: its tables are known only by their rows when it drops it.
    # Normalized and applied again, the batch changes nothing.
    from cdclake.normalize import normalize_batch
    from cdclake.pipeline import apply_batch
    from tests.support.canal_batches import land_messages

    db = f"dropdb{uuid.uuid4().hex[:6]}"
    new_a = {"code": ("varchar(8)", 12), "name": ("int", 4)}
    messages = [
        {**canal(db, "INSERT", [{"id": "1", "name": "a"}], 50), "table": "a"},
        {**canal(db, "INSERT", [{"id": "1", "name": "b"}], 51), "table": "b"},
        _ddl(db, f"DROP DATABASE `{db}`", 52, kind="QUERY", table=""),
        _ddl(db, f"CREATE DATABASE `{db}`", 53, kind="QUERY", table=""),
        _ddl(db, "CREATE TABLE `a` (`code` varchar(8) NOT NULL, `name` int, PRIMARY KEY (`code`))", 54,
             kind="CREATE", table="a"),
        {**canal(db, "INSERT", [{"code": "k", "name": "7"}], 55, types=new_a), "table": "a", "pkNames": ["code"]},
    ]
    batch_id = land_messages(session_lake, db, "0", messages)
    expected = {f"{db}.a": [{"code": "k", "name": 7}], f"{db}.b": []}
    for _ in range(2):
        assert normalize_batch(spark, session_lake, source=db, batch_id=batch_id, fmt="canal").quarantined == 0
        apply_batch(spark, session_lake, source=db, batch_id=batch_id)
        tables = {t: dump_rows(session_lake, t) for t in list_tables(session_lake) if t.startswith(f"{db}.")}
        aside = [t for t in tables if t.startswith(f"{db}.a__displaced_")]
        assert len(aside) == 1 and tables == {**expected, aside[0]: []}, tables


def test_statements_that_spell_a_column_in_another_case_change_that_column(spark, session_lake) -> None:
    # MySQL's column names ignore case: `RENAME COLUMN NAME TO title` renames the column `name` that the rows spell.
    # The rename's older rows (before it in the batch or in an earlier batch) move to the new name with it.
    db = f"casespelled{uuid.uuid4().hex[:6]}"
    titled = {"id": ("int", 4), "title": ("varchar(20)", 12)}
    labelled = {"id": ("int", 4), "label": ("varchar(20)", 12)}
    batches = [
        [canal(db, "INSERT", [{"id": "1", "name": "a"}], 10),  # the table is made by this batch
         _ddl(db, "ALTER TABLE `items` RENAME COLUMN `NAME` TO `title`", 11),
         canal(db, "INSERT", [{"id": "2", "title": "b"}], 12, types=titled)],
        [canal(db, "UPDATE", [{"id": "2", "title": "c"}], 14, old=[{"title": "b"}], types=titled),
         _ddl(db, "ALTER TABLE `items` CHANGE `TITLE` `label` varchar(20)", 15),  # a column of the lake table
         canal(db, "INSERT", [{"id": "3", "label": "d"}], 16, types=labelled)],
        [canal(db, "INSERT", [{"id": "4", "label": "e"}], 17, types=labelled),
         _ddl(db, "ALTER TABLE `items` MODIFY `LABEL` varchar(40), ADD COLUMN `N` int", 18),
         canal(db, "INSERT", [{"id": "5", "label": "f", "n": "1"}], 19, types={**labelled, "n": ("int", 4)}),
         _ddl(db, "ALTER TABLE `items` DROP COLUMN `Label`", 20),
         canal(db, "INSERT", [{"id": "6", "n": "2"}], 21, types={"id": ("int", 4), "n": ("int", 4)})],
    ]
    seen = []
    for batch_id, messages in enumerate(batches):
        apply_messages(spark, session_lake, db, str(batch_id), messages)
        seen.append(dump_rows(session_lake, f"{db}.items"))
    assert seen == [
        [{"id": 1, "title": "a"}, {"id": 2, "title": "b"}],
        [{"id": 1, "label": "a"}, {"id": 2, "label": "c"}, {"id": 3, "label": "d"}],
        [{"id": i, "N": n} for i, n in [(1, None), (2, None), (3, None), (4, None), (5, 1), (6, 2)]],
    ]


def test_a_column_renamed_dropped_and_added_again_takes_no_value_of_its_old_name(spark, session_lake) -> None:
    db = f"renamedrop{uuid.uuid4().hex[:6]}"
    apply_messages(spark, session_lake, db, "0", [
        canal(db, "INSERT", [{"id": "1", "name": "a"}], 10),
        _ddl(db, "ALTER TABLE `items` RENAME COLUMN `name` TO `title`", 11),
        _ddl(db, "ALTER TABLE `items` DROP COLUMN `TITLE`", 12),
        _ddl(db, "ALTER TABLE `items` ADD COLUMN `Title` int", 13),
        canal(db, "INSERT", [{"id": "2", "Title": "5"}], 14, types={"id": ("int", 4), "Title": ("int", 4)}),
    ])
    assert dump_rows(session_lake, f"{db}.items") == [{"id": 1, "Title": None}, {"id": 2, "Title": 5}]


def test_a_primary_key_changed_within_a_batch_keys_the_batch_by_the_columns_of_both(spark, session_lake) -> None:
    # `ALTER TABLE items DROP PRIMARY KEY, ADD PRIMARY KEY (...)` between row changes of one batch: MySQL then holds
    # rows that share the old key's values (widened) or rows the old key told apart, one deleted before (narrowed).
    wide, narrow = (f"{name}{uuid.uuid4().hex[:6]}" for name in ("wide", "narrow"))
    types = {"id": ("int", 4), "region": ("varchar(8)", 12), "v": ("int", 4)}

    def row(db: str, kind: str, rows: list[dict[str, str]], at: int, key: list[str],
            old: list[dict[str, str]] | None = None) -> dict[str, object]:
        return {**canal(db, kind, rows, at, old=old, types=types), "pkNames": key}

    create = "CREATE TABLE `items` (`id` int NOT NULL, `region` varchar(8) NOT NULL, `v` int, PRIMARY KEY ({}))"
    apply_messages(spark, session_lake, wide, "0", [
        _ddl(wide, create.format("`id`"), 10, kind="CREATE"),
        row(wide, "INSERT", [{"id": "1", "region": "a", "v": "10"}], 11, ["id"]),
        _ddl(wide, "ALTER TABLE `items` DROP PRIMARY KEY, ADD PRIMARY KEY (`id`, `region`)", 12),
        row(wide, "INSERT", [{"id": "1", "region": "b", "v": "20"}], 13, ["id", "region"]),
        row(wide, "UPDATE", [{"id": "1", "region": "a", "v": "11"}], 14, ["id", "region"], old=[{"v": "10"}]),
    ])
    apply_messages(spark, session_lake, narrow, "0", [
        _ddl(narrow, create.format("`id`, `region`"), 10, kind="CREATE"),
        row(narrow, "INSERT", [{"id": "1", "region": "a", "v": "10"}, {"id": "1", "region": "b", "v": "20"}], 11,
            ["id", "region"]),
        row(narrow, "DELETE", [{"id": "1", "region": "b", "v": "20"}], 12, ["id", "region"]),
        _ddl(narrow, "ALTER TABLE `items` DROP PRIMARY KEY, ADD PRIMARY KEY (`id`)", 13),
        row(narrow, "UPDATE", [{"id": "1", "region": "c", "v": "11"}], 14, ["id"], old=[{"region": "a", "v": "10"}]),
    ])
    assert dump_rows(session_lake, f"{wide}.items") == [{"id": 1, "region": "a", "v": 11},
                                                        {"id": 1, "region": "b", "v": 20}]
    assert dump_rows(session_lake, f"{narrow}.items") == [{"id": 1, "region": "c", "v": 11}]


def test_a_table_renamed_and_then_dropped_in_one_batch_moves_no_table_aside(spark, session_lake) -> None:
    # gh-ost's cut-over then cleanup (`RENAME TABLE t TO _t_del, ..; DROP TABLE _t_del`): the name dropped was
    # taken by the rename, so there is no earlier `_t_del` to move aside (an empty `_t_del__displaced_*` was made).
    db = f"renamedrop{uuid.uuid4().hex[:6]}"
    apply_messages(spark, session_lake, db, "0", [
        _ddl(db, "CREATE TABLE `items` (`id` int NOT NULL, `name` varchar(20), PRIMARY KEY (`id`))", 9,
             kind="CREATE"),
        canal(db, "INSERT", [{"id": "1", "name": "a"}], 10),
        _ddl(db, "RENAME TABLE `items` TO `_items_del`", 11, kind="RENAME"),
        _ddl(db, "DROP TABLE IF EXISTS `_items_del` /* generated by server */", 12, kind="ERASE",
             table="_items_del"),
    ])
    assert sorted(t for t in list_tables(session_lake) if t.startswith(f"{db}.")) == [f"{db}._items_del"]
    assert dump_rows(session_lake, f"{db}._items_del") == []
