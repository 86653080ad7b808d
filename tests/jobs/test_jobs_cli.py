"""The spark-submit entry points in jobs/: each answers --help, and rejects bad arguments with exit status 2 and
a one-line error, before starting Spark."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
JOBS = REPO / "jobs"
JOB_NAMES = ["land_batch", "normalize_batch", "apply_changes", "validate_tables"]


def run_job(name: str, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(JOBS / f"{name}.py"), *args], capture_output=True, text=True,
                          timeout=120, cwd=cwd, check=False)


def test_every_job_file_is_covered() -> None:
    assert sorted(p.stem for p in JOBS.glob("*.py") if not p.name.startswith("_")) == sorted(JOB_NAMES)


@pytest.mark.parametrize("name", JOB_NAMES)
def test_help(name: str) -> None:
    proc = run_job(name, "--help")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"usage: {name}.py"), proc.stdout
    assert "spark-submit" in proc.stdout and "--lake" in proc.stdout and "--source" in proc.stdout
    assert proc.stderr == ""


def _assert_one_line_error(proc: subprocess.CompletedProcess[str], name: str, fragment: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"{name}.py: error: "), lines[0]
    assert fragment in lines[0], lines[0]
    assert proc.stdout == ""


@pytest.mark.parametrize("name", JOB_NAMES)
def test_no_arguments(name: str) -> None:
    _assert_one_line_error(run_job(name), name, "required: --source")


@pytest.mark.parametrize(("name", "args"), [
    ("land_batch", ["--source", "s", "--inbox", "x"]),
    ("normalize_batch", ["--source", "s", "--batch-id", "1"]),
    ("apply_changes", ["--source", "s", "--batch-id", "1"]),
    ("validate_tables", ["--source", "s", "--applied", "a.json"]),
])
def test_unknown_option(name: str, args: list[str]) -> None:
    _assert_one_line_error(run_job(name, *args, "--no-such-option"), name, "--no-such-option")


@pytest.mark.parametrize(("args", "fragment"), [
    (["--source", "s"], "either --inbox or INPUT"),
    (["--source", "s", "--inbox", "in", "file.jsonl"], "either --inbox or INPUT"),
    (["--source", "s", "--framing", "xml", "file.jsonl"], "invalid choice: 'xml'"),
    (["--source", "s", "--inbox", "in", "--framing", "kcat"], "--framing applies to INPUT files"),
])
def test_land_batch_bad_arguments(args: list[str], fragment: str) -> None:
    _assert_one_line_error(run_job("land_batch", *args), "land_batch", fragment)


def test_normalize_batch_bad_key(tmp_path: Path) -> None:
    proc = run_job("normalize_batch", "--lake", str(tmp_path / "lake"), "--source", "s", "--batch-id", "1",
                   "--key", "customers=")
    _assert_one_line_error(proc, "normalize_batch", "customers=")
    assert not (tmp_path / "lake").exists(), "a bad --key must be rejected before anything is created"


def test_validate_tables_missing_applied_file(tmp_path: Path) -> None:
    proc = run_job("validate_tables", "--source", "s", "--applied", str(tmp_path / "missing.json"))
    _assert_one_line_error(proc, "validate_tables", "missing.json")


def test_validate_tables_applied_file_is_not_an_apply_result(tmp_path: Path) -> None:
    applied = tmp_path / "applied.json"
    applied.write_text(json.dumps({"batch_id": "00000001"}))
    proc = run_job("validate_tables", "--source", "s", "--applied", str(applied))
    _assert_one_line_error(proc, "validate_tables", "not an ApplyResult")
