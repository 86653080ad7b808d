"""Data-quality gate for an applied Iceberg table: Great Expectations 1.x suites, JSON reports and Data Docs.

Every validated table gets one expectation suite, ``cdclake.<namespace>.<table>``:

* ``expect_column_values_to_not_be_null`` for each primary-key column;
* ``expect_column_values_to_be_unique`` for a one-column key, ``expect_compound_columns_to_be_unique`` for a
  compound key;
* ``expect_table_row_count_to_equal`` when the caller knows the row count the applied changes imply (rows before
  the batch + inserted - deleted). The count is a suite parameter supplied per run, so the stored suite does not
  change from one batch to the next.

Layout under ``dq_root`` (``LakeSettings.dq_root``)::

    dq_root/
      results/<namespace>.<table>/<run_id>.json      our summary + GE's validation result, one file per run
      gx/expectations/, gx/validation_definitions/, gx/checkpoints/
      gx/uncommitted/validations/                    GE's own store of validation results
      gx/uncommitted/data_docs/local_site/index.html Data Docs (every stored run of every table)

The GE context is ephemeral with file-system stores under ``dq_root/gx``: suites, validation definitions, results
and Data Docs persist (one file per object), but the Spark datasource lives only in memory. A file context would
rewrite one shared ``great_expectations.yml`` on every datasource change, which concurrent Airflow tasks validating
different tables would race on.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence
from urllib.parse import urlparse
from urllib.request import url2pathname

if TYPE_CHECKING:
    from great_expectations.data_context import AbstractDataContext
    from pyspark.sql import DataFrame

    from cdclake.dq_suites import ExpectationSpec

log = logging.getLogger(__name__)

DATASOURCE_NAME = "cdclake_spark"
"""Name of the in-memory GE Spark datasource; one DataFrame asset per table hangs off it."""

BATCH_DEFINITION_NAME = "whole_table"
DOCS_SITE_NAME = "local_site"
ROW_COUNT_PARAMETER = "expected_row_count"
"""Suite parameter the row-count expectation reads its value from at run time."""

PARTIAL_UNEXPECTED_LIMIT = 10
SAMPLE_ROWS_LIMIT = 5
"""Offending rows kept per failed expectation (``details["sample_rows"]``), for the Data Quality page."""
RESULT_FORMAT: dict[str, Any] = {"result_format": "SUMMARY", "partial_unexpected_count": PARTIAL_UNEXPECTED_LIMIT}
"""SUMMARY keeps counts and a few sample values; COMPLETE would list every offending row of a large table."""

_SUMMARY_RESULT_KEYS = ("element_count", "missing_count", "unexpected_count", "unexpected_percent")
_TARGET_KWARGS = frozenset({"batch_id", "column", "column_list"})


@dataclass(frozen=True)
class ExpectationOutcome:
    """The outcome of one expectation in one validation run.

    Attributes:
        expectation: GE expectation type, e.g. ``expect_column_values_to_not_be_null``.
        column: The column, comma-joined columns for a compound expectation, or None for a table-level one.
        success: Whether the expectation held.
        observed_value: GE's ``observed_value`` for aggregate expectations (e.g. the row count), else the
            ``unexpected_count`` of a column-map expectation; JSON-serializable.
        details: Compact extra information: unexpected counts and percentages, up to ten sample offending values
            (``partial_unexpected_list``), the expected kwargs (``expected``) and any exception GE caught.
    """

    expectation: str
    column: str | None
    success: bool
    observed_value: Any
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ValidationSummary:
    """The result of validating one table in one run.

    Attributes:
        table_id: ``namespace.table``.
        run_id: The caller's run identifier (e.g. the Airflow run id); GE's run name.
        batch_id: The change batch that was applied before this validation.
        success: True when every expectation held.
        outcomes: One outcome per expectation, in suite order.
        report_json: The JSON report of this run (our summary plus GE's full validation result).
        data_docs_index: The Data Docs site's ``index.html``, or None when the site was not built.
        data_docs_page: This run's Data Docs validation page, or None when GE did not report one.
        suite: The expectation suite's name (``cdclake.<table>`` or ``cdclake_batch.<table>``).
    """

    table_id: str
    run_id: str
    batch_id: str
    success: bool
    outcomes: tuple[ExpectationOutcome, ...]
    report_json: Path
    data_docs_index: Path | None
    data_docs_page: Path | None = None
    suite: str = ""

    def failed(self) -> tuple[ExpectationOutcome, ...]:
        """Return the outcomes of the expectations that did not hold."""
        return tuple(outcome for outcome in self.outcomes if not outcome.success)

    def compact(self) -> dict[str, Any]:
        """Return :meth:`to_dict` with only the failed outcomes, without sample rows (for Airflow XCom)."""
        data = self.to_dict()
        data["outcomes"] = [
            {**asdict(o), "details": {k: v for k, v in o.details.items() if k != "sample_rows"}}
            for o in self.failed()
        ]
        return data

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serializable summary with every outcome (the JSON report's ``summary``)."""
        return {
            "table_id": self.table_id,
            "suite": self.suite or suite_name(self.table_id),
            "run_id": self.run_id,
            "batch_id": self.batch_id,
            "success": self.success,
            "evaluated": len(self.outcomes),
            "failed": len(self.failed()),
            "outcomes": [asdict(outcome) for outcome in self.outcomes],
            "report_json": str(self.report_json),
            "data_docs_index": None if self.data_docs_index is None else str(self.data_docs_index),
            "data_docs_page": None if self.data_docs_page is None else str(self.data_docs_page),
        }


def suite_name(table_id: str) -> str:
    """Return the expectation-suite name of a table (also used for its validation definition and checkpoint).

    GE's file-system stores split a suite name on dots into directories, so ``cdclake.ns.t`` is stored under
    ``expectations/cdclake/ns/t.json``.
    """
    return f"cdclake.{table_id}"


def batch_suite_name(table_id: str) -> str:
    """Return the name of a table's micro-batch suite (run on the batch's canonical changes)."""
    return f"cdclake_batch.{table_id}"


def report_path(dq_root: Path, table_id: str, run_id: str, *, suffix: str = "") -> Path:
    """Return where the JSON report of one validation run is written: ``dq_root/results/<table_id>/<run_id>.json``.

    ``suffix`` (e.g. ``.batch``) tells apart the reports of other suites of the same table and run.
    """
    return Path(dq_root) / "results" / table_id / f"{run_id}{suffix}.json"


def validate_table(
    df: "DataFrame",
    *,
    table_id: str,
    key_columns: Sequence[str],
    expected_row_count: int | None,
    dq_root: Path,
    run_id: str,
    batch_id: str,
    extra_expectations: Sequence["ExpectationSpec"] = (),
    expectation_parameters: Mapping[str, Any] | None = None,
    suite: str | None = None,
) -> ValidationSummary:
    """Validate a table's current contents with its cdclake expectation suite.

    Creates or updates the table's suite, validation definition and checkpoint, runs the checkpoint on ``df``
    (which updates Data Docs), and writes the JSON report. Safe to call repeatedly, for many tables, in one
    process or in several processes sharing ``dq_root``; earlier reports are kept.

    Args:
        df: The table as read with Spark (user columns plus the ``_cdc_*`` columns); validated as given.
        table_id: ``namespace.table``.
        key_columns: Primary-key columns; each must be a column of ``df``. Empty for a keyless table, which then
            gets no key expectations.
        expected_row_count: Row count the applied changes imply (rows before + inserted - deleted), or None to
            skip the row-count expectation.
        dq_root: Data-quality root directory (``LakeSettings.dq_root``).
        run_id: Run identifier (e.g. the Airflow run id); names the report file and the GE run.
        batch_id: The change batch that was applied; recorded in the report.
        extra_expectations: More expectations (generated or user, :mod:`cdclake.dq_suites`), after the key and
            row-count ones.
        expectation_parameters: Values of ``{"$PARAMETER": name}`` kwargs of ``extra_expectations``.
        suite: Suite name; default :func:`suite_name`. Another name (e.g. :func:`batch_suite_name`) gets its own
            GE asset, suite and checkpoint, and its report is ``<run_id>.batch.json`` for ``cdclake_batch.*``.

    Returns:
        The run's summary.

    Raises:
        ValueError: A key column missing from ``df``, or a ``table_id``/``run_id`` that cannot name a file.
    """
    _check_name("table_id", table_id)
    _check_name("run_id", run_id)
    keys = list(dict.fromkeys(key_columns))
    missing = [column for column in keys if column not in df.columns]
    if missing:
        raise ValueError(
            f"table {table_id}: key column(s) {', '.join(missing)} not in the DataFrame "
            f"(columns: {', '.join(df.columns)})"
        )

    _quiet_great_expectations()
    import great_expectations as gx
    from great_expectations.core.run_identifier import RunIdentifier

    dq_root = Path(dq_root).resolve()
    context = _context(dq_root)
    name = suite or suite_name(table_id)
    default_suite = name == suite_name(table_id)
    report_suffix = "" if default_suite else "." + name.split(".", 1)[0].removeprefix("cdclake_")

    datasource = context.data_sources.add_or_update_spark(name=DATASOURCE_NAME, persist=False)
    asset = _dataframe_asset(datasource, table_id if default_suite else name)
    batch_definition = _whole_table_batch_definition(asset)
    expectations = _expectations(keys, with_row_count=expected_row_count is not None)
    expectations += [spec.build() for spec in extra_expectations]
    gx_suite = context.suites.add_or_update(gx.ExpectationSuite(name=name, expectations=expectations))
    validation_definition = context.validation_definitions.add_or_update(
        gx.ValidationDefinition(name=name, data=batch_definition, suite=gx_suite)
    )
    checkpoint = context.checkpoints.add_or_update(
        gx.Checkpoint(
            name=name,
            validation_definitions=[validation_definition],
            actions=[gx.checkpoint.UpdateDataDocsAction(name="update_data_docs", site_names=[DOCS_SITE_NAME])],
            result_format=RESULT_FORMAT,
        )
    )

    parameters = dict(expectation_parameters or {})
    if expected_row_count is not None:
        parameters[ROW_COUNT_PARAMETER] = int(expected_row_count)
    checkpoint_result = checkpoint.run(
        batch_parameters={"dataframe": df},
        expectation_parameters=parameters,
        run_id=RunIdentifier(run_name=run_id, run_time=datetime.now(timezone.utc)),
    )
    # One validation definition per checkpoint, so exactly one result.
    [(result_key, validation_result)] = checkpoint_result.run_results.items()
    result_json = validation_result.to_json_dict()

    summary = ValidationSummary(
        table_id=table_id,
        run_id=run_id,
        batch_id=batch_id,
        success=bool(result_json["success"]),
        outcomes=tuple(_with_sample_rows(df, _outcome(item)) for item in result_json["results"]),
        report_json=report_path(dq_root, table_id, run_id, suffix=report_suffix),
        data_docs_index=_docs_path(context, None),
        data_docs_page=_docs_path(context, result_key),
        suite=name,
    )
    _write_json(summary.report_json, {"summary": summary.to_dict(), "validation_result": result_json})
    log.info(
        "validated %s with %s (run %s, batch %s): %s, %d of %d expectations failed; report %s",
        table_id, name, run_id, batch_id, "passed" if summary.success else "FAILED", len(summary.failed()),
        len(summary.outcomes), summary.report_json,
    )
    return summary


def _check_name(what: str, value: str) -> None:
    if not value or value in (".", "..") or "/" in value or os.sep in value:
        raise ValueError(f"{what}={value!r} cannot name a report file: it must be non-empty and contain no '/'")


def _quiet_great_expectations() -> None:
    # GE logs dozens of INFO lines at import (API-doc registration) and per run; under Airflow's INFO root logger
    # they would flood task logs. Leave the level alone if the application has set one.
    ge_logger = logging.getLogger("great_expectations")
    if ge_logger.level == logging.NOTSET:
        ge_logger.setLevel(logging.WARNING)
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")


OFFLINE_STYLES = "dq_docs.css"
"""Package data: Data Docs styles that keep the pages readable when GE's CDN stylesheets cannot be reached."""


def _install_offline_styles(plugins: Path) -> None:
    """Put cdclake's stylesheet where GE takes a site's custom styles from (inlined into every page)."""
    target = plugins / "custom_data_docs" / "styles" / "data_docs_custom_styles.css"
    import importlib.resources

    css = importlib.resources.files("cdclake").joinpath(OFFLINE_STYLES).read_text(encoding="utf-8")
    if not target.exists() or target.read_text(encoding="utf-8") != css:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(css, encoding="utf-8")


def _context(dq_root: Path) -> "AbstractDataContext":
    import great_expectations as gx
    from great_expectations.data_context.types.base import (
        DataContextConfig,
        FilesystemStoreBackendDefaults,
        ProgressBarsConfig,
    )

    defaults = FilesystemStoreBackendDefaults(root_directory=str(dq_root / "gx"))
    defaults.data_docs_sites[DOCS_SITE_NAME]["show_how_to_buttons"] = False
    plugins = dq_root / "gx" / "plugins"
    _install_offline_styles(plugins)
    config = DataContextConfig(
        plugins_directory=str(plugins),
        store_backend_defaults=defaults,
        analytics_enabled=False,
        progress_bars=ProgressBarsConfig(globally=False, metric_calculations=False),
    )
    return gx.get_context(project_config=config, mode="ephemeral")


def _dataframe_asset(datasource: Any, table_id: str) -> Any:
    try:
        return datasource.get_asset(table_id)
    except LookupError:
        return datasource.add_dataframe_asset(name=table_id)


def _whole_table_batch_definition(asset: Any) -> Any:
    try:
        return asset.get_batch_definition(BATCH_DEFINITION_NAME)
    except KeyError:
        return asset.add_batch_definition_whole_dataframe(BATCH_DEFINITION_NAME)


def _expectations(keys: Sequence[str], *, with_row_count: bool) -> list[Any]:
    import great_expectations.expectations as gxe

    expectations: list[Any] = [gxe.ExpectColumnValuesToNotBeNull(column=column) for column in keys]
    if len(keys) == 1:
        expectations.append(gxe.ExpectColumnValuesToBeUnique(column=keys[0]))
    elif len(keys) > 1:
        expectations.append(gxe.ExpectCompoundColumnsToBeUnique(column_list=list(keys)))
    if with_row_count:
        expectations.append(
            gxe.ExpectTableRowCountToEqual(
                value={"$PARAMETER": ROW_COUNT_PARAMETER},
                notes="The row count the applied changes imply: rows before the batch + inserted - deleted.",
            )
        )
    return expectations


EXCEPTION_MESSAGE_LIMIT = 500
"""Characters kept of an exception message in an outcome's details (a Java stack trace is long)."""


def _outcome(item: Mapping[str, Any]) -> ExpectationOutcome:
    config = item["expectation_config"]
    kwargs: Mapping[str, Any] = config.get("kwargs", {})
    result: Mapping[str, Any] = item.get("result") or {}
    if "column" in kwargs:
        column: str | None = kwargs["column"]
    elif "column_list" in kwargs:
        column = ",".join(kwargs["column_list"])
    else:
        column = None

    details: dict[str, Any] = {key: result[key] for key in _SUMMARY_RESULT_KEYS if key in result}
    if "partial_unexpected_list" in result:
        details["partial_unexpected_list"] = list(result["partial_unexpected_list"])[:PARTIAL_UNEXPECTED_LIMIT]
    expected = {key: value for key, value in kwargs.items() if key not in _TARGET_KWARGS}
    if expected:
        details["expected"] = expected
    # GE reports an expectation that raised (a missing column, a bad regex) either as one exception_info or, in
    # GE 1.x, keyed by the metric that raised: the messages are the reason, on the page and in the results.
    exception = item.get("exception_info") or {}
    infos = [exception] if "raised_exception" in exception else [
        v for v in exception.values() if isinstance(v, Mapping)]
    messages = dict.fromkeys(str(i.get("exception_message") or "")[:EXCEPTION_MESSAGE_LIMIT]
                             for i in infos if i.get("raised_exception"))
    if any(messages):
        details["exception"] = "; ".join(m for m in messages if m)

    observed = result["observed_value"] if "observed_value" in result else result.get("unexpected_count")
    return ExpectationOutcome(
        expectation=config["type"],
        column=column,
        success=bool(item["success"]),
        observed_value=observed,
        details=details,
    )


def _with_sample_rows(df: "DataFrame", outcome: ExpectationOutcome) -> ExpectationOutcome:
    """Attach up to :data:`SAMPLE_ROWS_LIMIT` whole rows holding the failed expectation's unexpected values.

    GE's SUMMARY format lists offending values only; the rows around them are what a person needs to see. Only
    column-map expectations (those with a ``partial_unexpected_list``) get rows; a failure to fetch them is
    logged, never raised, since the validation itself has run.
    """
    values = outcome.details.get("partial_unexpected_list")
    if outcome.success or not values or not outcome.column:
        return outcome
    columns = outcome.column.split(",")
    if any(column not in df.columns for column in columns):
        return outcome
    try:
        from pyspark.sql import functions as F

        def equals(column: str, value: Any) -> Any:
            return F.col(column).isNull() if value is None else F.col(column) == F.lit(value)

        condition = None
        for value in values:
            if len(columns) > 1 and isinstance(value, Mapping):
                term = None
                for column in columns:
                    part = equals(column, value.get(column))
                    term = part if term is None else term & part
            else:
                term = equals(columns[0], value)
            condition = term if condition is None else condition | term
        rows = [json.loads(line) for line in df.where(condition).limit(SAMPLE_ROWS_LIMIT).toJSON().collect()]
    except Exception:  # noqa: BLE001 - sample rows are a courtesy; the outcome stands without them
        log.warning("could not fetch sample rows for %s(%s)", outcome.expectation, outcome.column, exc_info=True)
        return outcome
    return replace(outcome, details={**outcome.details, "sample_rows": rows})


def _docs_path(context: "AbstractDataContext", resource_identifier: Any) -> Path | None:
    # GE reports file:// URLs, and only for pages that exist (only_if_exists defaults to True).
    try:
        sites = context.get_docs_sites_urls(resource_identifier=resource_identifier, site_names=[DOCS_SITE_NAME])
    except Exception:  # noqa: BLE001 - a missing docs link must not fail a validation that already ran
        log.warning("could not resolve the Data Docs URL of %s", resource_identifier or "the index", exc_info=True)
        return None
    for site in sites:
        url = site.get("site_url")
        if url and urlparse(url).scheme == "file":
            path = Path(url2pathname(urlparse(url).path))
            if path.is_file():
                return path
    return None


def _write_json(path: Path, payload: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # Write-then-rename so a reader (the Airflow plugin, a retry) never sees a half-written report.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(payload, indent=2, sort_keys=True, default=str), encoding="utf-8")
    os.replace(tmp, path)
