"""Applying format variants' micro-batches to a lake and comparing its tables with each variant's oracle.

Used by ``tests/e2e/test_formats_e2e.py`` and ``tests/e2e/test_formats_auto_e2e.py``. Starting Spark takes ~15 s
on two cores, so a lake's applies run in one process (:mod:`tests.support.cli_session`), and the tables are read
in-process (``cdclake.reader``, what ``cdclake dump`` prints).
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cdclake.reader import dump_rows, list_tables, quarantine_rows
from cdclake.settings import LakeSettings
from tests.support.cli_session import run_cli_session
from tests.support.format_streams import VARIANTS, Variant

GROUPS: dict[str, list[str]] = {}
for _name, _variant in VARIANTS.items():
    GROUPS.setdefault(_variant.fmt, []).append(_name)


def apply_args(lake: Path, fmt: str, files: list[Path], keys: list[str]) -> list[str]:
    """The ``cdclake apply`` arguments of ``files`` as one micro-batch."""
    args = ["apply", "--format", fmt, "--input", *map(str, files), "--lake", str(lake)]
    for key in keys:
        args += ["--key", key]
    return args


def _settings(lake: Path) -> LakeSettings:
    return LakeSettings.from_env(lake, env={})


@dataclass
class Run:
    """The outcome of applying some variants' files to one lake."""

    lake: Path
    variants: list[str]
    summaries: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None


def run_batches(lake: Path, variants: list[str], batches: list[tuple[str, list[Path]]], keys: list[str]) -> Run:
    """Apply ``batches`` in order, in one process; a failed call is kept, so every variant of the run reports it
    without running Spark again."""
    run = Run(lake, variants)
    calls = [apply_args(lake, fmt, files, keys) for fmt, files in batches]
    for result in run_cli_session(calls, lake.parent / f"cli-{lake.name}"):
        if result["exit"] != 0:
            run.error = f"cdclake {' '.join(result['cli'])}\nexit {result['exit']}\n{result['stderr'][-3000:]}"
            break
        run.summaries.append(json.loads(result["stdout"]))
    return run


def variant_keys(names: list[str]) -> list[str]:
    return [k for name in names for k in VARIANTS[name].keys]


def _rows_text(rows: list[dict[str, Any]]) -> list[str]:
    return [json.dumps(r, sort_keys=True, ensure_ascii=False) for r in rows]


def _parsed_documents(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for row in rows:
        row = dict(row)
        if isinstance(row.get("document"), str):
            try:
                row["document"] = json.loads(row["document"])
            except ValueError:
                pass  # left as text: the diff shows it
        out.append(row)
    return out


def assert_variant_tables(run: Run, variant: Variant) -> None:
    """The variant's tables in the run's lake equal the oracle's; a readable diff per table otherwise."""
    assert run.error is None, run.error
    quarantined = sum(s["quarantined"] for s in run.summaries)
    settings = _settings(run.lake)
    if quarantined:
        rows = quarantine_rows(settings)
        mine = [r for r in rows if f"/{variant.name}-" in str(r.get("input_file") or r.get("input"))]
        assert not mine, f"{variant.name}: quarantined messages:\n" + "\n".join(
            f"  {Path(str(r.get('input_file') or r.get('input'))).name}:{r.get('line')}: {r.get('reason')}"
            for r in mine)
    expected = variant.expected()
    present = list_tables(settings)
    problems = []
    for table, rows in expected.items():
        if table not in present:
            problems.append(f"table {table}: missing from the lake (tables: {present})")
            continue
        actual = dump_rows(settings, table)
        if variant.documents:
            actual = _parsed_documents(actual)
        if actual != rows:
            diff = "\n".join(difflib.unified_diff(_rows_text(rows), _rows_text(actual), "oracle", "cdclake dump",
                                                  lineterm="", n=0))
            problems.append(f"table {table}: {len(rows)} expected row(s), {len(actual)} dumped\n{diff}")
    assert not problems, f"{variant.name}:\n" + "\n\n".join(problems)
    wanted = {t for name in run.variants for t in VARIANTS[name].expected()}
    unexpected = sorted(set(present) - wanted)
    assert not unexpected, f"tables nobody asked for in the lake of {run.variants}: {unexpected}"
