"""Changes of one key that share a source position and differ only in their landing tail.

canal's position is its binlog event time (whole seconds) and its server's batch id, so two changes of a key within
one second of one canal batch tie (as do the changes of a TiCDC transaction). A change delivered again (at-least-once
delivery after a connector restart) also has its original's source position. Apply takes changes for copies delivered
again by the *last* change of the key's run at that source position in the batch: a genuine change that happens to
repeat the stored row's values must not be dropped, and a copy of an insert must not bring back its own delete.

The expected rows are written out by hand: what the source database holds after the statements.
"""

from __future__ import annotations

import uuid

import pytest

from cdclake.apply_options import ApplyOptions
from cdclake.reader import dump_rows
from tests.support.canal_batches import apply_messages, canal


def _row(key: int, name: str) -> dict[str, str]:
    return {"id": str(key), "name": name}


def _update(db: str, key: int, name: str, was: str, position: int) -> dict[str, object]:
    return canal(db, "UPDATE", [_row(key, name)], position, old=[{"name": was}])


@pytest.mark.parametrize("mode", ["hard", "soft"])
def test_changes_that_share_a_source_position(spark, session_lake, mode: str) -> None:
    source = f"ties_{uuid.uuid4().hex[:6]}"
    back, again, gone = (f"{name}{uuid.uuid4().hex[:6]}" for name in ("back", "again", "gone"))
    first = [
        # back: a -> (b -> a in the next batch, in the same second of the same canal batch)
        canal(back, "INSERT", [_row(1, "x")], 4), _update(back, 1, "a", "x", 5),
        # again: x, a, b; the next batch is the connector sending a and b again
        canal(again, "INSERT", [_row(1, "x")], 4), _update(again, 1, "a", "x", 5), _update(again, 1, "b", "a", 5),
        # gone: inserted and deleted within one second; the next batch sends both again
        canal(gone, "INSERT", [_row(2, "c")], 6), canal(gone, "DELETE", [_row(2, "c")], 6),
    ]
    second = [
        _update(back, 1, "b", "a", 5), _update(back, 1, "a", "b", 5),
        _update(again, 1, "a", "x", 5), _update(again, 1, "b", "a", 5),
        canal(gone, "INSERT", [_row(2, "c")], 6), canal(gone, "DELETE", [_row(2, "c")], 6),
    ]
    options = ApplyOptions(delete_mode=mode)
    counts = [apply_messages(spark, session_lake, source, str(n), messages, options)
              for n, messages in enumerate((first, second))]

    def live(db: str) -> list[tuple[int, str]]:
        rows = dump_rows(session_lake, f"{db}.items", all_columns=True)
        return [(r["id"], r["name"]) for r in rows if not r.get("_cdc_is_deleted")]

    # back: b, then a again, is a genuine change although it repeats the stored row; again: the copies of a and b
    # change nothing; gone: the copy of the insert does not bring the deleted row back.
    assert {"back": live(back), "again": live(again), "gone": live(gone)} == {
        "back": [(1, "a")], "again": [(1, "b")], "gone": []}
    for db in (again, gone):
        applied = counts[1][f"{db}.items"]
        assert (applied.inserted, applied.updated, applied.deleted) == (0, 0, 0), (db, applied)
