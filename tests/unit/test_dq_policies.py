"""Broken tables through the real validate task body, under each data-quality policy.

Each case builds an Iceberg table in the session lake (its own namespace), stages one micro-batch of canonical
changes, applies it with the real pipeline, and validates with :func:`cdclake.orchestration.validate_tables`
(real Spark, Iceberg, Great Expectations). The oracle is the test data: which expectation must fail is read off
the rows each case writes, and the rows a quarantined table must keep are the rows written before the batch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from cdclake import dq_gate, dq_hold, dq_results
from cdclake.dq_config import DqConfig
from cdclake.identity import spark_table_name
from cdclake.normalize import staging_dir
from cdclake.orchestration import ValidationFailedError, validate_tables
from cdclake.pipeline import apply_batch
from cdclake.reader import dump_rows
from cdclake.settings import LakeSettings
from tests.support.dq_tables import create_table, stage_inserts

NOT_NULL = "expect_column_values_to_not_be_null"
UNIQUE = "expect_column_values_to_be_unique"
ROW_COUNT = "expect_table_row_count_to_equal"
FRESHNESS = "expect_column_max_to_be_between"
BETWEEN = "expect_column_values_to_be_between"

SOURCE_TS_OLD = datetime(2020, 1, 1)
NOW_NAIVE = datetime.now(timezone.utc).replace(tzinfo=None)


def _run(spark, settings: LakeSettings, tid: str, *, before: list[tuple[Any, str]], batch: list[tuple[int, str]],
         policy: str, source_ts: datetime = NOW_NAIVE, after_apply: str | None = None,
         freshness: str | None = None, monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, Any] | None, Any]:
    source = tid.replace(".", "_")
    create_table(spark, tid, before, source_ts=source_ts)
    stage_inserts(spark, settings, source=source, batch_id="0001", tables={tid: batch}, source_ts=source_ts)
    applied = apply_batch(spark, settings, source=source, batch_id="0001")
    if after_apply:
        spark.sql(after_apply.format(name=spark_table_name(tid)))
    monkeypatch.delenv("CDCLAKE_DQ_POLICY", raising=False)
    if freshness:
        monkeypatch.setenv("CDCLAKE_DQ_FRESHNESS", freshness)
    else:
        monkeypatch.delenv("CDCLAKE_DQ_FRESHNESS", raising=False)
    params = {"source": source, "format": "debezium", "lake": str(settings.root), "dq_policy": f"{tid}={policy}"}
    try:
        return validate_tables(params, applied.to_dict(), run_id=f"run-{source}", dag_id="cdclake_ingest"), None
    except ValidationFailedError as exc:
        return None, exc


def _failed(report: dict[str, Any], tid: str) -> list[tuple[str, str, str | None]]:
    return sorted((s["suite"], o["expectation"], o["column"]) for s in report["summaries"] if s["table_id"] == tid
                  for o in s["outcomes"] if not o["success"])


def _stored(settings: LakeSettings, tid: str) -> list[dict[str, Any]]:
    return [r for r in dq_results.read_rows(settings) if r["table_id"] == tid]


CASES = {
    # case: (rows before the batch, the batch's inserts, statement after apply, freshness SLA, source ts,
    #        the failed (suite, expectation, column))
    "duplicate_key": ([(1, "a"), (2, "b"), (2, "b again")], [(3, "c")], None, None, NOW_NAIVE,
                      [("cdclake.{t}", UNIQUE, "id")]),
    "null_key": ([(1, "a"), (None, "nobody")], [(3, "c")], None, None, NOW_NAIVE,
                 [("cdclake.{t}", NOT_NULL, "id")]),
    "row_count_mismatch": ([(1, "a"), (2, "b")], [(3, "c")], "DELETE FROM {name} WHERE id = 1", None, NOW_NAIVE,
                           [("cdclake.{t}", ROW_COUNT, None)]),
    "stale_data": ([(1, "a")], [(3, "c")], None, "1h", SOURCE_TS_OLD,
                   [("cdclake.{t}", FRESHNESS, "_cdc_source_ts")]),
}


@pytest.mark.parametrize("policy", ["fail", "warn", "quarantine"])
@pytest.mark.parametrize("case", list(CASES))
def test_broken_table_fails_exactly_the_expected_expectations(spark, session_lake, monkeypatch, case, policy):
    before, batch, after_apply, freshness, source_ts, expected = CASES[case]
    tid = f"dq_{case}_{policy}.items"
    expected = sorted((suite.format(t=tid), exp, col) for suite, exp, col in expected)

    report, error = _run(spark, session_lake, tid, before=before, batch=batch, policy=policy, source_ts=source_ts,
                         after_apply=after_apply, freshness=freshness, monkeypatch=monkeypatch)

    if policy == "fail":
        assert report is None and error is not None
        report = error.report
        message = str(error)
        assert "validation FAILED for 1 of 1 table(s)" in message
        for _, expectation, _ in expected:
            assert f"failed: {expectation}" in message
        assert "report: " in message and str(session_lake.dq_root / "results" / tid) in message
    else:
        assert error is None and report is not None and report["success"] is True
    assert _failed(report, tid) == expected
    status = {"fail": "failed", "warn": "warned", "quarantine": "quarantined"}[policy]
    assert report["tables"][tid]["status"] == status

    stored = _stored(session_lake, tid)
    assert {r["status"] for r in stored} == {status}
    assert {r["policy"] for r in stored} == {policy}
    assert sorted((r["suite"], r["expectation"], r["column_name"]) for r in stored if not r["success"]) == expected
    assert all(r["dag_id"] == "cdclake_ingest" and r["batch_id"] == "0001" for r in stored)
    assert all(r["report_json"] for r in stored)

    held = [h for h in dq_hold.list_held(session_lake) if h.table_id == tid]
    if policy == "quarantine":
        # The batch's insert of id 3 is held back: the table is what it was before the batch.
        (record,) = held
        assert expected[0][1] in record.reason
        ids = sorted((r["id"] is None, r["id"]) for r in dump_rows(session_lake, tid))
        assert ids == sorted((i is None, i) for i, _ in before)
        assert (staging_dir(session_lake, tid.replace(".", "_"), "0001") / "_held" / tid).is_dir()
    else:
        assert held == []
        assert 3 in {r["id"] for r in dump_rows(session_lake, tid)}


def test_sample_rows_show_the_offending_rows(spark, session_lake, monkeypatch):
    tid = "dq_samples.items"
    report, error = _run(spark, session_lake, tid, before=[(1, "a"), (2, "b"), (2, "b again")], batch=[(3, "c")],
                         policy="warn", monkeypatch=monkeypatch)
    assert error is None
    (row,) = [r for r in _stored(session_lake, tid) if r["expectation"] == UNIQUE]
    assert row["success"] is False
    assert sorted(r["name"] for r in row["sample_rows"]) == ["b", "b again"]
    assert row["details"]["partial_unexpected_list"] == [2, 2]


def _release_cli(spark, settings: LakeSettings, tid: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """``cdclake dq release`` of the table's batch 0001, in its own process; returns it and its JSON output."""
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("CDCLAKE_")},
           "CDCLAKE_SPARK_MASTER": "local[2]", "CDCLAKE_SHUFFLE_PARTITIONS": "2", "CDCLAKE_DRIVER_MEMORY": "1g"}
    args = ["dq", "release", "--lake", str(settings.root), "--source", tid.replace(".", "_"), "--batch", "0001",
            "--table", tid]
    try:
        proc = subprocess.run([str(Path(sys.executable).parent / "cdclake"), *args], env=env, capture_output=True,
                              text=True, timeout=600, check=False)
    finally:  # the other process committed: forget this session's cached metadata of the table
        spark.sql(f"REFRESH TABLE {spark_table_name(tid)}")
    assert proc.stdout, proc.stderr[-3000:]
    return proc, json.loads(proc.stdout)


def test_release_validates_again_and_holds_until_fixed(spark, session_lake, monkeypatch):
    tid = "dq_release.items"
    # Key 2 is duplicated in the table: the batch's insert of 3 and 4 is held back.
    report, _ = _run(spark, session_lake, tid, before=[(1, "a"), (2, "b"), (2, "b again")], batch=[(3, "c"), (4, "d")],
                     policy="quarantine", monkeypatch=monkeypatch)
    assert report["tables"][tid]["status"] == "quarantined"
    assert sorted(r["id"] for r in dump_rows(session_lake, tid)) == [1, 2, 2]

    # Released before the fix: applied, validated, failed, taken back out and held again (exit 1).
    again, out = _release_cli(spark, session_lake, tid)
    assert again.returncode == 1, again.stderr[-3000:]
    assert (out["status"], out["inserted"]) == ("quarantined", 2)
    assert out["failed"] == [f"cdclake.{tid}: {UNIQUE}(id), observed 2"]
    assert "failed validation again, so its changes are held again" in again.stderr and UNIQUE in again.stderr
    assert sorted(r["id"] for r in dump_rows(session_lake, tid)) == [1, 2, 2]
    assert [h.batch_id for h in dq_hold.list_held(session_lake) if h.table_id == tid] == ["0001"]
    first = [r for r in _stored(session_lake, tid) if r["run_id"] == out["run_id"]]
    assert {r["status"] for r in first} == {"quarantined"}
    assert [r["expectation"] for r in first if not r["success"]] == [UNIQUE]

    # The fix: the duplicate is removed. Released again: applied, validated, passed, nothing held.
    spark.sql(f"DELETE FROM {spark_table_name(tid)} WHERE name = 'b again'")
    done, out = _release_cli(spark, session_lake, tid)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (out["status"], out["failed"], out["inserted"], out["rows_after"]) == ("passed", [], 2, 4)
    assert [r["id"] for r in dump_rows(session_lake, tid)] == [1, 2, 3, 4]
    assert [h for h in dq_hold.list_held(session_lake) if h.table_id == tid] == []
    passed = [r for r in _stored(session_lake, tid) if r["run_id"] == out["run_id"]]
    assert passed and all(r["success"] and r["status"] == "passed" for r in passed)
    assert {r["suite"] for r in passed} == {f"cdclake.{tid}", f"cdclake_batch.{tid}"}


def test_batch_suite_failure_is_held_and_a_release_without_a_fix_is_held_again(spark, session_lake, monkeypatch):
    tid = "dq_future.items"
    source = tid.replace(".", "_")
    # The batch's source timestamps are two days in the future: only the batch suite's check fails.
    report, _ = _run(spark, session_lake, tid, before=[(1, "a")], batch=[(3, "c"), (4, "d")], policy="quarantine",
                     source_ts=NOW_NAIVE + timedelta(days=2), monkeypatch=monkeypatch)
    assert report["tables"][tid]["status"] == "quarantined"
    assert _failed(report, tid) == [(f"cdclake_batch.{tid}", BETWEEN, "source_ts")]
    assert [r["id"] for r in dump_rows(session_lake, tid)] == [1]

    with pytest.raises(ValidationFailedError, match="held again") as error:
        dq_gate.release(spark, session_lake, source=source, batch_id="0001", table_id=tid,
                        config=DqConfig.from_env({}), run_id="release-future")
    assert error.value.report["tables"][tid]["status"] == "quarantined"
    assert [r["id"] for r in dump_rows(session_lake, tid)] == [1]
    assert [h.run_id for h in dq_hold.list_held(session_lake) if h.table_id == tid] == ["release-future"]
    assert {(r["status"], r["success"]) for r in _stored(session_lake, tid) if r["run_id"] == "release-future"
            and r["expectation"] == BETWEEN} == {("quarantined", False)}


def test_user_suite_yaml_adds_expectations(spark, session_lake, monkeypatch, tmp_path: Path):
    tid = "dq_user.items"
    (tmp_path / f"{tid}.yaml").write_text(
        "expectations:\n"
        "  - type: ExpectColumnValuesToMatchRegex\n"
        "    kwargs: {column: name, regex: '^[a-z]+$'}\n"
        "    notes: names are lower-case words\n"
    )
    monkeypatch.setenv("CDCLAKE_DQ_SUITES", str(tmp_path))
    report, error = _run(spark, session_lake, tid, before=[(1, "a")], batch=[(3, "Not OK")], policy="fail",
                         monkeypatch=monkeypatch)
    assert report is None
    assert _failed(error.report, tid) == [(f"cdclake.{tid}", "expect_column_values_to_match_regex", "name")]
    (row,) = [r for r in _stored(session_lake, tid) if not r["success"]]
    assert [r["name"] for r in row["sample_rows"]] == ["Not OK"]


def test_a_tables_quarantined_share_counts_its_own_and_tableless_messages_only(spark, session_lake):
    from cdclake import quarantine
    from cdclake.pipeline import quarantined_share

    name = quarantine.ensure_table(spark)
    schema = spark.table(name).schema
    source = "dq_share"

    def row(batch_id: str, table_id: str | None) -> tuple[Any, ...]:
        values = {"source": source, "batch_id": batch_id, "table_id": table_id, "reason": "test"}
        return tuple(values.get(f.name) for f in schema.fields)
    # Batch 0001: 3 of s.bad, 1 of no known table (malformed JSON); s.bad's in batch 0002 do not count.
    spark.createDataFrame([row("0001", "s.bad")] * 3 + [row("0001", None), row("0002", "s.bad")],
                          schema).writeTo(name).append()
    assert quarantined_share(spark, source=source, batch_id="0001", table_id="s.good", staged=9) == 0.1
    assert quarantined_share(spark, source=source, batch_id="0001", table_id="s.bad", staged=4) == 0.5
    assert quarantined_share(spark, source="dq_share_other", batch_id="0001", table_id="s.good", staged=0) == 0.0
