"""The Data Quality pages: a small FastAPI app over ``cdclake_meta.dq_results`` and the GE Data Docs.

Mounted into the Airflow API server by ``plugins/cdclake_dq.py`` (under :data:`URL_PREFIX`), behind Airflow's own
authentication; the app itself only renders. Pages (all links relative, so a reverse proxy's prefix works):

* ``./``                        every table with its latest status and a pass/fail trend chart (inline SVG);
* ``./table?id=NS.T``           one table's history per run;
* ``./run?run_id=R[&table=T][&dag_id=D]``  one run: every table's status, failed expectations with observed values and
  sample rows, links to the run's Data Docs pages (the DAG run's "Data Quality" tab opens this page);
* ``./docs/<path>``             the Data Docs site (``<lake>/dq/gx/uncommitted/data_docs/local_site``);
* ``./api/tables``              the overview as JSON.

Results are read with pyiceberg (:func:`cdclake.dq_results.read_rows`), never Spark; the lake comes from
``CDCLAKE_LAKE`` and the other ``CDCLAKE_*`` variables of the API server's environment.
"""

from __future__ import annotations

import html
import json
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence
from urllib.parse import quote, urlencode

from cdclake.settings import LakeSettings

URL_PREFIX = "/cdclake-dq"
DOCS_SITE = Path("gx") / "uncommitted" / "data_docs" / "local_site"
TREND_RUNS = 30
STATUS_COLORS = {"passed": "#2e7d32", "failed": "#c62828", "warned": "#ef6c00", "quarantined": "#6a1b9a"}
STATUS_LABELS = {"passed": "PASSED", "failed": "FAILED", "warned": "WARNED", "quarantined": "QUARANTINED"}


@dataclass
class TableRun:
    """One table's validation in one run (all its suites), aggregated from result rows.

    Attributes:
        table_id: ``namespace.table``.
        run_id: The validation run.
        dag_id: The Airflow DAG, or None.
        batch_id: The validated batch; the newest one when the run validated the changes of several (a
            per-source run files each batch suite under its own batch).
        status: ``passed``, ``failed``, ``warned`` or ``quarantined``.
        policy: The table's policy in the run.
        validated_at: When.
        evaluated: Expectations evaluated.
        failures: Result rows of the failed expectations.
        passes: Result rows of the expectations that held.
        docs_pages: Suite -> that suite's Data Docs page (absolute path as recorded).
    """

    table_id: str
    run_id: str
    dag_id: str | None
    batch_id: str
    status: str
    policy: str | None
    validated_at: datetime | None
    evaluated: int = 0
    failures: list[dict[str, Any]] = field(default_factory=list)
    passes: list[dict[str, Any]] = field(default_factory=list)
    docs_pages: dict[str, str] = field(default_factory=dict)


def group_runs(rows: Iterable[dict[str, Any]]) -> list[TableRun]:
    """Result rows (as :func:`cdclake.dq_results.read_rows` returns them) -> one :class:`TableRun` per (run, table).

    Returns:
        Newest first.
    """
    runs: "OrderedDict[tuple[str, str], TableRun]" = OrderedDict()
    for row in rows:
        key = (row["run_id"], row["table_id"])
        run = runs.get(key)
        if run is None:
            run = runs[key] = TableRun(
                table_id=row["table_id"], run_id=row["run_id"], dag_id=row.get("dag_id"),
                batch_id=row.get("batch_id") or "", status=row.get("status") or (
                    "passed" if row.get("suite_success") else "failed"),
                policy=row.get("policy"), validated_at=row.get("validated_at"),
            )
        run.evaluated += 1
        run.batch_id = max(run.batch_id, row.get("batch_id") or "")  # batch ids are zero-padded sequence numbers
        (run.passes if row.get("success") else run.failures).append(row)
        if row.get("data_docs_page"):
            run.docs_pages.setdefault(row.get("suite") or "", row["data_docs_page"])
        if row.get("validated_at") and (run.validated_at is None or row["validated_at"] > run.validated_at):
            run.validated_at = row["validated_at"]
    return sorted(runs.values(), key=lambda r: (r.validated_at or datetime.min, r.run_id), reverse=True)


def docs_url(page: str | None) -> str | None:
    """A recorded Data Docs page path -> its URL relative to the app (``docs/...``), or None."""
    if not page:
        return None
    marker = "/data_docs/local_site/"
    text = str(page)
    if marker not in text:
        return None
    return "docs/" + quote(text.split(marker, 1)[1])


def trend_svg(history: Sequence[TableRun], *, width: int = 180, height: int = 28) -> str:
    """A small inline SVG: one bar per run (oldest left), colored by status, as tall as the share of
    expectations that held (a failed run is at least a quarter high so it stays visible)."""
    runs = list(reversed(history[:TREND_RUNS]))
    if not runs:
        return ""
    bar = max(3.0, width / max(len(runs), 1))
    parts = [f'<svg class="trend" role="img" aria-label="pass/fail trend" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">']
    for index, run in enumerate(runs):
        held = (run.evaluated - len(run.failures)) / run.evaluated if run.evaluated else 1.0
        share = held if run.status == "passed" else max(0.25, held)
        h = max(2.0, share * (height - 2))
        x = index * bar
        color = STATUS_COLORS.get(run.status, "#757575")
        title = html.escape(f"{run.run_id}: {run.status}, {run.evaluated - len(run.failures)}/{run.evaluated} held")
        parts.append(f'<rect x="{x:.1f}" y="{height - h:.1f}" width="{bar - 1:.1f}" height="{h:.1f}" '
                     f'fill="{color}"><title>{title}</title></rect>')
    parts.append("</svg>")
    return "".join(parts)


_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:16px 24px;color:#1f2328}
h1{font-size:1.4em;margin:0 0 4px} h2{font-size:1.15em;margin:24px 0 8px} .muted{color:#667085;font-size:.9em}
table{border-collapse:collapse;width:100%;margin:8px 0} th,td{border-bottom:1px solid #e4e7ec;padding:6px 8px;
text-align:left;vertical-align:top;font-size:.92em} th{background:#f8f9fb}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;color:#fff;font-size:.8em;font-weight:600}
pre{background:#f6f8fa;padding:6px;margin:0;max-width:640px;overflow:auto;font-size:.85em}
a{color:#0b57d0} nav a{margin-right:12px}
table.samples th,table.samples td{font-size:.8em;padding:2px 6px;white-space:nowrap}
"""


def _badge(status: str) -> str:
    color = STATUS_COLORS.get(status, "#757575")
    return f'<span class="badge status-{html.escape(status)}" style="background:{color}">' \
           f'{html.escape(STATUS_LABELS.get(status, status.upper()))}</span>'


def _page(title: str, body: str) -> str:
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
            f'<style>{_CSS}</style></head><body><nav class="muted"><a href="./">Data Quality</a></nav>'
            f"{body}</body></html>")


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def _when(value: datetime | None) -> str:
    return "" if value is None else value.strftime("%Y-%m-%d %H:%M:%S UTC")


def _json_block(value: Any) -> str:
    if value in (None, [], {}):
        return ""
    return f"<pre>{html.escape(json.dumps(value, indent=1, sort_keys=True, default=str))}</pre>"


def _run_link(run: TableRun, text: str | None = None) -> str:
    query = urlencode({"run_id": run.run_id, "table": run.table_id})
    return f'<a href="run?{_e(query)}">{_e(text or run.run_id)}</a>'


def render_overview(runs: Sequence[TableRun], *, lake: Path, held: Sequence[Any] = ()) -> str:
    """The index page: every table with its latest status and trend."""
    by_table: "OrderedDict[str, list[TableRun]]" = OrderedDict()
    for run in runs:
        by_table.setdefault(run.table_id, []).append(run)
    rows = []
    for table_id in sorted(by_table):
        history = by_table[table_id]
        latest = history[0]
        docs = [f'<a href="{_e(u)}">{_e(s)}</a>' for s, p in sorted(latest.docs_pages.items())
                if (u := docs_url(p))]
        failed = ", ".join(sorted({str(f["expectation"]) for f in latest.failures}))
        rows.append(
            f'<tr data-table="{_e(table_id)}"><td><a href="table?{_e(urlencode({"id": table_id}))}">'
            f"{_e(table_id)}</a></td><td>{_badge(latest.status)}</td>"
            f"<td>{_run_link(latest)}<div class='muted'>{_when(latest.validated_at)}</div></td>"
            f"<td>{_e(latest.batch_id)}</td><td>{latest.evaluated - len(latest.failures)}/{latest.evaluated}"
            f"<div class='muted'>{_e(failed)}</div></td><td>{trend_svg(history)}</td>"
            f"<td>{' '.join(docs)}</td></tr>"
        )
    if rows:
        table = ("<table id='tables'><tr><th>Table</th><th>Latest status</th><th>Latest run</th><th>Batch</th>"
                 "<th>Expectations held</th><th>Trend (last runs)</th><th>Data Docs</th></tr>"
                 + "".join(rows) + "</table>")
    else:
        table = "<p>No validation results yet: run the <code>cdclake_ingest</code> DAG.</p>"
    held_html = ""
    if held:
        items = "".join(f"<tr><td>{_e(h.table_id)}</td><td>{_e(h.source)}</td><td>{_e(h.batch_id)}</td>"
                        f"<td>{_e(h.held_at)}</td><td>{_e(h.reason)}</td></tr>" for h in held)
        held_html = ("<h2>Held back by the quarantine policy</h2><p class='muted'>Release after a fix with "
                     "<code>cdclake dq release --lake LAKE --source S --batch B --table T</code>.</p>"
                     "<table><tr><th>Table</th><th>Source</th><th>Batch</th><th>Held at</th><th>Why</th></tr>"
                     f"{items}</table>")
    body = (f"<h1>Data Quality</h1><p class='muted'>Lake {_e(lake)} &middot; results from "
            f"<code>cdclake_meta.dq_results</code> &middot; <a href='docs/index.html'>Data Docs</a></p>"
            f"{table}{held_html}")
    return _page("Data Quality", body)


def render_table(table_id: str, runs: Sequence[TableRun]) -> str:
    """One table's history."""
    history = [r for r in runs if r.table_id == table_id]
    rows = "".join(
        f"<tr><td>{_when(r.validated_at)}</td><td>{_run_link(r)}</td><td>{_e(r.dag_id)}</td>"
        f"<td>{_e(r.batch_id)}</td><td>{_badge(r.status)}</td><td>{_e(r.policy)}</td>"
        f"<td>{r.evaluated - len(r.failures)}/{r.evaluated}</td>"
        f"<td>{_e(', '.join(sorted({str(f['expectation']) for f in r.failures})))}</td></tr>"
        for r in history
    )
    body = (f"<h1>{_e(table_id)}</h1><p>{trend_svg(history, width=480, height=48)}</p>"
            "<table><tr><th>Validated</th><th>Run</th><th>DAG</th><th>Batch</th><th>Status</th><th>Policy</th>"
            f"<th>Held</th><th>Failed expectations</th></tr>{rows}</table>")
    if not history:
        body = f"<h1>{_e(table_id)}</h1><p>No validation results for this table.</p>"
    return _page(f"Data Quality: {table_id}", body)


def _sample_table(rows: Any) -> str:
    """Sample rows as a small table: user columns first, then the ``_cdc_*`` bookkeeping columns."""
    if not rows or not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        return _json_block(rows)
    columns = list(dict.fromkeys(c for r in rows for c in r))
    columns.sort(key=lambda c: c.startswith("_cdc_"))
    head = "".join(f"<th>{_e(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{_e(json.dumps(r.get(c), default=str))}</td>" for c in columns)
                   + "</tr>" for r in rows)
    return f"<table class='samples'><tr>{head}</tr>{body}</table>"


def _expectation_rows(rows: Sequence[dict[str, Any]]) -> str:
    out = []
    for row in rows:
        details = dict(row.get("details") or {})
        samples = details.pop("partial_unexpected_list", None)
        out.append(
            f"<tr class='expectation'><td>{_e(row.get('suite'))}</td><td>{_e(row.get('expectation'))}</td>"
            f"<td>{_e(row.get('column_name'))}</td><td>{_json_block(row.get('observed_value'))}</td>"
            f"<td>{_json_block(details)}</td><td>{_json_block(samples)}</td>"
            f"<td>{_sample_table(row.get('sample_rows'))}</td></tr>"
        )
    return ("<table><tr><th>Suite</th><th>Expectation</th><th>Column</th><th>Observed</th><th>Details</th>"
            "<th>Unexpected values</th><th>Sample rows</th></tr>" + "".join(out) + "</table>")


def render_run(run_id: str, runs: Sequence[TableRun], *, table: str | None = None, dag_id: str | None = None) -> str:
    """One run's report: per table, status, failed expectations with observed values and sample rows."""
    selected = [r for r in runs if r.run_id == run_id and (table is None or r.table_id == table)
                and (dag_id is None or r.dag_id == dag_id)]
    if not selected:
        return _page("Data Quality run", f"<h1>Run {_e(run_id)}</h1><p>No validation results for this run"
                     + (f" and table {_e(table)}" if table else "") + ".</p>")
    sections = []
    for run in sorted(selected, key=lambda r: r.table_id):
        docs = " ".join(f'<a href="{_e(u)}">Data Docs: {_e(s)}</a>' for s, p in sorted(run.docs_pages.items())
                        if (u := docs_url(p)))
        failed = (f"<h3>Failed expectations</h3>{_expectation_rows(run.failures)}" if run.failures
                  else "<p>Every expectation held.</p>")
        sections.append(
            f"<section class='table-run' data-table='{_e(run.table_id)}'><h2>{_e(run.table_id)} "
            f"{_badge(run.status)}</h2><p class='muted'>policy {_e(run.policy)} &middot; batch {_e(run.batch_id)}"
            f" &middot; {_when(run.validated_at)} &middot; {run.evaluated - len(run.failures)}/{run.evaluated}"
            f" expectations held</p><p>{docs}</p>{failed}"
            f"<details><summary>{len(run.passes)} expectations held</summary>{_expectation_rows(run.passes)}"
            "</details></section>"
        )
    dag = selected[0].dag_id
    head = f"<h1>Run {_e(run_id)}</h1><p class='muted'>DAG {_e(dag)}</p>" if dag else f"<h1>Run {_e(run_id)}</h1>"
    return _page(f"Data Quality: {run_id}", head + "".join(sections))


def create_app(*, settings: Callable[[], LakeSettings] = LakeSettings.from_env,
               dependencies: Sequence[Any] = ()) -> Any:
    """The FastAPI app of the Data Quality pages.

    Args:
        settings: Resolves the lake per request (default: the ``CDCLAKE_*`` environment).
        dependencies: FastAPI dependencies run before every route, e.g. Airflow's access check; the plugin passes
            them so every page, the JSON and the Data Docs files are behind Airflow's authentication.

    Returns:
        A ``fastapi.FastAPI`` application.
    """
    from fastapi import FastAPI, HTTPException
    from fastapi.responses import FileResponse, HTMLResponse, JSONResponse

    from cdclake import dq_hold, dq_results

    app = FastAPI(title="cdclake Data Quality", dependencies=list(dependencies), docs_url=None, redoc_url=None,
                  openapi_url=None)

    def load() -> tuple[LakeSettings, list[TableRun]]:
        lake = settings()
        return lake, group_runs(dq_results.read_rows(lake))

    @app.get("/", response_class=HTMLResponse)
    def overview() -> str:
        lake, runs = load()
        return render_overview(runs, lake=lake.root, held=dq_hold.list_held(lake))

    @app.get("/table", response_class=HTMLResponse)
    def table_page(id: str) -> str:  # noqa: A002 - the query parameter's name
        _, runs = load()
        return render_table(id, runs)

    @app.get("/run", response_class=HTMLResponse)
    def run_page(run_id: str, table: str | None = None, dag_id: str | None = None) -> str:
        # dag_id also scopes Airflow's access check (requires_access_dag reads it from the query).
        _, runs = load()
        return render_run(run_id, runs, table=table or None, dag_id=dag_id or None)

    @app.get("/api/tables")
    def api_tables() -> JSONResponse:
        _, runs = load()
        latest: dict[str, TableRun] = {}
        for run in runs:
            latest.setdefault(run.table_id, run)
        return JSONResponse({t: {"status": r.status, "run_id": r.run_id, "batch_id": r.batch_id,
                                 "failed": [f["expectation"] for f in r.failures]}
                             for t, r in sorted(latest.items())})

    @app.get("/docs/{path:path}")
    def docs(path: str) -> FileResponse:
        root = (settings().dq_root / DOCS_SITE).resolve()
        target = (root / (path or "index.html")).resolve()
        if not target.is_relative_to(root) or not target.is_file():
            raise HTTPException(status_code=404, detail=f"no Data Docs file {path!r}")
        return FileResponse(target)

    return app
