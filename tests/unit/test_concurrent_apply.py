"""Two applies to one table at once.

- With the table lock (the default, ``cdclake.locks``), the second apply waits for the first: a delete of a key the
  table does not hold yet (it changes only the tombstones) cannot slip in between the first apply's classification
  and its MERGE, so the first apply's older insert does not bring the deleted key back.
- Without the lock (``CDCLAKE_TABLE_LOCK=off``, as with a writer that does not take it), a writer whose MERGE
  another writer's commit overtakes gets Iceberg's commit conflict, classifies its batch again against the table as
  it is now and commits; no change of either is lost, and neither batch's changelog rows are written twice.

The interleaving is made deterministic: batch A's classification or MERGE reads its rows through a gate (a filter
that blocks in its Spark task until told to go), and while it waits a second thread applies batch B to the same
table. The expected tables are written out by hand from the messages' positions.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from pathlib import Path
from typing import Callable

import pytest
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType

import cdclake.apply as apply_module
from cdclake.apply import changelog_table_id
from cdclake import tombstones
from cdclake.apply_options import ApplyOptions
from cdclake.identity import spark_table_name
from cdclake.normalize import normalize_batch
from cdclake.pipeline import apply_batch
from cdclake.reader import dump_rows
from tests.support.canal_batches import canal, land_messages

# In the extended tier (3 minutes of a CI worker; the catalog lock itself has its tests in CI, test_locks.py):
# `CDCLAKE_TESTS=all ./.ci/run`.
pytestmark = pytest.mark.extended

GATE_TIMEOUT_S = 300


def _gate(gate_dir: Path, *, deterministic: bool = False):
    """A row filter for a Spark task: the first task to evaluate it (across Python workers) creates ``started`` in
    ``gate_dir`` (made here) and blocks until the file ``go`` exists; every other evaluation passes at once.
    ``deterministic``: declared so (a copy-on-write MERGE takes no nondeterministic source), else not, so Spark
    evaluates it where it stands."""
    gate_dir.mkdir()
    directory = str(gate_dir)

    def gate(_: object) -> bool:
        try:
            os.close(os.open(os.path.join(directory, "started"), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return True
        deadline = time.monotonic() + GATE_TIMEOUT_S
        while not os.path.exists(os.path.join(directory, "go")) and time.monotonic() < deadline:
            time.sleep(0.05)
        return True

    udf = F.udf(gate, BooleanType())
    return udf if deterministic else udf.asNondeterministic()


def _source(spark, lake, batches: dict[str, list[dict]], options: ApplyOptions = ApplyOptions()
            ) -> tuple[str, dict[str, str]]:
    """Land and normalize ``batches`` (name -> canal messages) as a new source's batches, in order, and apply the
    one named ``zero`` with ``options``; returns the source and the batch ids by name."""
    source, ids = f"race_{uuid.uuid4().hex[:6]}", {}
    for name, messages in batches.items():
        ids[name] = land_messages(lake, source, name, messages)
        normalize_batch(spark, lake, source=source, batch_id=ids[name], fmt="canal")
    apply_batch(spark, lake, source=source, batch_id=ids["zero"], default=options)
    return source, ids


def _once_gated(gate_dir: Path, what: str, work: Callable[[], None], errors: list[BaseException], *,
                release: bool) -> threading.Thread:
    """Start a thread that waits until a task holds at the gate, then runs ``work`` (an exception goes to
    ``errors``) and, with ``release``, opens the gate."""

    def run() -> None:
        try:
            deadline = time.monotonic() + GATE_TIMEOUT_S
            while not (gate_dir / "started").exists():
                assert time.monotonic() < deadline, f"{what} never reached the gate"
                time.sleep(0.05)
            work()
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)
        finally:
            if release:
                (gate_dir / "go").touch()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


@pytest.mark.parametrize("write_mode", ["merge-on-read", "copy-on-write"])
def test_a_merge_overtaken_by_another_writer_is_retried_and_loses_nothing(spark, session_lake, tmp_path, monkeypatch,
                                                                          caplog, write_mode):
    # Copy-on-write: the overtaken MERGE fails before its commit, in Iceberg's runtime file filtering (the scan's
    # snapshot is no longer the table's), which is retried like a commit conflict.
    monkeypatch.setenv("CDCLAKE_TABLE_LOCK", "off")
    options = ApplyOptions(write_mode=write_mode)
    database = f"race{uuid.uuid4().hex[:6]}"
    tid = f"{database}.items"
    source, ids = _source(spark, session_lake, {
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
    }, options)

    gate_dir = tmp_path / "gate"
    spark.udf.register("cdclake_test_gate", _gate(gate_dir, deterministic=write_mode == "copy-on-write"))
    merge_sql, gated = apply_module.merge_sql, []

    def first_merge_waits(target: str, view: str, **kwargs: object) -> str:
        if not gated:  # batch A's first MERGE only
            gated.append(view)
            view = f"(SELECT * FROM {view} WHERE cdclake_test_gate(_cdc_position))"
        return merge_sql(target, view, **kwargs)

    monkeypatch.setattr(apply_module, "merge_sql", first_merge_waits)
    results, errors = {}, []

    def overtake() -> None:
        results["b"] = apply_batch(spark, session_lake, source=source, batch_id=ids["b"], default=options)

    other = _once_gated(gate_dir, "batch A's MERGE", overtake, errors, release=True)
    with caplog.at_level(logging.WARNING, logger="cdclake.apply"):
        results["a"] = apply_batch(spark, session_lake, source=source, batch_id=ids["a"], default=options)
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


def test_with_the_table_lock_a_delete_cannot_slip_between_classification_and_merge(spark, session_lake, tmp_path,
                                                                                    monkeypatch, caplog):
    database = f"race{uuid.uuid4().hex[:6]}"
    tid = f"{database}.items"
    source, ids = _source(spark, session_lake, {
        "zero": [canal(database, "INSERT", [{"id": "1", "name": "a1"}], 1000)],
        "a": [canal(database, "INSERT", [{"id": "7", "name": "A7"}], 2000)],
        "b": [canal(database, "DELETE", [{"id": "7", "name": "A7"}], 3000)],
    })

    gate_dir = tmp_path / "gate"
    gate, classify, gated = _gate(gate_dir), apply_module.classify, []

    def first_classification_waits(*args: object, **kwargs: object):
        classified = classify(*args, **kwargs)
        if not gated:  # batch A's only: its table and tombstones are read, then it blocks while materialized
            gated.append(True)
            classified = classified.where(gate(F.col("_cdc_position")))
        return classified

    monkeypatch.setattr(apply_module, "classify", first_classification_waits)
    caplog.set_level(logging.INFO, logger="cdclake.locks")
    results, errors = {}, []

    def apply_b() -> None:
        results["b"] = apply_batch(spark, session_lake, source=source, batch_id=ids["b"], default=ApplyOptions())

    def release_a_once_b_waits_or_ends() -> None:
        deadline = time.monotonic() + GATE_TIMEOUT_S
        while not ("b" in results or errors or any("waiting for its lock" in r.getMessage() for r in caplog.records)):
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
        (gate_dir / "go").touch()

    threads = [_once_gated(gate_dir, "batch A's classification", apply_b, errors, release=False),
               threading.Thread(target=release_a_once_b_waits_or_ends)]
    threads[1].start()
    results["a"] = apply_batch(spark, session_lake, source=source, batch_id=ids["a"], default=ApplyOptions())
    for thread in threads:
        thread.join(GATE_TIMEOUT_S)
    assert not errors, errors
    assert gated, "batch A was never classified"

    # B waited for A's lock, then deleted the row A inserted; without the lock, A's MERGE would add key 7 after B
    # had recorded its delete as a tombstone only.
    waits = [r.getMessage() for r in caplog.records if "waiting for its lock" in r.getMessage()]
    assert len(waits) == 1 and f"apply of batch {ids['a']}" in waits[0], waits
    assert [(r["id"], r["name"]) for r in dump_rows(session_lake, tid)] == [(1, "a1")]
    a_counts, b_counts = results["a"].to_dict()["tables"][tid], results["b"].to_dict()["tables"][tid]
    assert (a_counts["inserted"], b_counts["deleted"], b_counts["rows_after"]) == (1, 1, 1)
    tombs = spark.table(spark_table_name(tombstones.TABLE)).where(F.col("table_id") == tid).collect()
    logged = {r["_cdc_batch_id"]: r["_cdc_position"] for r in spark.table(
        spark_table_name(changelog_table_id(tid))).where(F.col("id") == 7).collect()}
    assert [(r["key_json"], r["position"]) for r in tombs] == [('{"id":7}', logged[ids["b"]])]


def test_applies_of_two_tables_that_conflict_on_the_tombstones_retry_only_that_merge(spark, session_lake, tmp_path,
                                                                                     monkeypatch, caplog):
    tids, sources, ids = {}, {}, {}
    for name in ("x", "y"):
        database = f"tomb{name}{uuid.uuid4().hex[:6]}"
        tids[name] = f"{database}.items"
        sources[name], ids[name] = _source(spark, session_lake, {
            "zero": [canal(database, "INSERT", [{"id": str(i), "name": f"{name}{i}"} for i in range(1, 4)], 1000)],
            "deletes": [canal(database, "DELETE", [{"id": "1", "name": f"{name}1"}, {"id": "9", "name": "gone"}],
                              2000)],
        })

    gate_dir = tmp_path / "gate"
    gate, record_deletes, gated = _gate(gate_dir), tombstones.record_deletes, []

    def x_records_behind_a_gate(spark_: object, tid: str, deletes):
        if tid == tids["x"] and not gated:
            gated.append(tid)
            deletes = deletes.where(gate(F.col("_cdc_position")))
        return record_deletes(spark_, tid, deletes)

    monkeypatch.setattr(tombstones, "record_deletes", x_records_behind_a_gate)
    results, errors = {}, []

    def apply_y() -> None:
        results["y"] = apply_batch(spark, session_lake, source=sources["y"], batch_id=ids["y"]["deletes"],
                                   default=ApplyOptions())

    other = _once_gated(gate_dir, "table x's tombstones MERGE", apply_y, errors, release=True)
    with caplog.at_level(logging.WARNING):
        results["x"] = apply_batch(spark, session_lake, source=sources["x"], batch_id=ids["x"]["deletes"],
                                   default=ApplyOptions())
    other.join(GATE_TIMEOUT_S)
    assert not errors, errors
    assert gated, "table x recorded no tombstones"
    messages = [r.getMessage() for r in caplog.records]
    assert any("tombstones: commit conflict" in m and "merging again" in m for m in messages), messages
    assert not any("re-classifying" in m for m in messages), messages

    # Only the tombstones MERGE ran again: x's counts are those of one clean attempt.
    for name in ("x", "y"):
        counts = results[name].to_dict()["tables"][tids[name]]
        assert (counts["deleted"], counts["skipped_stale"], counts["rows_after"]) == (1, 0, 2), (name, counts)
        assert [r["id"] for r in dump_rows(session_lake, tids[name])] == [2, 3]
        tombs = spark.table(spark_table_name(tombstones.TABLE)).where(F.col("table_id") == tids[name]).collect()
        assert sorted(r["key_json"] for r in tombs) == ['{"id":1}', '{"id":9}'], name
