"""Broken messages of every format are quarantined one by one, with a reason, and never stop the batch.

Each ``tests/fixtures/broken/<format>.jsonl`` holds a few good messages and broken ones (truncated JSON, a
non-object, a field of the wrong type, no table, an unknown op/type, a value that does not cast to its column, a
decimal that does not fit, a missing key value). The sidecar ``<format>.expected.json`` maps each broken line's
number to a lower-case substring its quarantine reason must contain; every line not listed there is good.
The file goes through the CLI (a subprocess) into a fresh lake.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

CLI = [str(Path(sys.executable).parent / "cdclake")]
BROKEN = Path(__file__).resolve().parents[1] / "fixtures" / "broken"

GOOD_TABLES: dict[str, dict[str, int]] = {
    "canal": {"broken_db.items": 1},
    "drs": {"broken_db.items": 1, "broken_mongo.things": 1},
    "ckafka": {"broken_db.items": 1},
    "dtle": {"broken_db.items": 1},
    "debezium": {"public.items": 1},
}
"""Tables the good lines of each file create, with their row counts."""

QUARANTINED_TABLES: dict[str, dict[int, str]] = {"debezium": {11: "inventory.customers", 19: "public.customers"}}
"""The table some quarantined lines are recorded under (a Debezium MongoDB event, by its collection; an event in
Avro's JSON encoding, by its union-wrapped schema and table)."""

KEYS: dict[str, list[str]] = {"debezium": ["public.items=id"]}
"""``--key`` declarations: the Debezium file is message values without Kafka keys."""


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=900)


def expected_reasons(fmt: str) -> dict[int, str]:
    raw = json.loads((BROKEN / f"{fmt}.expected.json").read_text(encoding="utf-8"))
    return {int(line): substring for line, substring in raw.items()}


def test_sidecars_name_existing_lines() -> None:
    """Every annotated line exists, and every file has good lines besides the broken ones."""
    for fmt in GOOD_TABLES:
        lines = (BROKEN / f"{fmt}.jsonl").read_text(encoding="utf-8").splitlines()
        reasons = expected_reasons(fmt)
        assert reasons and max(reasons) <= len(lines), fmt
        assert len(reasons) < len(lines), fmt
        assert all(s == s.lower() and s for s in reasons.values()), fmt


@pytest.mark.parametrize("fmt", sorted(GOOD_TABLES))
def test_broken_messages_are_quarantined_with_reasons(fmt: str, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    source = BROKEN / f"{fmt}.jsonl"
    args = ["apply", "--format", fmt, "--input", str(source), "--lake", str(lake)]
    for key in KEYS.get(fmt, []):
        args += ["--key", key]
    result = run_cli(*args)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads(result.stdout)
    reasons = expected_reasons(fmt)

    listed = run_cli("quarantine", "list", "--lake", str(lake))
    assert listed.returncode == 0, listed.stderr[-2000:]
    rows: list[dict[str, Any]] = [json.loads(line) for line in listed.stdout.splitlines() if line.strip()]
    by_line: dict[int, list[dict[str, Any]]] = {}
    for row in rows:
        assert {"reason", "input_file", "line", "format", "batch_id", "value"} <= set(row), row
        assert Path(str(row["input_file"])).name == source.name, row
        by_line.setdefault(int(row["line"]), []).append(row)

    problems = []
    for line, substring in sorted(reasons.items()):
        found = by_line.get(line, [])
        if len(found) != 1:
            problems.append(f"line {line}: expected 1 quarantine row (reason ~ {substring!r}), found {len(found)}")
        elif substring not in str(found[0]["reason"]).lower():
            problems.append(f"line {line}: reason {found[0]['reason']!r} does not contain {substring!r}")
    for line in sorted(set(by_line) - set(reasons)):
        problems.append(f"line {line}: a good message was quarantined: {by_line[line][0]['reason']!r}")
    assert summary["quarantined"] == len(reasons), (summary, problems)
    assert not problems, f"{fmt}:\n" + "\n".join(problems)
    for line, tid in QUARANTINED_TABLES.get(fmt, {}).items():
        assert by_line[line][0]["table_id"] == tid, by_line[line][0]

    tables = json.loads(run_cli("tables", "--lake", str(lake)).stdout)
    for table, count in GOOD_TABLES[fmt].items():
        assert table in tables, (table, tables)
        dumped = run_cli("dump", "--lake", str(lake), "--table", table)
        assert dumped.returncode == 0, dumped.stderr[-2000:]
        assert len(dumped.stdout.splitlines()) == count, (table, dumped.stdout)
