"""Column names a lake table cannot have: the table's changes are quarantined with a reason that names the column,
and the other tables of the batch are applied."""

from __future__ import annotations

import uuid
from typing import Any

from cdclake.apply_options import ApplyOptions
from cdclake.keys import KeySpec
from cdclake.normalize import normalize_batch
from cdclake.pipeline import apply_batch
from cdclake import quarantine
from cdclake.identity import spark_table_name
from cdclake.reader import dump_rows
from tests.support.canal_batches import land_messages


def _insert(db: str, table: str, after: dict[str, Any]) -> dict[str, Any]:
    return {"before": None, "after": after, "op": "c", "ts_ms": 1700000000001, "transaction": None,
            "source": {"version": "2.5.0.Final", "connector": "postgresql", "name": "pg", "ts_ms": 1700000000000,
                       "snapshot": "false", "db": "db", "schema": db, "table": table, "txId": 1, "lsn": 100}}


def test_a_dotted_or_reserved_column_name_quarantines_its_table_and_the_others_apply(spark, session_lake) -> None:
    db = f"names{uuid.uuid4().hex[:6]}"
    columns = {"dotted": "a.b", "bookkeeping": "_cdc_op", "working": "_Unavailable", "metadata": "_file",
               "previous": "_prev_v", "kept": "_state"}
    batch_id = land_messages(session_lake, db, "0", [
        _insert(db, table, {"id": 1, column: "x", "v": "y"}) for table, column in columns.items()])
    result = normalize_batch(spark, session_lake, source=db, batch_id=batch_id, fmt="debezium",
                             keys=KeySpec.parse(["id"]))
    applied = apply_batch(spark, session_lake, source=db, batch_id=batch_id, default=ApplyOptions()).tables
    assert set(applied) == {f"{db}.kept"}
    assert dump_rows(session_lake, f"{db}.kept") == [{"id": 1, "_state": "x", "v": "y"}]
    reasons = {r["reason"].split(":")[0]: r["reason"] for r in spark.sql(
        f"SELECT reason FROM {spark_table_name(quarantine.TABLE)} WHERE source = '{db}'").collect()}
    assert result.quarantined == 5 and set(reasons) == {f"table {db}.{t}" for t in columns if t != "kept"}
    assert "'a.b' has a dot in its name" in reasons[f"table {db}.dotted"]
    for table in ("bookkeeping", "working", "metadata", "previous"):
        assert f"column {columns[table]!r} has a name cdclake reserves" in reasons[f"table {db}.{table}"]
