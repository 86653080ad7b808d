"""`cdclake apply` then `cdclake dump`, as other tooling drives them (subprocesses), against the oracle."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cdclake.demo.generator import generate, write_batches
from cdclake.demo.oracle import expected_tables
from tests.support.cli_session import run_cli_session

CLI = [str(Path(sys.executable).parent / "cdclake")]


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=600)


def dump(lake: Path, table: str) -> list[dict]:
    result = run_cli("dump", "--lake", str(lake), "--table", table)
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


@pytest.fixture(scope="module")
def stream_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Path], dict[str, list[dict]]]:
    stream = generate(seed=11, customers=12, orders=15, stream_changes=60, batches=3)
    files = write_batches(stream, tmp_path_factory.mktemp("inbox"))
    return files, expected_tables(stream.changes)


def test_apply_batches_then_dump_equals_replay(tmp_path: Path, stream_files) -> None:
    files, expected = stream_files
    lake = tmp_path / "lake"
    summaries = []
    for path in files:
        result = run_cli("apply", "--format", "debezium", "--input", str(path), "--lake", str(lake))
        assert result.returncode == 0, result.stderr[-3000:]
        summaries.append(json.loads(result.stdout))
    assert [s["batch_id"] for s in summaries] == ["00000001", "00000002", "00000003"]
    assert all(s["quarantined"] == 0 for s in summaries)
    assert summaries[0]["tables"]["public.customers"]["inserted"] == 12  # the snapshot
    assert sum(s["skipped"].get("tombstone (null value)", 0) for s in summaries) > 0

    tables = json.loads(run_cli("tables", "--lake", str(lake)).stdout)
    assert tables == sorted(expected)
    for table, rows in expected.items():
        assert dump(lake, table) == rows, table

    # Replaying an already-landed input is not a new batch and changes nothing.
    again = run_cli("apply", "--format", "debezium", "--input", str(files[1]), "--lake", str(lake))
    assert again.returncode == 0, again.stderr[-3000:]
    replay = json.loads(again.stdout)
    assert replay["batch_id"] == "00000002" and replay["new_batch"] is False
    assert all(c["inserted"] == c["updated"] == c["deleted"] == 0 for c in replay["tables"].values())
    for table, rows in expected.items():
        assert dump(lake, table) == rows, table

    full = run_cli("dump", "--lake", str(lake), "--table", "public.customers", "--all")
    first = json.loads(full.stdout.splitlines()[0])
    assert {"_cdc_position", "_cdc_op", "_cdc_source_ts", "_cdc_batch_id", "_cdc_applied_at"} <= set(first)


def test_out_of_order_batches_converge(tmp_path: Path, stream_files) -> None:
    """Batches applied newest-first, then again in order: the per-key high-water mark gives the same tables."""
    files, expected = stream_files
    lake = tmp_path / "lake"
    # The CLI contract is the test above; these applies share one process (one Spark start).
    calls = [["apply", "--format", "debezium", "--input", str(path), "--lake", str(lake)]
             for path in [files[2], files[0], files[1]]]
    results = run_cli_session(calls, tmp_path / "cli")
    assert [r["exit"] for r in results] == [0, 0, 0], results[-1]["stderr"][-3000:]
    # Deletes of the newest batch arrive before the older inserts of the same keys: tombstones keep them deleted.
    for table, rows in expected.items():
        assert dump(lake, table) == rows, table


@pytest.mark.parametrize(
    "args, message",
    [
        (["apply", "--format", "nope", "--input", "x", "--lake", "y"], "invalid choice"),
        (["apply", "--format", "debezium", "--input", "/does/not/exist", "--lake", "LAKE"], "no such file"),
        (["dump", "--lake", "TMP", "--table", "public.missing"], "no table"),
        (["dump", "--lake", "LAKE", "--table", "public.missing"], "no lake at"),
        (["dump", "--lake", "LAKE", "--table", "missing"], "is not a namespace.table"),
        (["apply", "--format", "debezium", "--input", "x", "--lake", "y", "--key", "t="], "at least one column"),
        (["apply", "--format", "debezium", "--input", "x", "--lake", "y", "--key", "=id"], "no table before"),
        (["apply", "--format", "debezium", "--input", "x", "--lake", "y", "--key", "t=id,id"], "named twice"),
        (["apply", "--format", "canal", "--input", "x", "--lake", "y", "--time-zone", "CST"], "expected an IANA name"),
        ([], "required"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    args = [a.replace("LAKE", str(tmp_path / "lake")).replace("TMP", str(tmp_path)) for a in args]
    result = run_cli(*args)
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0], result.stderr
