"""DDL policies without Spark: parsing declarations, what each policy makes of a statement, and the folded history
of renames and drops."""

from __future__ import annotations

import json

import pytest

from cdclake.ddl_history import History, displaced_table_id
from cdclake.exceptions import ConfigError
from cdclake.schema_changes import SKIP_ALTER, SKIP_ALTER_NO_COLUMN, DdlPolicies, LakeChange, interpret


def ddl_record(sql: str, index: int = 0, position: str | None = "0000000000000010") -> dict:
    return {"file_index": 0, "index": index, "row_index": 0, "ddl": sql, "source_pos": position,
            "input": "file:///in.json", "row_schema": json.dumps({"dialect": "mysql", "namespace": "shop"})}


def test_declarations_parse_with_a_default_and_per_table_entries() -> None:
    policies = DdlPolicies.parse(["ignore", "shop.orders=fail", "shop.audit_*=evolve"])
    assert policies.for_table("shop.orders") == "fail"
    assert policies.for_table("shop.audit_2026") == "evolve"
    assert policies.for_table("shop.items") == "ignore"
    assert DdlPolicies.parse(policies.to_list()) == policies
    with pytest.raises(ConfigError, match="expected \\[TABLE=\\]evolve\\|ignore\\|fail"):
        DdlPolicies.parse(["shop.orders=drop"])


def test_evolve_turns_renames_and_drops_into_lake_changes() -> None:
    outcome = interpret([
        ddl_record("ALTER TABLE items RENAME COLUMN name TO title", 0, "01"),
        ddl_record("ALTER TABLE items DROP COLUMN note", 1, "02"),
        ddl_record("RENAME TABLE orders TO orders_v2", 2, "03"),
        ddl_record("DROP TABLE tmp", 3, "04"),
    ])
    assert [(c.kind, c.table_id, c.old, c.new, c.position) for c in outcome.changes] == [
        ("rename_column", "shop.items", "name", "title", "01"),
        ("drop_column", "shop.items", "note", "", "02"),
        ("rename_table", "shop.orders", "shop.orders", "shop.orders_v2", "03"),
        ("drop_table", "shop.tmp", "shop.tmp", "", "04"),
    ]
    drop = outcome.records[3]
    assert (drop["status"], drop["op"], drop["table_id"]) == ("ok", "t", "shop.tmp")
    assert not outcome.stopped


def test_a_temporary_table_of_a_tables_name_changes_nothing_under_every_policy() -> None:
    # MySQL's binlog form, written when a session that made a temporary table `items` ends: the table `items` stays.
    for policy in ("evolve", "ignore", "fail"):
        outcome = interpret([ddl_record("DROP /*!40005 TEMPORARY */ TABLE IF EXISTS `items`"),
                             ddl_record("CREATE TEMPORARY TABLE items (id int PRIMARY KEY, v int)", 1)],
                            DdlPolicies(policy))
        assert [(r["status"], r["reason"]) for r in outcome.records] == [
            ("skip", "DDL temporary table: no effect on tables")] * 2, policy
        assert (outcome.changes, outcome.tables, outcome.stopped) == ([], {}, {}), policy


def test_ignore_skips_and_fail_stops_the_table() -> None:
    records = [ddl_record("ALTER TABLE items DROP COLUMN note"), ddl_record("TRUNCATE TABLE orders", 1)]
    ignored = interpret(records, DdlPolicies("ignore"))
    assert [r["status"] for r in ignored.records] == ["skip", "skip"]
    assert all("ddl_policy=ignore" in r["reason"] for r in ignored.records)
    assert not ignored.changes

    failed = interpret(records, DdlPolicies("evolve", {"shop.items": "fail"}))
    assert list(failed.stopped) == ["shop.items"]
    assert failed.records[0]["status"] == "quarantine" and "DROP COLUMN note" in failed.records[0]["reason"]
    assert (failed.records[1]["status"], failed.records[1]["op"]) == ("ok", "t")


def test_an_alter_table_that_changes_no_column_is_counted_as_such() -> None:
    # TiCDC's canal-json sends `ADD INDEX` as an ALTER (type CINDEX): it was counted with the ADD COLUMNs beside it
    # as "column types learned (a new column is added ...)", although it adds and teaches nothing.
    outcome = interpret([ddl_record("ALTER TABLE `jiawei_test2` ADD COLUMN `c1` INT"),
                         ddl_record("ALTER TABLE `jiawei_test2` ADD INDEX `idx_name`(`name`)", 1),
                         ddl_record("ALTER TABLE t ENGINE=InnoDB, COMMENT 'x'", 2),
                         ddl_record("ALTER TABLE t ALTER COLUMN c SET DEFAULT 5", 3)])
    assert [(r["status"], r["reason"]) for r in outcome.records] == [
        ("skip", SKIP_ALTER)] + [("skip", SKIP_ALTER_NO_COLUMN)] * 3
    assert ([c.kind for c in outcome.changes], outcome.stopped) == (["add_column"], {})


def test_a_partition_truncate_is_quarantined_with_its_reason_and_truncate_partition_all_truncates() -> None:
    for policy in ("evolve", "ignore", "fail"):
        outcome = interpret([ddl_record("ALTER TABLE orders TRUNCATE PARTITION p0"),
                             ddl_record("ALTER TABLE items TRUNCATE PARTITION ALL", 1)], DdlPolicies(policy))
        partition = outcome.records[0]
        assert partition["status"] == "quarantine", policy
        assert partition["reason"].startswith("DDL not supported: ALTER TABLE action 'TRUNCATE PARTITION p0' "
                                              "removes or replaces rows of partitions"), partition["reason"]
        assert not outcome.stopped.get("shop.orders"), policy
    outcome = interpret([ddl_record("ALTER TABLE items TRUNCATE PARTITION ALL")])
    assert (outcome.records[0]["status"], outcome.records[0]["op"], outcome.records[0]["table_id"]) == (
        "ok", "t", "shop.items")


def test_create_table_is_learned_under_every_policy() -> None:
    for policy in ("evolve", "ignore", "fail"):
        outcome = interpret([ddl_record("CREATE TABLE t (id int primary key, v varchar(3))")], DdlPolicies(policy))
        assert outcome.tables["shop.t"].key == ("id",) and not outcome.stopped


def test_create_table_if_not_exists_of_a_table_the_batch_knows_changes_nothing() -> None:
    # An application's start-up schema script writes its first version's CREATE TABLE IF NOT EXISTS at every
    # start, and MySQL logs it although the table exists: it must not take back the columns and key an ALTER gave.
    again = "CREATE TABLE IF NOT EXISTS t (id int PRIMARY KEY, v varchar(3))"
    outcome = interpret([ddl_record("CREATE TABLE t (id int, v varchar(3), PRIMARY KEY (id))", 0, "01"),
                         ddl_record("ALTER TABLE t ADD COLUMN n bigint, DROP PRIMARY KEY, ADD PRIMARY KEY (id, n)", 1,
                                    "02"),
                         ddl_record(again, 2, "03"),
                         ddl_record("ALTER TABLE u ADD COLUMN w int", 3, "04"),
                         ddl_record("CREATE TABLE IF NOT EXISTS u (id int PRIMARY KEY)", 4, "05"),
                         ddl_record("DROP TABLE t", 5, "06"), ddl_record(again, 6, "07")])
    assert [r["reason"] for r in outcome.records if r["ddl"].startswith("CREATE")] == [
        "DDL CREATE TABLE: key and column types learned",
        "DDL CREATE TABLE IF NOT EXISTS of a table the batch created or altered before it (and did not drop or "
        "rename away since): no effect at the source, nothing learned",
        "DDL CREATE TABLE IF NOT EXISTS of a table the batch created or altered before it (and did not drop or "
        "rename away since): no effect at the source, nothing learned",
        "DDL CREATE TABLE: key and column types learned"]
    dropped = outcome.dropped["shop.t"]
    assert (list(dropped.columns), dropped.key) == (["id", "v", "n"], ("id", "n"))
    assert (list(outcome.tables["shop.t"].columns), outcome.tables["shop.t"].key) == (["id", "v"], ("id",))
    assert (list(outcome.tables["shop.u"].columns), outcome.tables["shop.u"].key) == (["w"], ())

    # `ignore` and `fail` do not follow drops and renames away: the statement is read as a CREATE there.
    for policy in ("ignore", "fail"):
        outcome = interpret([ddl_record("CREATE TABLE t (id int PRIMARY KEY, v int)", 0, "01"),
                             ddl_record("DROP TABLE t", 1, "02"),
                             ddl_record("CREATE TABLE IF NOT EXISTS t (uid varchar(10) PRIMARY KEY, w text)", 2,
                                        "03")], DdlPolicies(policy))
        assert (list(outcome.tables["shop.t"].columns), outcome.tables["shop.t"].key) == (["uid", "w"], ("uid",))


def test_create_table_if_not_exists_of_a_table_the_lake_holds_changes_nothing() -> None:
    # The same start-up script in a later batch: the lake's table (its types and key) stands, unless the source
    # dropped it (in an earlier batch: the lake keeps it emptied; or in this one) or the batch renamed it.
    again = "CREATE TABLE IF NOT EXISTS {} (id int PRIMARY KEY, v varchar(3))"
    held = {"shop.t", "shop.gone", "shop.moved"}
    outcome = interpret([ddl_record(again.format("t"), 0, "01"), ddl_record(again.format("gone"), 1, "02"),
                         ddl_record("CREATE TABLE IF NOT EXISTS new (id int PRIMARY KEY)", 2, "03"),
                         ddl_record("RENAME TABLE moved TO elsewhere", 3, "04"),
                         ddl_record(again.format("moved"), 4, "05")],
                        lake_holds=lambda tid: tid in held - {"shop.gone"})
    assert [(r["table_id"], r["reason"]) for r in outcome.records if r["ddl"].startswith("CREATE")] == [
        ("shop.t", "DDL CREATE TABLE IF NOT EXISTS of a table the lake holds from earlier batches (not dropped or "
                   "renamed away since): no effect at the source, nothing learned"),
        ("shop.gone", "DDL CREATE TABLE: key and column types learned"),
        ("shop.new", "DDL CREATE TABLE: key and column types learned"),
        ("shop.moved", "DDL CREATE TABLE: key and column types learned")]
    assert sorted(outcome.tables) == ["shop.gone", "shop.moved", "shop.new"]
    for policy in ("ignore", "fail"):  # they follow no drops: the statement is read as a CREATE
        outcome = interpret([ddl_record(again.format("t"), 0, "01")], DdlPolicies(policy), lake_holds=held.__contains__)
        assert outcome.tables["shop.t"].key == ("id",)
    # A snapshot's statements describe the tables as they are
    outcome = interpret([{**ddl_record(again.format("t"), 0, "01"), "snapshot": "true"}], lake_holds=held.__contains__)
    assert outcome.tables["shop.t"].key == ("id",)


def test_a_column_definition_without_a_type_declares_no_type() -> None:
    # Oracle's MODIFY (sal NULL) changes only whether sal takes NULL; SQL Server's computed column has the type of
    # its expression, which the text does not give: neither may declare the column text.
    def record(sql: str, dialect: str, index: int) -> dict:
        return {**ddl_record(sql, index), "row_schema": json.dumps({"dialect": dialect, "namespace": "hr"})}

    outcome = interpret([record("ALTER TABLE emp MODIFY (sal NULL, bonus NUMBER(5))", "oracle", 0),
                         record("CREATE TABLE t (price int, total AS (price * 2) PERSISTED)", "tsql", 1)])
    assert list(outcome.tables["hr.emp"].columns) == ["bonus"]
    assert outcome.tables["hr.emp"].sql_types == {"bonus": ("oracle", "number(5)")}
    assert list(outcome.tables["hr.t"].columns) == ["price"]
    assert outcome.tables["hr.t"].sql_types == {"price": ("tsql", "int")}


def test_history_folds_chains_of_renames_drops_and_re_adds() -> None:
    history = History()
    for change in [
        LakeChange("rename_column", "s.t", "a", "b"),
        LakeChange("rename_column", "s.t", "b", "c"),
        LakeChange("drop_column", "s.t", "d"),
        LakeChange("rename_table", "s.t", "s.t", "s.u"),
        LakeChange("rename_table", "s.u", "s.u", "s.v"),
        LakeChange("add_column", "s.t", "d"),  # named by its old table id: routed
    ]:
        history.fold(change)
    assert history.route("s.t") == history.route("s.u") == "s.v"
    assert history.aliases("s.v") == {"a": "c", "b": "c"}
    assert history.dropped["s.v"] == set()

    history.fold(LakeChange("drop_column", "s.v", "c"))
    assert history.dropped["s.v"] == {"a", "b", "c"}
    assert history.aliases("s.v") == {}  # a column added again as `b` is not read from `a`


def test_history_matches_column_names_ignoring_case_as_mysql_does() -> None:
    history = History()
    for change in [
        LakeChange("rename_column", "s.t", "NAME", "title"),  # the rows spell it `name`
        LakeChange("rename_column", "s.t", "Title", "label"),
        LakeChange("drop_column", "s.t", "Note"),
    ]:
        history.fold(change)
    assert history.aliases("s.t") == {"name": "label", "title": "label"}
    assert history.dropped["s.t"] == {"note"}
    history.fold(LakeChange("drop_column", "s.t", "LABEL"))
    history.fold(LakeChange("add_column", "s.t", "Title"))
    assert (history.aliases("s.t"), history.dropped["s.t"]) == ({}, {"note", "name", "label"})


def test_a_renamed_away_table_name_created_again_is_a_new_table_for_newer_changes() -> None:
    history = History()
    history.fold(LakeChange("rename_table", "s.a", "s.a", "s.b", position="0000000a"), source="src", batch_id="2")
    assert history.route("s.a") == "s.b"
    # The table's own CREATE, from before the rename (an old batch replayed): routing stays.
    assert not history.fold(LakeChange("create_table", "s.a", "s.a", position="00000001"), source="src",
                            batch_id="1")
    assert history.route("s.a") == "s.b"
    # Without source positions, the batch decides; in one batch, the message order of the file.
    assert not history.fold(LakeChange("create_table", "s.a", "s.a", position="f.json#3"), source="src",
                            batch_id="1")
    # A newer CREATE takes the name back; changes before it still belong to the renamed table.
    assert history.fold(LakeChange("create_table", "s.a", "s.a", position="0000000f"), source="src", batch_id="3")
    assert history.route("s.a") == "s.a"
    mark, older_to = history.reused["s.a"]
    assert (mark.position, older_to) == ("0000000f", "s.b")
    # Later renames of the old table are followed from there.
    history.fold(LakeChange("rename_table", "s.b", "s.b", "s.c", position="00000010"), source="src", batch_id="3")
    assert history.route(history.reused["s.a"][1]) == "s.c"
    assert history.route("s.a") == "s.a"


def test_a_table_renamed_onto_a_name_takes_it_for_newer_changes() -> None:
    # gh-ost's cut-over: RENAME t TO _t_del, _t_gho TO t. Changes of t from before the second rename belong to the
    # table renamed away (_t_del); a name nobody renamed away (dropped at the source) is displaced instead.
    history = History()
    history.fold(LakeChange("rename_table", "s.t", "s.t", "s._t_del", position="0000000a"), source="src", batch_id="2")
    history.fold(LakeChange("rename_table", "s._t_gho", "s._t_gho", "s.t", position="0000000b"), source="src",
                 batch_id="2")
    assert history.route("s._t_gho") == "s.t" and history.route("s.t") == "s.t"
    mark, older_to = history.reused["s.t"]
    assert (mark.position, older_to) == ("0000000b", "s._t_del")

    history.fold(LakeChange("rename_table", "s.copy", "s.copy", "s.u", position="0000000c"), source="src",
                 batch_id="3")
    mark, older_to = history.reused["s.u"]
    assert older_to == displaced_table_id("s.u", mark) and older_to.startswith("s.u__displaced_")


def test_a_dropped_table_name_created_again_is_a_new_table_for_newer_changes() -> None:
    history = History()
    for change in [LakeChange("drop_column", "s.t", "c", position="00000001"),
                   LakeChange("drop_table", "s.t", "s.t", position="00000005")]:
        history.fold(change, source="src", batch_id="1")
    assert history.gone["s.t"].position == "00000005"
    # The table's CREATE from before its drop (an old batch replayed) takes nothing back.
    assert not history.fold(LakeChange("create_table", "s.t", "s.t", position="00000000"), source="src", batch_id="0")
    assert history.fold(LakeChange("create_table", "s.t", "s.t", position="00000007"), source="src", batch_id="2")
    mark, older_to = history.reused["s.t"]
    assert older_to == displaced_table_id("s.t", mark) and "s.t" not in history.gone
    # The dropped table's dropped column stays with it: the new table's column of that name is read.
    assert history.dropped.get("s.t", set()) == set() and history.dropped[older_to] == {"c"}
    # Created again without a drop in between: nothing to take back.
    assert not history.fold(LakeChange("create_table", "s.t", "s.t", position="00000009"), source="src", batch_id="2")


def test_create_table_under_evolve_becomes_a_lake_change() -> None:
    sql = "CREATE TABLE t (id int primary key, v varchar(3))"
    assert [c.kind for c in interpret([ddl_record(sql)], DdlPolicies("evolve")).changes] == ["create_table"]
    assert interpret([ddl_record(sql)], DdlPolicies("ignore")).changes == []


def test_a_statement_whose_table_has_no_known_database_is_quarantined_not_guessed() -> None:
    # dtle's SchemaChangeTopic message with an empty databaseName: the table would have been `default.w`, and the
    # ALTER was counted as learned while no lake table got the column.
    record = ddl_record("alter table w add column z2 int")
    record["row_schema"] = json.dumps({"dialect": "mysql", "namespace": ""})
    qualified = ddl_record("alter table a.w add column z2 int", 1)
    qualified["row_schema"] = record["row_schema"]
    outcome = interpret([record, qualified, ddl_record("DROP TABLE w", 2), ddl_record("SET NAMES utf8mb4", 3)])
    assert [r["status"] for r in outcome.records] == ["quarantine", "skip", "ok", "skip"]
    assert outcome.records[0]["reason"] == ("DDL alter table names table w without its database, and the message "
                                            "gives none (its databaseName or database is empty): the table it "
                                            "changes is unknown")
    assert list(outcome.tables) == ["a.w"] and outcome.records[2]["table_id"] == "shop.w"
