"""``cdclake apply --validate`` is the data-quality gate the DAGs run: each table's policy, results stored (what
``cdclake dq results`` and the Data Quality pages read), exit 1 when a ``fail`` table failed."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.support.canal_batches import canal
from tests.support.cli_session import run_cli_session


def _write(path: Path, database: str, es_ms: int) -> Path:
    path.write_text(json.dumps(canal(database, "INSERT", [{"id": "1", "name": "a"}], es_ms)) + "\n")
    return path


def test_apply_validate_stores_results_and_fails_the_run_of_a_failed_fail_table(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lake = str(tmp_path / "lake")
    now_ms = int(time.time() * 1000)
    monkeypatch.setenv("CDCLAKE_DQ_FRESHNESS", "fresh.items=1h,stale.items=1h")
    monkeypatch.setenv("CDCLAKE_DQ_POLICY", "fail")
    apply = ["apply", "--format", "canal", "--lake", lake, "--validate", "--input"]
    passed, results, failed = run_cli_session([
        [*apply, str(_write(tmp_path / "fresh.jsonl", "fresh", now_ms))],
        ["dq", "results", "--lake", lake, "--table", "fresh.items"],
        [*apply, str(_write(tmp_path / "stale.jsonl", "stale", 1577836800000))],  # 2020: past its 1 h SLA
    ], tmp_path / "cli")
    assert [c["exit"] for c in (passed, results, failed)] == [0, 0, 1], failed["stderr"][-3000:]
    validation = json.loads(passed["stdout"])["validation"]["fresh.items"]
    assert (validation["success"], validation["status"], validation["failed"]) == (True, "passed", [])
    stored = [json.loads(line) for line in results["stdout"].splitlines()]
    assert stored and {r["status"] for r in stored} == {"passed"}
    validation = json.loads(failed["stdout"])["validation"]["stale.items"]
    assert (validation["success"], validation["status"], validation["policy"]) == (False, "failed", "fail")
    assert any("_cdc_source_ts" in f for f in validation["failed"]), validation
    assert "stale.items" in failed["stderr"]
