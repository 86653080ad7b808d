"""Two source tables whose names map to one lake id (lower-cased, reduced to ``[a-z0-9_]``) never share a table.

The lake table holds the source table it was made from (recorded as ``cdclake.source-table``); the other one's
changes are quarantined with a reason naming both, in the batch that has both and in later batches. The expected
tables are written out by hand from the messages below.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cdclake.catalog import SOURCE_PROPERTY, SOURCE_TABLE_PROPERTY, pyiceberg_catalog
from cdclake.reader import dump_rows, quarantine_rows
from cdclake.settings import LakeSettings
from tests.support.cli_session import run_cli_session

# In the extended tier (3 minutes of a CI worker): `CDCLAKE_TESTS=all ./.ci/run`.
pytestmark = pytest.mark.extended


def canal(seq: int, table: str, kind: str, row: dict[str, str], old: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "data": [row], "database": "shop", "es": 1_700_000_000_000 + seq, "id": seq, "isDdl": False,
        "mysqlType": {"id": "int", "name": "varchar(20)"}, "old": [old] if old else None, "pkNames": ["id"],
        "sql": "", "sqlType": {"id": 4, "name": 12}, "table": table, "ts": 1_700_000_000_100 + seq, "type": kind,
    }


def rename(seq: int, table: str, sql: str) -> dict[str, Any]:
    return {"data": None, "database": "shop", "es": 1_700_000_000_000 + seq, "id": seq, "isDdl": True,
            "mysqlType": None, "old": None, "pkNames": None, "sql": sql, "sqlType": None, "table": table,
            "ts": 1_700_000_000_100 + seq, "type": "RENAME"}


def write(path: Path, messages: list[dict[str, Any]]) -> str:
    path.write_text("".join(json.dumps(m) + "\n" for m in messages), encoding="utf-8")
    return str(path)


def test_tables_whose_names_differ_only_in_case_or_punctuation_stay_apart(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    first = write(tmp_path / "b1.jsonl", [
        canal(1, "gmall-2020-04", "INSERT", {"id": "1", "name": "dash"}),
        canal(2, "gmall_2020_04", "INSERT", {"id": "1", "name": "underscore"}),
        canal(3, "gmall-2020-04", "INSERT", {"id": "2", "name": "dash2"}),
        canal(4, "Orders", "INSERT", {"id": "1", "name": "upper"}),
        canal(5, "orders", "INSERT", {"id": "7", "name": "lower"}),
    ])
    second = write(tmp_path / "b2.jsonl", [
        canal(6, "gmall_2020_04", "UPDATE", {"id": "1", "name": "underscore2"}, {"name": "underscore"}),
        canal(7, "gmall-2020-04", "UPDATE", {"id": "2", "name": "dash3"}, {"name": "dash2"}),
        canal(8, "orders", "DELETE", {"id": "7", "name": "lower"}),
        canal(9, "Orders", "UPDATE", {"id": "1", "name": "upper2"}, {"name": "upper"}),
    ])
    # A renamed table holds its source table under the new name (the statement spells it its own way).
    third = write(tmp_path / "b3.jsonl", [
        rename(10, "Orders", "RENAME TABLE ORDERS TO OrdersOld"),
        canal(11, "OrdersOld", "UPDATE", {"id": "1", "name": "upper3"}, {"name": "upper2"}),
    ])
    results = run_cli_session([
        ["apply", "--format", "canal", "--source", "shop", "--lake", str(lake), "--input", path]
        for path in (first, second, third)], tmp_path / "cli")
    assert [r["exit"] for r in results] == [0, 0, 0], [r["stderr"][-3000:] for r in results]
    summaries = [json.loads(r["stdout"]) for r in results]
    assert [s["quarantined"] for s in summaries] == [2, 2, 0]

    settings = LakeSettings.from_env(lake, env={})
    assert dump_rows(settings, "shop.gmall_2020_04") == [{"id": 1, "name": "dash"}, {"id": 2, "name": "dash3"}]
    assert dump_rows(settings, "shop.ordersold") == [{"id": 1, "name": "upper3"}]
    catalog = pyiceberg_catalog(settings)
    assert catalog.load_table("shop.gmall_2020_04").properties[SOURCE_TABLE_PROPERTY] == "shop.gmall-2020-04"
    assert catalog.load_table("shop.ordersold").properties[SOURCE_TABLE_PROPERTY] == "shop.OrdersOld"

    held = sorted((r["batch_id"], json.loads(r["value"])["id"], r["reason"]) for r in quarantine_rows(settings))
    assert [(batch, seq) for batch, seq, _ in held] == [("00000001", 2), ("00000001", 5), ("00000002", 6),
                                                        ("00000002", 8)]
    gmall = ("source table shop.gmall_2020_04 maps to lake table shop.gmall_2020_04 (names are lower-cased and "
             "reduced to [a-z0-9_]), which holds source table shop.gmall-2020-04")
    orders = "source table shop.orders maps to lake table shop.orders"
    assert [reason.startswith(gmall) for _, _, reason in held] == [True, False, True, False], held
    assert [reason.startswith(orders) and "holds source table shop.Orders" in reason
            for _, _, reason in held] == [False, True, False, True], held


def test_a_second_source_with_a_table_of_the_same_name_is_kept_out_of_the_first_ones_table(tmp_path: Path) -> None:
    # Two MySQL servers (a shard each, or production and staging) with the same database and table names. Their
    # binlog positions are not comparable: s3's insert, older by position than s2's, was skipped as stale before.
    lake = tmp_path / "lake"
    s2 = write(tmp_path / "s2.jsonl", [canal(50, "alpha", "INSERT", {"id": "1", "name": "from s2"})])
    s3 = write(tmp_path / "s3.jsonl", [canal(5, "alpha", "INSERT", {"id": "1", "name": "from s3"}),
                                       canal(6, "alpha", "INSERT", {"id": "2", "name": "from s3"}),
                                       canal(7, "beta", "INSERT", {"id": "3", "name": "s3's own table"})])
    s2_again = write(tmp_path / "s2b.jsonl", [
        canal(51, "alpha", "UPDATE", {"id": "1", "name": "s2 updated"}, {"name": "from s2"})])
    apply = ["apply", "--format", "canal", "--lake", str(lake), "--input"]
    first, other = run_cli_session([[*apply, s2, "--source", "s2"], [*apply, s3, "--source", "s3"]], tmp_path / "cli")
    (again,) = run_cli_session([[*apply, s2_again, "--source", "s2"]], tmp_path / "cli2")
    assert [r["exit"] for r in (first, other, again)] == [0, 1, 0], [r["stderr"][-3000:] for r in (first, other, again)]
    assert ("1 table(s) failed to apply, the other 1 were applied" in other["stderr"]
            and "shop.alpha: ConfigError: lake table shop.alpha holds the changes of source s2, and source s3 has "
                "changes of a table with the same name" in other["stderr"]), other["stderr"][-3000:]

    settings = LakeSettings.from_env(lake, env={})
    assert dump_rows(settings, "shop.alpha") == [{"id": 1, "name": "s2 updated"}]
    assert dump_rows(settings, "shop.beta") == [{"id": 3, "name": "s3's own table"}]
    catalog = pyiceberg_catalog(settings)
    assert [catalog.load_table(t).properties[SOURCE_PROPERTY] for t in ("shop.alpha", "shop.beta")] == ["s2", "s3"]
