"""Every source format through ``cdclake apply``, against the plain-Python oracle of its simulated source.

Each format variant in :data:`tests.support.format_streams.VARIANTS` encodes the same logical history (snapshot,
inserts, partial updates, deletes, a delete and re-insert, a primary-key change, multi-row statements, a new
nullable column) the way its connector would. Its micro-batch files go through ``cdclake apply`` and every table's
rows (``cdclake.reader.dump_rows``, what ``cdclake dump`` prints) must equal the oracle's replay.

Starting Spark takes ~15 s on two cores, so variants that share a ``--format`` share a lake, each ``apply`` takes
one micro-batch file of every variant of that format (their table ids are disjoint), and the applies of one lake
run in one process (:mod:`tests.support.cli_session`). The ``auto`` run takes every variant's files in one call.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pytest

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


def _run(lake: Path, variants: list[str], batches: list[tuple[str, list[Path]]], keys: list[str]) -> Run:
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


def _keys(names: list[str]) -> list[str]:
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


@pytest.fixture(scope="module")
def inbox(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("formats-inbox")


@pytest.fixture(scope="module")
def in_order(tmp_path_factory: pytest.TempPathFactory, inbox: Path) -> Callable[[str], Run]:
    """Per format (lazily, once): both micro-batches of all its variants, applied in order to a fresh lake."""
    runs: dict[str, Run] = {}

    def run(fmt: str) -> Run:
        if fmt not in runs:
            names = GROUPS[fmt]
            files = {name: VARIANTS[name].write(inbox / "in-order" / name, files=2) for name in names}
            lake = tmp_path_factory.mktemp(f"lake-{fmt}") / "lake"
            batches = [(fmt, [files[name][i] for name in names]) for i in range(2)]
            runs[fmt] = _run(lake, names, batches, _keys(names))
        return runs[fmt]

    return run


@pytest.fixture(scope="module")
def auto_run(tmp_path_factory: pytest.TempPathFactory, inbox: Path) -> Run:
    """Every variant's files, in order, as one ``--format auto`` micro-batch."""
    names = list(VARIANTS)
    files = [path for name in names for path in VARIANTS[name].write(inbox / "auto" / name, files=2)]
    lake = tmp_path_factory.mktemp("lake-auto") / "lake"
    return _run(lake, names, [("auto", files)], _keys(names))


@pytest.mark.parametrize("name", list(VARIANTS))
def test_micro_batches_in_order_equal_oracle(name: str, in_order: Callable[[str], Run]) -> None:
    assert_variant_tables(in_order(VARIANTS[name].fmt), VARIANTS[name])


@pytest.mark.parametrize("name", list(VARIANTS))
def test_format_auto_gives_the_same_tables(name: str, auto_run: Run) -> None:
    assert_variant_tables(auto_run, VARIANTS[name])


@pytest.mark.parametrize("name", ["canal"])
def test_out_of_order_batches_then_replay_converge(name: str, tmp_path: Path) -> None:
    """Newest micro-batch first, then the older ones, then the newest again: positions, not arrival, decide.

    The newest batch holds the ``ALTER TABLE``, the primary-key change and deletes of rows the older batches
    insert; each must win over the older changes that arrive after it.
    """
    variant = VARIANTS[name]
    first, second, third = variant.write(tmp_path / "inbox", files=3)
    lake = tmp_path / "lake"
    run = _run(lake, [name], [(variant.fmt, [third]), (variant.fmt, [first]), (variant.fmt, [second])],
               list(variant.keys))
    assert_variant_tables(run, variant)

    (result,) = run_cli_session([apply_args(lake, variant.fmt, [third], list(variant.keys))], tmp_path / "replay")
    assert result["exit"] == 0, result["stderr"][-3000:]
    replay = json.loads(result["stdout"])
    assert replay["new_batch"] is False, replay
    assert replay["quarantined"] == 0, replay
    changed = {t: c for t, c in replay["tables"].items() if c["inserted"] or c["updated"] or c["deleted"]}
    assert not changed, f"replaying an applied batch changed rows: {changed}"
    assert_variant_tables(run, variant)
