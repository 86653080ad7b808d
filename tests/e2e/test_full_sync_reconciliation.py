"""A DRS full sync (``INIT`` rows, no end marker) reconciles the table once a streamed change follows it.

The table holds rows 1, 2, 3 from streamed changes; a full sync re-reads rows 1 and 3 over two batches (row 2 was
deleted at the source while the task was not syncing, so no DELETE ever comes); the first INSERT after it
completes the full sync, and row 2 goes. The expected tables are written out by hand from those semantics.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.cli_session import run_cli_session

TABLE = "shop.items"


def drs(message_id: int, kind: str, *rows: dict[str, Any]) -> str:
    return json.dumps({
        "mysqlType": {"id": "int", "name": "varchar"}, "sqlType": {"id": 4, "name": 12},
        "id": message_id, "es": 1700000000000 + message_id, "ts": 1700000000500 + message_id,
        "database": "shop", "table": "items", "type": kind, "isDdl": False, "sql": "",
        "data": [{"id": str(r["id"]), "name": r["name"]} for r in rows], "old": None, "pkNames": ["id"],
    })


def rows(dump_call: dict[str, Any]) -> list[tuple[int, str]]:
    assert dump_call["exit"] == 0, dump_call["stderr"][-3000:]
    return [(r["id"], r["name"]) for r in map(json.loads, dump_call["stdout"].splitlines())]


def test_a_full_sync_completed_by_a_later_streamed_change_removes_rows_it_did_not_see(tmp_path: Path) -> None:
    batches = {
        "b1": [drs(1, "INSERT", {"id": 1, "name": "a"}, {"id": 2, "name": "b"}, {"id": 3, "name": "c"}),
               drs(2, "UPDATE", {"id": 3, "name": "c2"})],
        # The full sync: row 1 in one batch, row 3 in the next (its value changed at the source meanwhile).
        "b2": [drs(10, "INIT", {"id": 1, "name": "a"})],
        "b3": [drs(11, "INIT", {"id": 3, "name": "c3"})],
        # Streamed again: the full sync is complete.
        "b4": [drs(12, "INSERT", {"id": 4, "name": "d"})],
        # A whole full sync and the change that completes it, in one batch: it re-reads rows 1 and 4 (4 changed).
        "b5": [drs(20, "INIT", {"id": 1, "name": "a"}), drs(21, "INIT", {"id": 4, "name": "d2"}),
               drs(22, "INSERT", {"id": 5, "name": "e"})],
    }
    lake = tmp_path / "lake"
    calls: list[list[str]] = []
    for name, lines in batches.items():
        path = tmp_path / f"{name}.jsonl"
        path.write_text("\n".join(lines) + "\n")
        calls.append(["apply", "--format", "drs", "--input", str(path), "--lake", str(lake)])
        calls.append(["dump", "--lake", str(lake), "--table", TABLE])
    results = run_cli_session(calls, tmp_path / "cli")
    assert [r["exit"] for r in results] == [0] * len(calls), results[-1]["stderr"][-3000:]
    applied = [json.loads(r["stdout"]) for r in results[0::2]]
    assert all(a["quarantined"] == 0 for a in applied), applied
    dumps = [rows(r) for r in results[1::2]]

    assert dumps[0] == [(1, "a"), (2, "b"), (3, "c2")]
    # While the full sync is open, rows it has not re-read yet stay.
    assert dumps[1] == [(1, "a"), (2, "b"), (3, "c2")]
    assert dumps[2] == [(1, "a"), (2, "b"), (3, "c3")]
    assert dumps[3] == [(1, "a"), (3, "c3"), (4, "d")]
    assert dumps[4] == [(1, "a"), (4, "d2"), (5, "e")]
    counted = ("inserted", "updated", "deleted", "truncated", "rows")
    # Row 2 is the one the full sync did not see; rows 1 and 3 were already replaced by batches 2 and 3.
    assert [applied[3]["tables"][TABLE][c] for c in counted] == [1, 0, 0, 1, 3]
    # The rows the full sync read again are replaced (updated), not counted as removed and inserted.
    assert [applied[4]["tables"][TABLE][c] for c in counted] == [1, 2, 0, 1, 3]
