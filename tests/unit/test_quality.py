"""cdclake.quality against real Spark DataFrames and real Great Expectations; every dq_root is a tmp_path.

The oracles are the literal rows each test builds: which keys repeat, which are null and how many rows there are
are read off the test data, never computed by the code under test.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cdclake.quality import ValidationSummary, validate_table

NOT_NULL = "expect_column_values_to_not_be_null"
UNIQUE = "expect_column_values_to_be_unique"
COMPOUND_UNIQUE = "expect_compound_columns_to_be_unique"
ROW_COUNT = "expect_table_row_count_to_equal"

SCHEMA = "id int, name string, _cdc_op string, _cdc_lsn bigint"
CLEAN_ROWS = [(1, "ann", "c", 10), (2, "bob", "u", 11), (3, "cy", "c", 12)]


def _validate(spark, dq_root: Path, rows, *, schema: str = SCHEMA, table_id: str = "shop.customers",
              key_columns=("id",), expected_row_count: int | None = None, run_id: str = "run-1",
              batch_id: str = "batch-0001") -> ValidationSummary:
    df = spark.createDataFrame(rows, schema)
    return validate_table(df, table_id=table_id, key_columns=list(key_columns), expected_row_count=expected_row_count,
                          dq_root=dq_root, run_id=run_id, batch_id=batch_id)


def _types(summary: ValidationSummary) -> list[str]:
    return [outcome.expectation for outcome in summary.outcomes]


def test_clean_table_passes_and_writes_report_and_data_docs(spark, tmp_path, capfd):
    summary = _validate(spark, tmp_path, CLEAN_ROWS, expected_row_count=3)

    assert summary.success
    assert summary.failed() == ()
    assert _types(summary) == [NOT_NULL, UNIQUE, ROW_COUNT]
    assert [outcome.column for outcome in summary.outcomes] == ["id", "id", None]
    row_count = summary.outcomes[2]
    assert row_count.observed_value == 3
    assert row_count.details["expected"] == {"value": 3}

    assert summary.report_json == tmp_path / "results" / "shop.customers" / "run-1.json"
    report = json.loads(summary.report_json.read_text())
    assert report["summary"] == json.loads(json.dumps(summary.to_dict()))
    assert report["summary"]["batch_id"] == "batch-0001"
    assert report["validation_result"]["success"] is True
    assert report["validation_result"]["statistics"]["evaluated_expectations"] == 3
    assert report["validation_result"]["meta"]["run_id"]["run_name"] == "run-1"

    assert summary.data_docs_index == tmp_path / "gx" / "uncommitted" / "data_docs" / "local_site" / "index.html"
    assert summary.data_docs_index.is_file()
    # cdclake's offline styles are inlined into the pages (GE's own load from CDNs).
    assert "cdclake offline styles" in summary.data_docs_index.read_text()
    assert summary.data_docs_page is not None and summary.data_docs_page.is_file()
    assert summary.data_docs_page.is_relative_to(tmp_path)
    assert "run-1" in summary.data_docs_page.parts

    captured = capfd.readouterr()
    assert captured.out == ""
    assert "Calculating Metrics" not in captured.err


def test_to_dict_is_compact_json(spark, tmp_path):
    summary = _validate(spark, tmp_path, CLEAN_ROWS, expected_row_count=3)

    data = json.loads(json.dumps(summary.to_dict()))
    assert data["table_id"] == "shop.customers"
    assert data["run_id"] == "run-1"
    assert data["success"] is True
    assert (data["evaluated"], data["failed"]) == (3, 0)
    assert [o["expectation"] for o in data["outcomes"]] == [NOT_NULL, UNIQUE, ROW_COUNT]
    assert data["report_json"] == str(summary.report_json)


def test_duplicate_key_fails_only_uniqueness(spark, tmp_path):
    rows = CLEAN_ROWS + [(2, "bob again", "u", 13)]

    summary = _validate(spark, tmp_path, rows, expected_row_count=4)

    assert not summary.success
    (failed,) = summary.failed()
    assert (failed.expectation, failed.column) == (UNIQUE, "id")
    # Both rows carrying id 2 are unexpected.
    assert failed.observed_value == 2
    assert failed.details["unexpected_count"] == 2
    assert failed.details["partial_unexpected_list"] == [2, 2]
    assert json.loads(summary.report_json.read_text())["summary"]["failed"] == 1


def test_null_key_fails_only_not_null(spark, tmp_path):
    rows = CLEAN_ROWS + [(None, "nobody", "c", 13)]

    summary = _validate(spark, tmp_path, rows, expected_row_count=4)

    assert not summary.success
    (failed,) = summary.failed()
    assert (failed.expectation, failed.column) == (NOT_NULL, "id")
    assert failed.observed_value == 1
    assert failed.details["unexpected_count"] == 1
    assert failed.details["element_count"] == 4


def test_row_count_mismatch_fails_only_row_count(spark, tmp_path):
    summary = _validate(spark, tmp_path, CLEAN_ROWS, expected_row_count=5)

    assert not summary.success
    (failed,) = summary.failed()
    assert (failed.expectation, failed.column) == (ROW_COUNT, None)
    assert failed.observed_value == len(CLEAN_ROWS)
    assert failed.details["expected"] == {"value": 5}


def test_no_expected_row_count_means_no_row_count_expectation(spark, tmp_path):
    summary = _validate(spark, tmp_path, CLEAN_ROWS, expected_row_count=None)

    assert summary.success
    assert _types(summary) == [NOT_NULL, UNIQUE]


def test_compound_key(spark, tmp_path):
    schema = "tenant string, id int, amount double, _cdc_op string"
    unique_rows = [("a", 1, 1.0, "c"), ("a", 2, 2.0, "c"), ("b", 1, 3.0, "c")]

    passed = _validate(spark, tmp_path, unique_rows, schema=schema, table_id="shop.orders",
                       key_columns=("tenant", "id"), expected_row_count=3, run_id="run-1")
    assert passed.success
    assert _types(passed) == [NOT_NULL, NOT_NULL, COMPOUND_UNIQUE, ROW_COUNT]
    assert [o.column for o in passed.outcomes] == ["tenant", "id", "tenant,id", None]

    # ("a", 1) twice; ("b", 2) shares each part with another row but is a new key.
    failing_rows = unique_rows + [("a", 1, 9.0, "u"), ("b", 2, 4.0, "c")]
    failed_run = _validate(spark, tmp_path, failing_rows, schema=schema, table_id="shop.orders",
                           key_columns=("tenant", "id"), expected_row_count=5, run_id="run-2")
    (failed,) = failed_run.failed()
    assert (failed.expectation, failed.column) == (COMPOUND_UNIQUE, "tenant,id")
    assert failed.observed_value == 2
    assert sorted(failed.details["partial_unexpected_list"], key=str) == [{"tenant": "a", "id": 1}] * 2


def test_tables_and_runs_accumulate_in_one_dq_root(spark, tmp_path):
    first = _validate(spark, tmp_path, CLEAN_ROWS, table_id="shop.customers", expected_row_count=3, run_id="run-1")
    second = _validate(spark, tmp_path, [(7, "x", "c", 1)], table_id="crm.contacts", expected_row_count=1,
                       run_id="run-1")
    # A later run of the first table reloads its stored suite, validation definition and checkpoint.
    rerun = _validate(spark, tmp_path, CLEAN_ROWS[:2], table_id="shop.customers", expected_row_count=2,
                      run_id="run-2", batch_id="batch-0002")

    assert first.success and second.success and rerun.success
    assert first.report_json != second.report_json != rerun.report_json
    for summary in (first, second, rerun):
        report = json.loads(summary.report_json.read_text())
        assert report["summary"]["table_id"] == summary.table_id
        assert report["summary"]["run_id"] == summary.run_id
        assert summary.data_docs_page is not None and summary.data_docs_page.is_file()
    assert sorted(p.relative_to(tmp_path / "results").as_posix() for p in (tmp_path / "results").rglob("*.json")) == [
        "crm.contacts/run-1.json", "shop.customers/run-1.json", "shop.customers/run-2.json",
    ]
    index = rerun.data_docs_index.read_text()
    assert "cdclake.shop.customers" in index and "cdclake.crm.contacts" in index


def test_missing_key_column_names_table_and_column(spark, tmp_path):
    with pytest.raises(ValueError, match=r"shop\.customers.*customer_id"):
        _validate(spark, tmp_path, CLEAN_ROWS, key_columns=("customer_id",), expected_row_count=3)
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize("run_id", ["", "a/b", ".."])
def test_run_id_must_name_a_file(spark, tmp_path, run_id):
    with pytest.raises(ValueError, match="run_id"):
        _validate(spark, tmp_path, CLEAN_ROWS, run_id=run_id)


def test_an_expectation_that_raises_keeps_the_reason(spark, tmp_path):
    # A column that does not exist and a regular expression that does not compile: GE reports them as raised
    # exceptions (in GE 1.x keyed by the metric that raised), which the outcome must keep as its reason.
    from cdclake.dq_suites import ExpectationSpec

    df = spark.createDataFrame(CLEAN_ROWS, SCHEMA)
    summary = validate_table(df, table_id="shop.customers", key_columns=["id"], expected_row_count=None,
                             dq_root=tmp_path, run_id="run-raise", batch_id="batch-0001", extra_expectations=[
                                 ExpectationSpec(NOT_NULL, {"column": "amout"}),
                                 ExpectationSpec("expect_column_values_to_match_regex",
                                                 {"column": "name", "regex": "(["})])
    failed = {o.column: o for o in summary.failed()}
    assert set(failed) == {"amout", "name"}
    assert "amout" in failed["amout"].details["exception"]
    assert failed["name"].details["exception"]
