"""canal messages of a MySQL server with ``binlog_row_image=NOBLOB`` (or ``MINIMAL``): an update's row image leaves
out the columns it did not change (canal's LogEventConvert skips columns the binlog row does not carry, so they are
in neither ``data`` nor ``mysqlType``). Such a column keeps its stored value; an insert's absent column is null.
The expected rows are written out by hand."""

from __future__ import annotations

import uuid

from cdclake.reader import dump_rows
from tests.support.canal_batches import apply_messages, canal

FULL = {"id": ("int", 4), "name": ("varchar(20)", 12), "txt": ("text", 2005)}
NO_TEXT = {"id": ("int", 4), "name": ("varchar(20)", 12)}


def test_an_update_that_leaves_a_column_out_keeps_its_stored_value(spark, session_lake) -> None:
    db = f"noblob{uuid.uuid4().hex[:6]}"
    apply_messages(spark, session_lake, db, "0", [
        canal(db, "INSERT", [{"id": "1", "name": "a", "txt": "long one"}, {"id": "2", "name": "b", "txt": "two"}],
              100, types=FULL),
        canal(db, "UPDATE", [{"id": "1", "name": "a2"}], 110, old=[{"name": "a"}], types=NO_TEXT),
    ])
    assert dump_rows(session_lake, f"{db}.items") == [
        {"id": 1, "name": "a2", "txt": "long one"}, {"id": 2, "name": "b", "txt": "two"}]
    counts = apply_messages(spark, session_lake, db, "1", [
        canal(db, "UPDATE", [{"id": "1", "name": "a3"}, {"id": "2", "name": "b2"}], 200,
              old=[{"name": "a2"}, {"name": "b"}], types=NO_TEXT),
        canal(db, "UPDATE", [{"id": "2", "name": "b3", "txt": "new"}], 210, old=[{"name": "b2", "txt": "two"}],
              types=FULL),
        canal(db, "INSERT", [{"id": "3", "name": "c"}], 220, types=NO_TEXT),
    ])
    assert dump_rows(session_lake, f"{db}.items") == [
        {"id": 1, "name": "a3", "txt": "long one"}, {"id": 2, "name": "b3", "txt": "new"},
        {"id": 3, "name": "c", "txt": None}]
    assert counts[f"{db}.items"].unknown_values == 0


def test_a_batch_whose_only_updates_leave_a_column_out_keeps_its_stored_values(spark, session_lake) -> None:
    # No message of the second batch lists `txt` at all: only the table knows the column.
    db = f"minimal{uuid.uuid4().hex[:6]}"
    apply_messages(spark, session_lake, db, "0", [
        canal(db, "INSERT", [{"id": "1", "name": "a", "txt": "one"}, {"id": "2", "name": "b", "txt": "two"}],
              100, types=FULL)])
    apply_messages(spark, session_lake, db, "1", [
        canal(db, "UPDATE", [{"id": "1", "name": "a2"}], 200, old=[{"name": "a"}], types=NO_TEXT)])
    assert dump_rows(session_lake, f"{db}.items") == [
        {"id": 1, "name": "a2", "txt": "one"}, {"id": 2, "name": "b", "txt": "two"}]


def test_a_key_change_that_leaves_a_column_out_takes_it_from_the_old_keys_row(spark, session_lake) -> None:
    # UPDATE SET id = .. under binlog_row_image=MINIMAL: the new key's row image leaves `txt` out, which the row
    # the key moved from holds: in the lake (an earlier batch) or in the batch itself. Several rows of one message
    # each take their own old row's value.
    db = f"rekey{uuid.uuid4().hex[:6]}"
    apply_messages(spark, session_lake, db, "0", [
        canal(db, "INSERT", [{"id": "1", "name": "a", "txt": "one"}, {"id": "2", "name": "b", "txt": "two"},
                             {"id": "3", "name": "c", "txt": "three"}], 100, types=FULL)])
    counts = apply_messages(spark, session_lake, db, "1", [
        canal(db, "UPDATE", [{"id": "5", "name": "a2"}], 200, old=[{"id": "1", "name": "a"}], types=NO_TEXT),
        canal(db, "UPDATE", [{"id": "6", "name": "b2"}, {"id": "7", "name": "c2"}], 210,
              old=[{"id": "2", "name": "b"}, {"id": "3", "name": "c"}], types=NO_TEXT),
        canal(db, "INSERT", [{"id": "8", "name": "d", "txt": "four"}], 220, types=FULL),
        canal(db, "UPDATE", [{"id": "9", "name": "d2"}], 230, old=[{"id": "8", "name": "d"}], types=NO_TEXT),
    ])
    assert dump_rows(session_lake, f"{db}.items") == [
        {"id": 5, "name": "a2", "txt": "one"}, {"id": 6, "name": "b2", "txt": "two"},
        {"id": 7, "name": "c2", "txt": "three"}, {"id": 9, "name": "d2", "txt": "four"}]
    assert counts[f"{db}.items"].unknown_values == 0


UPPER = {"ID": ("int", 4), "NAME": ("varchar(20)", 12)}


def test_a_key_change_whose_old_image_spells_the_key_in_another_case_moves_the_row(spark, session_lake) -> None:
    """``data`` spells the columns ``ID``, ``NAME`` (as the table does), ``old`` spells them ``id``, ``name``
    (MySQL's names are case-insensitive). The key change 2 -> 3 was missed: the old key's row stayed beside the
    new one."""
    db = f"recase{uuid.uuid4().hex[:6]}"
    first = canal(db, "INSERT", [{"ID": "1", "NAME": "a"}, {"ID": "2", "NAME": "b"}], 100, types=UPPER)
    apply_messages(spark, session_lake, db, "0", [{**first, "pkNames": ["ID"]}])
    moved = canal(db, "UPDATE", [{"ID": "3", "NAME": "b"}], 200, old=[{"id": "2"}], types=UPPER)
    renamed = canal(db, "UPDATE", [{"ID": "1", "NAME": "a2"}], 210, old=[{"name": "a"}], types=UPPER)
    counts = apply_messages(spark, session_lake, db, "1", [{**m, "pkNames": ["ID"]} for m in (moved, renamed)])
    assert dump_rows(session_lake, f"{db}.items") == [{"ID": 1, "NAME": "a2"}, {"ID": 3, "NAME": "b"}]
    c = counts[f"{db}.items"]
    assert (c.inserted, c.updated, c.deleted, c.rows_after) == (1, 1, 1, 2), c


def test_an_update_that_leaves_out_a_column_no_mysqltype_lists_keeps_it_in_the_batch_of_the_row_that_has_it(
        spark, session_lake) -> None:
    # Flink's canal-data-with-init.txt: `data` carries a column `mysqlType` never lists (`other`). An update whose
    # image leaves it out keeps the stored value, whether the image that wrote it is in the same batch or not; an
    # update whose image has it (a null too) writes it.
    db = f"unlisted{uuid.uuid4().hex[:6]}"
    apply_messages(spark, session_lake, db, "0", [
        canal(db, "INSERT", [{"id": "1", "name": "a", "other": "x1"}, {"id": "2", "name": "b", "other": "x2"},
                             {"id": "3", "name": "c", "Other": "x3"}], 100, types=NO_TEXT),
        canal(db, "UPDATE", [{"id": "1", "name": "a2"}, {"id": "2", "name": "b2", "other": None}], 110,
              old=[{"name": "a"}, {"name": "b"}], types=NO_TEXT),
    ])
    assert dump_rows(session_lake, f"{db}.items") == [
        {"id": 1, "name": "a2", "other": "x1"}, {"id": 2, "name": "b2", "other": None},
        {"id": 3, "name": "c", "other": "x3"}]
    apply_messages(spark, session_lake, db, "1", [
        canal(db, "UPDATE", [{"id": "3", "name": "c2", "OTHER": "y3"}, {"id": "1", "name": "a3"}], 200,
              old=[{"name": "c"}, {"name": "a2"}], types=NO_TEXT),
        canal(db, "UPDATE", [{"id": "3", "name": "c3"}], 210, old=[{"name": "c2"}], types=NO_TEXT),
    ])
    assert dump_rows(session_lake, f"{db}.items") == [
        {"id": 1, "name": "a3", "other": "x1"}, {"id": 2, "name": "b2", "other": None},
        {"id": 3, "name": "c3", "other": "y3"}]
