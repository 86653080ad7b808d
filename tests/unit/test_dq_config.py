"""Policy and suite configuration parsing, and the Data Quality page rendering (pure Python, no Spark)."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest

from cdclake.dq_config import DqConfig, DqPolicy, Policy, parse_duration
from cdclake.dq_suites import load_user_suite, snake_case
from cdclake.dq_web import docs_url, group_runs, render_overview, render_run, trend_svg
from cdclake.dq_results import RunContext, result_rows
from cdclake.exceptions import ConfigError
from cdclake.quality import ExpectationOutcome, ValidationSummary


@pytest.mark.parametrize(("value", "default", "tables"), [
    (None, Policy.FAIL, {}),
    ("", Policy.FAIL, {}),
    ("warn", Policy.WARN, {}),
    ("public.orders=quarantine, default=warn", Policy.WARN, {"public.orders": Policy.QUARANTINE}),
    ({"default": "fail", "a.b": "WARN"}, Policy.FAIL, {"a.b": Policy.WARN}),
])
def test_policy_parsing(value, default, tables):
    policy = DqPolicy.parse(value)
    assert (policy.default, dict(policy.tables)) == (default, tables)
    assert DqPolicy.parse(policy.to_text()) == policy


def test_policy_for_table_falls_back_to_default():
    policy = DqPolicy.parse("a.b=warn,default=quarantine")
    assert policy.for_table("a.b") is Policy.WARN
    assert policy.for_table("c.d") is Policy.QUARANTINE


@pytest.mark.parametrize(("value", "message"), [
    ("a.b=maybe", r"dq_policy \(a\.b\): unknown data-quality policy 'maybe'; expected one of fail, warn, quarantine"),
    ("orders=warn", r"table 'orders' must be namespace\.table"),
    ("a.b=", r"'a\.b=' is not TABLE=VALUE"),
])
def test_bad_policies_name_the_problem(value, message):
    with pytest.raises(ConfigError, match=message):
        DqPolicy.parse(value)


def test_config_from_env_param_overrides_env_per_table():
    config = DqConfig.from_env({"CDCLAKE_DQ_POLICY": "a.b=warn,default=quarantine",
                                "CDCLAKE_DQ_FRESHNESS": "a.b=2h,default=1d",
                                "CDCLAKE_DQ_MAX_QUARANTINED_SHARE": "0.25",
                                "CDCLAKE_DQ_SUITES": "/tmp/suites"}, policy="c.d=fail")
    assert config.policy.for_table("a.b") is Policy.WARN
    assert config.policy.for_table("c.d") is Policy.FAIL
    assert config.policy.for_table("e.f") is Policy.QUARANTINE
    assert config.freshness_sla("a.b") == timedelta(hours=2)
    assert config.freshness_sla("x.y") == timedelta(days=1)
    assert config.max_quarantined_share == 0.25
    assert config.suites_dir == Path("/tmp/suites")
    assert DqConfig.from_env({}).freshness_sla("a.b") is None


@pytest.mark.parametrize(("text", "seconds"), [("90", 90), ("90s", 90), ("15m", 900), ("2h", 7200), ("1.5d", 129600)])
def test_durations(text, seconds):
    assert parse_duration(text, where="x") == timedelta(seconds=seconds)


def test_bad_share_and_duration():
    with pytest.raises(ConfigError, match="CDCLAKE_DQ_MAX_QUARANTINED_SHARE='2'"):
        DqConfig.from_env({"CDCLAKE_DQ_MAX_QUARANTINED_SHARE": "2"})
    with pytest.raises(ConfigError, match=r"CDCLAKE_DQ_FRESHNESS \(a\.b\): 'soon' is not a duration"):
        DqConfig.from_env({"CDCLAKE_DQ_FRESHNESS": "a.b=soon"})


def test_user_suite_loading(tmp_path):
    (tmp_path / "a.b.yaml").write_text(
        "expectations:\n"
        "  - type: ExpectColumnValuesToBeBetween\n"
        "    kwargs: {column: amount, min_value: 0}\n"
        "    notes: never negative\n")
    (spec,) = load_user_suite(tmp_path, "a.b")
    assert (spec.type, dict(spec.kwargs), spec.notes) == ("expect_column_values_to_be_between",
                                                          {"column": "amount", "min_value": 0}, "never negative")
    assert load_user_suite(tmp_path, "no.suite") == []
    assert snake_case("ExpectColumnToExist") == "expect_column_to_exist"
    assert snake_case("ExpectColumnKLDivergenceToBeLessThan") == "expect_column_kl_divergence_to_be_less_than"


@pytest.mark.parametrize(("text", "message"), [
    ("expectations: {}", r"a\.b\.yaml: expected a mapping with a list 'expectations'"),
    ("expectations:\n  - type: expect_no_such_thing\n", r"a\.b\.yaml expectation 1: unknown Great Expectations"),
    ("expectations:\n  - type: expect_column_values_to_be_between\n    kwargs: {min_value: 0}\n",
     r"a\.b\.yaml expectation 1: invalid kwargs for expect_column_values_to_be_between"),
    ("expectations: [", r"a\.b\.yaml: not valid YAML"),
])
def test_bad_user_suites_name_file_and_item(tmp_path, text, message):
    (tmp_path / "a.b.yaml").write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_user_suite(tmp_path, "a.b")


def _row(run: str, table: str, expectation: str, success: bool, status: str, minute: int, **extra):
    return {"run_id": run, "table_id": table, "dag_id": "cdclake_ingest", "batch_id": "0001",
            "suite": f"cdclake.{table}",
            "policy": "warn", "status": status, "suite_success": status == "passed", "expectation": expectation,
            "column_name": "id", "success": success, "observed_value": 2, "details": {"unexpected_count": 2},
            "sample_rows": [{"id": 2, "name": "<b>x</b>"}] if not success else None,
            "data_docs_page": f"/lake/dq/gx/uncommitted/data_docs/local_site/validations/{run}.html",
            "validated_at": datetime(2026, 1, 1, 0, minute), **extra}


def test_overview_and_run_pages_show_status_failures_and_escape_values():
    rows = [
        _row("r2", "s.orders", "expect_column_values_to_be_unique", False, "warned", 2),
        _row("r2", "s.orders", "expect_column_values_to_not_be_null", True, "warned", 2),
        _row("r2", "s.customers", "expect_column_values_to_be_unique", True, "passed", 2),
        _row("r1", "s.orders", "expect_column_values_to_be_unique", True, "passed", 1),
    ]
    runs = group_runs(rows)
    assert {(r.run_id, r.table_id, r.status, r.evaluated, len(r.failures)) for r in runs} == {
        ("r2", "s.customers", "passed", 1, 0), ("r2", "s.orders", "warned", 2, 1), ("r1", "s.orders", "passed", 1, 0)}
    assert runs[-1].run_id == "r1"  # newest first

    page = render_overview(runs, lake=Path("/lake"))
    assert 'data-table="s.orders"' in page and "WARNED" in page and "PASSED" in page
    assert page.count("<svg") == 2 and "<rect" in page

    report = render_run("r2", runs, table="s.orders")
    assert "expect_column_values_to_be_unique" in report and "WARNED" in report
    assert "&lt;b&gt;x&lt;/b&gt;" in report and "<b>x</b>" not in report
    assert 'href="docs/validations/r2.html"' in report
    assert "No validation results" in render_run("r9", runs)


def test_a_runs_batch_suites_are_filed_under_their_own_batches():
    """A per-source run validates the table once and each of its batches' changes; each batch suite's rows carry
    that batch, and the run shows the newest batch."""
    def summary(suite: str, batch: str) -> ValidationSummary:
        outcome = ExpectationOutcome("expect_column_values_to_not_be_null", "id", True, 0, {})
        return ValidationSummary("s.orders", "r1", batch, True, (outcome,), Path(f"/dq/{suite}.json"), None,
                                 suite=suite)

    summaries = [summary("cdclake.s.orders", "00000003"), summary("cdclake_batch.s.orders", "00000002"),
                 summary("cdclake_batch.s.orders", "00000003")]
    rows = result_rows(summaries, context=RunContext(run_id="r1", source="src", batch_id="00000003"),
                       policies={"s.orders": "warn"}, statuses={"s.orders": "passed"},
                       validated_at=datetime(2026, 1, 1))
    assert [(r[4], r[6]) for r in rows] == [("00000003", "cdclake.s.orders"), ("00000002", "cdclake_batch.s.orders"),
                                          ("00000003", "cdclake_batch.s.orders")]
    run, = group_runs(_row("r1", "s.orders", "expect_column_values_to_be_unique", True, "passed", 1, batch_id=b)
                      for b in ("00000002", "00000003", "00000001"))
    assert (run.batch_id, run.evaluated) == ("00000003", 3)


def test_docs_url_and_trend():
    assert docs_url("/x/dq/gx/uncommitted/data_docs/local_site/validations/a b.html") == "docs/validations/a%20b.html"
    assert docs_url("/elsewhere/page.html") is None
    assert trend_svg([]) == ""
