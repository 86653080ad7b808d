"""DDL policies end to end: a canal stream that renames and drops columns, renames and drops tables, applied with
``evolve``, ``ignore`` and ``fail`` and compared with a plain-Python replay of the same messages.

The oracle below reads the canal messages itself (values are strings, typed by the test's own column types) and
implements the policies as the README states them; it imports nothing from cdclake.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cdclake import ddl_stops, pipeline, source_tasks
from cdclake.reader import dump_rows, list_tables
from cdclake.schema_changes import DdlPolicies

# In the extended tier (7 minutes of a CI worker; the policies' rules have unit tests in CI,
# tests/unit/test_ddl_policy_rules.py): `CDCLAKE_TESTS=all ./.ci/run`.
pytestmark = pytest.mark.extended

INTS = {"id", "qty", "amount", "item"}
TYPES = {"id": "int", "qty": "int", "amount": "int", "item": "int", "name": "varchar(20)", "title": "varchar(20)",
         "note": "varchar(20)", "v": "varchar(5)"}


def row_message(pos: int, db: str, table: str, kind: str, rows: list[dict[str, Any]],
                old: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    as_text = [{k: None if v is None else str(v) for k, v in r.items()} for r in rows]
    return {"data": as_text, "database": db, "table": table, "es": 1700000000000 + pos, "ts": 1700000000050 + pos,
            "id": pos, "isDdl": False, "type": kind, "pkNames": ["id"], "sql": "", "old": old,
            "mysqlType": {c: TYPES[c] for c in rows[0]}, "sqlType": {c: 4 if c in INTS else 12 for c in rows[0]}}


def ddl_message(pos: int, db: str, table: str, kind: str, sql: str) -> dict[str, Any]:
    return {"data": None, "database": db, "table": table, "es": 1700000000000 + pos, "ts": 1700000000050 + pos,
            "id": pos, "isDdl": True, "type": kind, "pkNames": None, "sql": sql, "old": None, "mysqlType": None,
            "sqlType": None}


def stream(db: str) -> list[list[dict[str, Any]]]:
    """Four batches of one MySQL source (canal ids are the positions). The first batch renames a column of a
    table the lake does not have yet; the later ones change tables that exist, and the last creates a new table
    under a renamed-away name."""
    first = [
        row_message(1, db, "items", "INSERT", [{"id": 1, "name": "a", "qty": 1, "note": "x"},
                                               {"id": 2, "name": "b", "qty": 2, "note": "y"}]),
        row_message(2, db, "orders", "INSERT", [{"id": 10, "item": 1}]),
        row_message(3, db, "tmp", "INSERT", [{"id": 1, "v": "q"}]),
        ddl_message(4, db, "items", "ALTER", "ALTER TABLE items RENAME COLUMN name TO title"),
        row_message(5, db, "items", "UPDATE", [{"id": 1, "title": "a2", "qty": 1, "note": "x"}], [{"title": "a"}]),
        row_message(6, db, "items", "INSERT", [{"id": 3, "title": "c", "qty": 3, "note": "w"}]),
    ]
    second = [
        ddl_message(7, db, "items", "ALTER", "ALTER TABLE items DROP COLUMN note"),
        ddl_message(8, db, "orders", "RENAME", f"RENAME TABLE {db}.orders TO {db}.orders_v2"),
        row_message(9, db, "orders_v2", "INSERT", [{"id": 11, "item": 2}]),
        row_message(10, db, "orders_v2", "UPDATE", [{"id": 10, "item": 3}], [{"item": 1}]),
        ddl_message(11, db, "tmp", "ERASE", "DROP TABLE tmp"),
        ddl_message(12, db, "items", "ALTER", "ALTER TABLE items ADD COLUMN note varchar(20)"),
        row_message(13, db, "items", "UPDATE", [{"id": 2, "title": "b", "qty": 2, "note": "z"}], [{"note": None}]),
    ]
    third = [
        ddl_message(14, db, "items", "ALTER", "ALTER TABLE items RENAME COLUMN qty TO amount"),
        row_message(15, db, "items", "UPDATE", [{"id": 1, "title": "a2", "amount": 5, "note": None}],
                    [{"amount": 1}]),
        row_message(16, db, "items", "DELETE", [{"id": 3, "title": "c", "amount": 3, "note": None}]),
    ]
    # The renamed-away name `orders` is taken by a new table: its rows are not the renamed table's.
    fourth = [
        ddl_message(17, db, "orders", "CREATE", "CREATE TABLE orders (id int, item int, PRIMARY KEY (id))"),
        row_message(18, db, "orders", "INSERT", [{"id": 50, "item": 9}]),
        row_message(19, db, "orders_v2", "UPDATE", [{"id": 11, "item": 5}], [{"item": 2}]),
    ]
    return [first, second, third, fourth]


class Oracle:
    """Tables as {name: (columns, {id: row})}, replaying canal messages under one DDL policy."""

    def __init__(self, policy: str) -> None:
        self.policy = policy
        self.tables: dict[str, tuple[list[str], dict[int, dict[str, Any]]]] = {}

    def table(self, name: str) -> tuple[list[str], dict[int, dict[str, Any]]]:
        return self.tables.setdefault(name, ([], {}))

    def apply(self, message: dict[str, Any]) -> None:
        if message["isDdl"]:
            if self.policy == "evolve":
                self.ddl(message["table"], message["sql"])
            return
        columns, rows = self.table(message["table"])
        for image in message["data"]:
            typed = {k: (int(v) if k in INTS and v is not None else v) for k, v in image.items()}
            for name in typed:
                if name not in columns:
                    columns.append(name)
            if message["type"] == "DELETE":
                rows.pop(typed["id"], None)
            else:  # canal's `data` is the whole row: a column it does not carry is null
                rows[typed["id"]] = typed

    def ddl(self, table: str, sql: str) -> None:
        words = sql.replace(",", " ").split()
        if words[:2] == ["CREATE", "TABLE"]:
            self.table(words[2])
        elif words[:2] == ["RENAME", "TABLE"]:
            self.tables[words[4].split(".")[-1]] = self.tables.pop(words[2].split(".")[-1])
        elif words[:2] == ["DROP", "TABLE"]:
            self.table(table)[1].clear()
        elif words[3:5] == ["RENAME", "COLUMN"]:
            columns, rows = self.table(table)
            old, new = words[5], words[7]
            columns[columns.index(old)] = new
            for row in rows.values():
                row[new] = row.pop(old, None)
        elif words[3:5] == ["DROP", "COLUMN"]:
            columns, rows = self.table(table)
            columns.remove(words[5])
            for row in rows.values():
                row.pop(words[5], None)
        elif words[3:5] == ["ADD", "COLUMN"]:
            columns, rows = self.table(table)
            columns.append(words[5])
            for row in rows.values():
                row[words[5]] = None

    def rows(self, name: str) -> list[dict[str, Any]]:
        columns, rows = self.tables[name]
        return [{c: rows[k].get(c) for c in columns} for k in sorted(rows)]


def write(path: Path, messages: list[dict[str, Any]]) -> str:
    path.write_text("".join(json.dumps(m) + "\n" for m in messages))
    return str(path)


def run_batch(spark, lake, source: str, path: str, policies: DdlPolicies) -> pipeline.NormalizeResult:
    landed = pipeline.land_inputs(lake, source=source, inputs=[path])
    normalized = pipeline.normalize_batch(spark, lake, source=source, batch_id=landed.batch_id, fmt="canal",
                                          ddl_policies=policies)
    pipeline.apply_batch(spark, lake, source=source, batch_id=landed.batch_id)
    return normalized


def lake_rows(lake, tid: str) -> list[dict[str, Any]]:
    return sorted(dump_rows(lake, tid), key=lambda r: r["id"])


@pytest.mark.parametrize("policy", ["evolve", "ignore"])
def test_policy_matches_the_replay_and_a_replayed_batch_changes_nothing(spark, session_lake, tmp_path,
                                                                         policy: str) -> None:
    db = f"ddl_{policy}"
    batches = stream(db)
    oracle = Oracle(policy)
    for message in [m for batch in batches for m in batch]:
        oracle.apply(message)
    source = f"ddl-{policy}"
    paths = [write(tmp_path / f"{n}.json", batch) for n, batch in enumerate(batches)]
    # Earlier batches landed again at the end change nothing; the first one's `orders` rows still belong to
    # `orders_v2`, not to the new `orders`.
    for path in [*paths, paths[0], paths[1]]:
        run_batch(spark, session_lake, source, path, DdlPolicies(policy))

    tables = sorted(t for t in list_tables(session_lake) if t.startswith(f"{db}."))
    assert tables == sorted(f"{db}.{name}" for name in oracle.tables)
    for name in oracle.tables:
        assert lake_rows(session_lake, f"{db}.{name}") == oracle.rows(name), name
    if policy == "evolve":
        assert [c for c in lake_rows(session_lake, f"{db}.items")[0]] == ["id", "title", "amount", "note"]


def test_fail_stops_the_table_and_holds_its_later_changes_until_replayed_under_evolve(spark, session_lake, tmp_path,
                                                                                       monkeypatch) -> None:
    db = "ddl_fail"
    first = stream(db)[0]
    source = "ddl-fail"
    policies = DdlPolicies("evolve", {f"{db}.items": "fail"})
    normalized = run_batch(spark, session_lake, source, write(tmp_path / "1.json", first), policies)
    assert list(normalized.ddl_stopped) == [f"{db}.items"]
    assert "ddl_policy=fail" in normalized.ddl_stopped[f"{db}.items"]
    assert normalized.quarantined == 4  # the DDL statement and the table's three row messages (one two-row)
    tables = sorted(t for t in list_tables(session_lake) if t.startswith(f"{db}."))
    assert tables == [f"{db}.orders", f"{db}.tmp"]  # the other tables proceed

    assert list(ddl_stops.stopped_tables(session_lake, source)) == [f"{db}.items"]
    # The ingestion DAG's last task fails its runs while the table is stopped.
    monkeypatch.setenv("CDCLAKE_LAKE", str(session_lake.root))
    for name in ("CDCLAKE_CATALOG_URI", "CDCLAKE_RAW", "CDCLAKE_WAREHOUSE"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(source_tasks.DdlStoppedError, match=rf"1 table\(s\) stopped .*{db}\.items \(by batch"):
        source_tasks.mark_applied(source, [], [])

    # A later batch, still under `fail`: the stopped table's changes are held behind the stop, the others apply.
    later = [row_message(20, db, "items", "INSERT", [{"id": 4, "title": "d", "qty": 4, "note": "v"}]),
             row_message(21, db, "orders", "INSERT", [{"id": 12, "item": 4}])]
    normalized = run_batch(spark, session_lake, source, write(tmp_path / "2.json", later), policies)
    assert list(normalized.ddl_stopped) == [f"{db}.items"] and normalized.ddl_stopped[f"{db}.items"].startswith(
        f"held: {db}.items is stopped by a DDL statement of batch")
    assert (normalized.tables, normalized.quarantined) == ({f"{db}.orders": 1}, 1)

    replayed = pipeline.replay_quarantine(spark, session_lake, source=source, reason="ddl_policy=fail",
                                          ddl_policies=DdlPolicies("evolve"))
    assert sum(r.replayed for r in replayed) == 5
    assert ddl_stops.stopped_tables(session_lake, source) == {}  # released by the replay under evolve
    assert source_tasks.mark_applied(source, [], []) == {}

    # Released: the next batch applies the table, although its configured policy is still `fail`.
    after = [row_message(22, db, "items", "UPDATE", [{"id": 4, "title": "d2", "qty": 4, "note": "v"}],
                         [{"title": "d"}])]
    normalized = run_batch(spark, session_lake, source, write(tmp_path / "3.json", after), policies)
    assert (normalized.ddl_stopped, normalized.tables) == ({}, {f"{db}.items": 1})
    oracle = Oracle("evolve")
    for message in [*first, *later, *after]:
        oracle.apply(message)
    assert lake_rows(session_lake, f"{db}.items") == oracle.rows("items")
    assert lake_rows(session_lake, f"{db}.orders") == oracle.rows("orders")
