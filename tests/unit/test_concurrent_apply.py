"""Two applies to one table at once: a writer whose MERGE another writer's commit overtakes gets Iceberg's commit
conflict, classifies its batch again against the table as it is now and commits; no change of either is lost, and
neither batch's changelog rows are written twice.

The overtaking is made deterministic: batch A's MERGE reads its rows through a gate (a filter that blocks in its
Spark task until told to go), and while it waits a second thread applies batch B to the same table. The expected
table is written out by hand from the messages' positions.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid

from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType

import cdclake.apply as apply_module
from cdclake.apply import changelog_table_id
from cdclake.apply_options import ApplyOptions
from cdclake.identity import spark_table_name
from cdclake.normalize import normalize_batch
from cdclake.pipeline import apply_batch
from cdclake.reader import dump_rows
from tests.support.canal_batches import canal, land_messages

GATE_TIMEOUT_S = 300


def _gate(directory: str):
    """A row filter for a Spark task: the first task to evaluate it (across Python workers) blocks until the file
    ``go`` exists; every other evaluation passes at once."""

    def gate(_: object) -> bool:
        try:
            os.close(os.open(os.path.join(directory, "started"), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return True
        deadline = time.monotonic() + GATE_TIMEOUT_S
        while not os.path.exists(os.path.join(directory, "go")) and time.monotonic() < deadline:
            time.sleep(0.05)
        return True

    return F.udf(gate, BooleanType()).asNondeterministic()


def test_a_merge_overtaken_by_another_writer_is_retried_and_loses_nothing(spark, session_lake, tmp_path, monkeypatch,
                                                                          caplog):
    source, database = f"race_{uuid.uuid4().hex[:6]}", f"race{uuid.uuid4().hex[:6]}"
    tid = f"{database}.items"
    batches = {
        "zero": [canal(database, "INSERT", [{"id": str(i), "name": f"a{i}"} for i in range(1, 5)], 1000)],
        "a": [
            canal(database, "UPDATE", [{"id": "1", "name": "A1"}], 2000, old=[{"name": "a1"}]),
            canal(database, "DELETE", [{"id": "2", "name": "a2"}], 2001),
            canal(database, "INSERT", [{"id": "5", "name": "A5"}], 2002),
        ],
        "b": [
            canal(database, "UPDATE", [{"id": "1", "name": "B1"}], 3000, old=[{"name": "A1"}]),
            canal(database, "UPDATE", [{"id": "3", "name": "B3"}], 3001, old=[{"name": "a3"}]),
            canal(database, "INSERT", [{"id": "6", "name": "B6"}], 3002),
            canal(database, "UPDATE", [{"id": "5", "name": "B5"}], 3003, old=[{"name": "A5"}]),
            canal(database, "DELETE", [{"id": "4", "name": "a4"}], 3004),
        ],
    }
    ids = {}
    for name, messages in batches.items():
        ids[name] = land_messages(session_lake, source, name, messages)
        normalize_batch(spark, session_lake, source=source, batch_id=ids[name], fmt="canal")
    apply_batch(spark, session_lake, source=source, batch_id=ids["zero"], default=ApplyOptions())

    gate_dir = tmp_path / "gate"
    gate_dir.mkdir()
    spark.udf.register("cdclake_test_gate", _gate(str(gate_dir)))
    merge_sql, gated = apply_module.merge_sql, []

    def first_merge_waits(target: str, view: str, **kwargs: object) -> str:
        if not gated:  # batch A's first MERGE only
            gated.append(view)
            view = f"(SELECT * FROM {view} WHERE cdclake_test_gate(_cdc_position))"
        return merge_sql(target, view, **kwargs)

    monkeypatch.setattr(apply_module, "merge_sql", first_merge_waits)
    results, errors = {}, []

    def overtake() -> None:
        try:
            deadline = time.monotonic() + GATE_TIMEOUT_S
            while not (gate_dir / "started").exists():
                assert time.monotonic() < deadline, "batch A's MERGE never reached the gate"
                time.sleep(0.05)
            results["b"] = apply_batch(spark, session_lake, source=source, batch_id=ids["b"], default=ApplyOptions())
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)
        finally:
            (gate_dir / "go").touch()

    other = threading.Thread(target=overtake)
    other.start()
    with caplog.at_level(logging.WARNING, logger="cdclake.apply"):
        results["a"] = apply_batch(spark, session_lake, source=source, batch_id=ids["a"], default=ApplyOptions())
    other.join(GATE_TIMEOUT_S)
    assert not errors, errors
    assert gated, "batch A took no MERGE"
    assert any("commit conflict" in r.getMessage() for r in caplog.records), [r.getMessage() for r in caplog.records]

    # Newest change per key by position, whichever batch committed first: B's update of 5 (3003) created the row
    # before A's older insert (2002) came in again; A's update of 1 (2000) is older than B's (3000).
    rows = dump_rows(session_lake, tid, all_columns=True)
    assert [(r["id"], r["name"], r["_cdc_batch_id"]) for r in rows] == [
        (1, "B1", ids["b"]), (3, "B3", ids["b"]), (5, "B5", ids["b"]), (6, "B6", ids["b"])]
    a_counts = results["a"].to_dict()["tables"][tid]
    assert (a_counts["inserted"], a_counts["updated"], a_counts["deleted"], a_counts["skipped_stale"]) == (0, 0, 1, 2)
    assert (a_counts["rows_before"], a_counts["rows_after"]) == (5, 4)

    # Each batch's changes are in the changelog once: A's were appended before its first MERGE and not again.
    changelog = spark.table(spark_table_name(changelog_table_id(tid)))
    written = sorted((r["_cdc_batch_id"], r["n"]) for r in changelog.groupBy("_cdc_batch_id").agg(
        F.count(F.lit(1)).alias("n")).collect())
    assert written == sorted([(ids["zero"], 4), (ids["a"], 3), (ids["b"], 5)])
