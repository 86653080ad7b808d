"""A new lake whose first batch holds a change for a table it does not have yet: Debezium's truncate event (its
key is null, and it may reach a consumer before any other event of the table)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cli_session import run_cli_session

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "debezium"


def test_a_truncate_as_a_new_lakes_first_batch_keeps_its_position_for_older_changes(tmp_path: Path) -> None:
    lake = str(tmp_path / "lake")
    apply = ["apply", "--format", "debezium", "--lake", lake, "--key", "public.customers=id", "--input"]
    truncate, create = FIXTURES / "pg_truncate.json", FIXTURES / "pg_create.json"
    assert json.loads(create.read_text())["payload"]["source"]["lsn"] < json.loads(
        truncate.read_text())["payload"]["source"]["lsn"]
    first, second, dump = run_cli_session([
        [*apply, str(truncate)],
        [*apply, str(create)],  # older than the truncate, delivered after it: stale
        ["dump", "--lake", lake, "--table", "public.customers"],
    ], tmp_path / "cli")
    assert [c["exit"] for c in (first, second, dump)] == [0, 0, 0], (first["stderr"][-3000:], second["stderr"][-3000:])
    assert json.loads(first["stdout"])["quarantined"] == 0
    counts = json.loads(second["stdout"])["tables"]["public.customers"]
    assert (counts["inserted"], counts["skipped_stale"], counts["rows"]) == (0, 1, 0), counts
    assert dump["stdout"] == ""
