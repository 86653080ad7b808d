"""Where a Debezium snapshot ends, and what the apply counts say about it. Debezium 1.x marks only the last record
of the whole snapshot ``last`` (of whichever table it read last; ``last_in_data_collection`` came with 2.x), and
every read of the snapshot carries the snapshot's one source position. The expected rows and counts are written
out by hand."""

from __future__ import annotations

import uuid
from typing import Any

from cdclake.reader import dump_rows
from tests.support.canal_batches import apply_messages


def _event(db: str, table: str, pos: int, op: str, row: dict[str, Any] | None,
           snapshot: str = "false") -> dict[str, Any]:
    source = {"version": "1.9.7.Final", "connector": "mysql", "name": "srv", "ts_ms": 1700000000000,
              "snapshot": snapshot, "db": db, "table": table, "server_id": 1, "file": "mysql-bin.000003", "pos": pos,
              "row": 0}
    before, after = (row, None) if op == "d" else (None, row)
    return {"before": before, "after": after, "source": source, "op": op, "ts_ms": 1700000000000}


def _apply(spark: Any, lake: Any, db: str, name: str, events: list[dict[str, Any]]) -> dict[str, Any]:
    return apply_messages(spark, lake, db, name, events, fmt="debezium", keys=["id"])


def test_a_debezium_1x_snapshot_end_ends_the_snapshot_of_every_table_it_read(spark, session_lake) -> None:
    db = f"snap{uuid.uuid4().hex[:6]}"
    _apply(spark, session_lake, db, "0", [
        _event(db, "a", 1000, "r", {"id": 1, "v": "s1"}, "true"),
        _event(db, "a", 1000, "r", {"id": 2, "v": "s1"}, "true"),
        _event(db, "b", 1000, "r", {"id": 1, "v": "s1"}, "last")])
    # the re-snapshot no longer reads a's row 2 (deleted at the source while the connector was away)
    counts = _apply(spark, session_lake, db, "1", [
        _event(db, "a", 2000, "r", {"id": 1, "v": "s2"}, "true"),
        _event(db, "b", 2000, "r", {"id": 1, "v": "s2"}, "last")])
    assert dump_rows(session_lake, f"{db}.a") == [{"id": 1, "v": "s2"}]
    assert dump_rows(session_lake, f"{db}.b") == [{"id": 1, "v": "s2"}]
    a = counts[f"{db}.a"]
    assert (a.inserted, a.updated, a.deleted, a.truncated, a.rows_after) == (0, 1, 0, 1, 1), a


def test_a_row_the_re_snapshot_read_again_and_the_stream_deleted_counts_as_deleted(spark, session_lake) -> None:
    db = f"snap{uuid.uuid4().hex[:6]}"
    _apply(spark, session_lake, db, "0", [
        _event(db, "c", 1000, "r", {"id": k, "v": "s"}, "last" if k == 3 else "true") for k in (1, 2, 3)])
    counts = _apply(spark, session_lake, db, "1", [
        _event(db, "c", 2000, "r", {"id": 1, "v": "s"}, "first"),
        _event(db, "c", 2000, "r", {"id": 2, "v": "s"}, "last"),
        _event(db, "c", 2100, "u", {"id": 1, "v": "x"}), _event(db, "c", 2110, "d", {"id": 2, "v": "s"}),
        _event(db, "c", 2120, "c", {"id": 7, "v": "n"})])
    assert dump_rows(session_lake, f"{db}.c") == [{"id": 1, "v": "x"}, {"id": 7, "v": "n"}]
    c = counts[f"{db}.c"]
    # row 3: not read again, removed by the cut; row 2: read again, then deleted
    assert (c.inserted, c.updated, c.deleted, c.truncated, c.rows_before, c.rows_after) == (1, 1, 1, 1, 2, 2), c


def test_skipped_stale_counts_every_change_not_applied(spark, session_lake) -> None:
    db = f"stale{uuid.uuid4().hex[:6]}"
    _apply(spark, session_lake, db, "0", [_event(db, "s", 100, "c", {"id": 1, "v": "a"}),
                                          _event(db, "s", 200, "u", {"id": 1, "v": "b"})])
    # the connector restarted: the change at 200 is delivered again, twice, beside a newer one; 150 is older still
    counts = _apply(spark, session_lake, db, "1", [
        _event(db, "s", 200, "u", {"id": 1, "v": "b"}), _event(db, "s", 200, "u", {"id": 1, "v": "b"}),
        _event(db, "s", 150, "u", {"id": 1, "v": "old"}), _event(db, "s", 300, "u", {"id": 1, "v": "c"})])
    assert dump_rows(session_lake, f"{db}.s") == [{"id": 1, "v": "c"}]
    s = counts[f"{db}.s"]
    assert (s.updated, s.skipped_stale) == (1, 3), s


def test_a_debezium_1x_snapshot_ending_in_a_later_batch_reconciles_the_tables_it_read_before(
        spark, session_lake) -> None:
    db = f"snap{uuid.uuid4().hex[:6]}"
    _apply(spark, session_lake, db, "0", [
        _event(db, t, pos, "c", {"id": k, "v": "s"})
        for pos, (t, k) in enumerate([(t, k) for t in "abc" for k in (1, 2)], start=100)])
    # The connector re-snapshots at 2000 (row 2 of every table was deleted while it was away). Tables a and c are
    # read in this batch; the snapshot's only `last` record, b's, comes in the next one, beside c's first streamed
    # change: a is not in that batch at all.
    _apply(spark, session_lake, db, "1", [
        _event(db, t, 2000, "r", {"id": k, "v": "s"}, "true") for t, k in (("a", 1), ("b", 1), ("c", 1), ("c", 3))])
    counts = _apply(spark, session_lake, db, "2", [
        _event(db, "b", 2000, "r", {"id": 3, "v": "s"}, "last"), _event(db, "c", 2100, "u", {"id": 1, "v": "x"})])
    assert dump_rows(session_lake, f"{db}.a") == [{"id": 1, "v": "s"}]
    assert dump_rows(session_lake, f"{db}.b") == [{"id": 1, "v": "s"}, {"id": 3, "v": "s"}]
    assert dump_rows(session_lake, f"{db}.c") == [{"id": 1, "v": "x"}, {"id": 3, "v": "s"}]
    a, c = counts[f"{db}.a"], counts[f"{db}.c"]
    assert (a.truncated, a.rows_after) == (1, 1), a
    assert (c.updated, c.truncated, c.rows_after) == (1, 1, 2), c
    # The snapshot is closed: a later batch of the source's streamed changes leaves the tables as they are.
    _apply(spark, session_lake, db, "3", [_event(db, "a", 2200, "c", {"id": 5, "v": "n"})])
    assert dump_rows(session_lake, f"{db}.a") == [{"id": 1, "v": "s"}, {"id": 5, "v": "n"}]


def _pg_0x_read(schema: str, table: str, lsn: int, row: dict[str, Any], last: bool = False) -> dict[str, Any]:
    """A snapshot read of Debezium's PostgreSQL connector before 1.0 (its ``SourceInfo``: ``snapshot`` a boolean,
    ``last_snapshot_record`` true on the snapshot's last record, ``ts_usec``)."""
    source = {"name": "pgsrv", "ts_usec": 1700000000000000, "txId": 555, "lsn": lsn, "snapshot": True,
              "last_snapshot_record": last}
    return {"before": None, "after": row, "source": {**source, "schema": schema, "table": table}, "op": "r",
            "ts_ms": 1700000000000}


def test_a_postgresql_0x_snapshot_ends_with_its_last_snapshot_record(spark, session_lake) -> None:
    """Before 1.0, Debezium's PostgreSQL connector marks its snapshot's end with ``last_snapshot_record: true``
    (``snapshot`` stays ``true``): the re-snapshot removes the rows it no longer reads, of both tables."""
    schema = f"snap{uuid.uuid4().hex[:6]}"
    _apply(spark, session_lake, schema, "0", [
        _pg_0x_read(schema, "a", 1000, {"id": 1, "v": "s1"}), _pg_0x_read(schema, "a", 1000, {"id": 2, "v": "s1"}),
        _pg_0x_read(schema, "b", 1000, {"id": 1, "v": "s1"}), _pg_0x_read(schema, "b", 1000, {"id": 2, "v": "s1"},
                                                                            last=True)])
    # The re-snapshot no longer reads a's row 2 and b's row 1 (deleted while the connector was away).
    counts = _apply(spark, session_lake, schema, "1", [
        _pg_0x_read(schema, "a", 2000, {"id": 1, "v": "s2"}),
        _pg_0x_read(schema, "b", 2000, {"id": 2, "v": "s2"}, last=True)])
    assert dump_rows(session_lake, f"{schema}.a") == [{"id": 1, "v": "s2"}]
    assert dump_rows(session_lake, f"{schema}.b") == [{"id": 2, "v": "s2"}]
    a, b = counts[f"{schema}.a"], counts[f"{schema}.b"]
    assert (a.updated, a.truncated, a.rows_after) == (1, 1, 1), a
    assert (b.updated, b.truncated, b.rows_after) == (1, 1, 1), b
