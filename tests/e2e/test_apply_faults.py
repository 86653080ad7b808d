"""Fault injection: the apply process is killed (a real SIGKILL, ``CDCLAKE_FAULT``) at each step of a commit, and
re-runs converge to the reference applier's table, with the changelog holding each change exactly once.

The second batch is applied by a chain of runs, each killed at a later step than the one before: after the
changelog append, after the re-snapshot cut, after the MERGE commit (tombstones not yet recorded) and after the
tombstones. Every run starts from the state the previous crash left. The last run is given only a third batch's
input: it applies the crashed batch first, then the third.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from tests.support.cdc_model import Reference, encode, simulate

# In the extended tier (a `cdclake apply` killed after each commit step, then run again):
# `CDCLAKE_TESTS=all ./.ci/run`.
pytestmark = pytest.mark.extended

CHAIN = ("apply:after-changelog", "apply:after-cut", "apply:after-merge", "apply:after-tombstones")
TID = "faults.items"


def _cli(lake: Path, path: Path, fault: str | None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("CDCLAKE_FAULT", None)
    if fault:
        env["CDCLAKE_FAULT"] = fault
    return subprocess.run(
        [sys.executable, "-m", "cdclake.cli", "apply", "--format", "debezium", "--framing", "kcat",
         "--input", str(path), "--lake", str(lake)],
        capture_output=True, text=True, env=env, timeout=600, check=False)


def _stream() -> tuple[list, list, list]:
    events, _ = simulate([("upsert", 1), ("upsert", 2), ("upsert", 3), ("upsert", 4), ("update", 1, False),
                          ("snapshot", 0), ("delete", 2), ("update", 3, True), ("upsert", 5), ("rekey", 4, 6),
                          ("update", 5, False), ("upsert", 7)])
    first = [e for e in events if e.op != "r"][:5]
    snapshot = [e for e in events if e.op == "r" and e.key != 1]  # key 1's delete was "lost": the snapshot ends it
    snapshot[-1] = replace(snapshot[-1], snapshot="last")
    rest = [e for e in events if e.op != "r"][5:]
    return first, snapshot + rest[:-2], rest[-2:]


def _write(path: Path, events: list) -> Path:
    lines: list[str] = []
    for e in events:
        lines += encode(e, schema="faults", table="items", offset=len(lines))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_killed_applies_converge_to_the_reference(lake, tmp_path: Path) -> None:
    from cdclake.catalog import pyiceberg_catalog

    first, second, third = _stream()
    ref = Reference()
    ref.apply_batch(1, first)
    ref.apply_batch(2, second)
    ref.apply_batch(3, third)

    done = _cli(lake.root, _write(tmp_path / "b1.jsonl", first), None)
    assert done.returncode == 0, done.stderr[-3000:]
    second_path = _write(tmp_path / "b2.jsonl", second)
    for fault in CHAIN:
        killed = _cli(lake.root, second_path, fault)
        assert killed.returncode == -9, (fault, killed.returncode, killed.stderr[-3000:])
    # The next run brings new input only: the crashed batch is applied first (landing skips nothing new).
    final = _cli(lake.root, _write(tmp_path / "b3.jsonl", third), None)
    assert final.returncode == 0, final.stderr[-3000:]
    summary = json.loads(final.stdout)
    assert (summary["batch_id"], summary["new_batch"], summary["resumed_batches"]) == ("00000003", True, ["00000002"])

    catalog = pyiceberg_catalog(lake)
    table = catalog.load_table(TID)
    rows = table.scan().to_arrow().to_pylist()
    actual = {r["id"]: {"name": r["name"], "qty": r["qty"], "note": r["note"]} for r in rows}
    expected = {k: {c: v[c] for c in ("name", "qty", "note")} for k, v in ref.live().items()}
    assert actual == expected

    batches = {s.summary.additional_properties.get("cdclake.batch-id") for s in table.snapshots()}
    assert {"00000001", "00000002", "00000003"} <= batches

    changelog = catalog.load_table("cdclake_changelog.faults__items").scan().to_arrow().to_pylist()
    positions = Counter(r["_cdc_position"] for r in changelog)
    assert positions and max(positions.values()) == 1, "a change was appended to the changelog twice"
    assert {r["_cdc_batch_id"] for r in changelog} == {"00000001", "00000002", "00000003"}
