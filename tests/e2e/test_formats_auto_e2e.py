"""``--format auto`` over every format variant at once, and micro-batches applied out of order then replayed.

See ``test_formats_e2e.py`` for the variants; the tables must equal each variant's oracle either way.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.format_runs import Run, assert_variant_tables, run_batches, variant_keys
from tests.support.format_streams import VARIANTS

# In the extended tier (every variant once more, through --format auto; detection has unit tests):
# `CDCLAKE_TESTS=all ./.ci/run`.
pytestmark = pytest.mark.extended


@pytest.fixture(scope="module")
def inbox(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("formats-auto-inbox")


@pytest.fixture(scope="module")
def auto_run(tmp_path_factory: pytest.TempPathFactory, inbox: Path) -> Run:
    """Every variant's files, in order, as one ``--format auto`` micro-batch."""
    names = list(VARIANTS)
    files = [path for name in names for path in VARIANTS[name].write(inbox / "auto" / name, files=2)]
    lake = tmp_path_factory.mktemp("lake-auto") / "lake"
    return run_batches(lake, names, [("auto", files)], variant_keys(names))


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
    # The newest batch landed again at the end is no new batch, and applying it again changes nothing.
    run = run_batches(tmp_path / "lake", [name], [(variant.fmt, [f]) for f in (third, first, second, third)],
                      list(variant.keys))
    assert_variant_tables(run, variant)
    replay = run.summaries[-1]
    assert replay["new_batch"] is False, replay
    assert replay["quarantined"] == 0, replay
    changed = {t: c for t, c in replay["tables"].items() if c["inserted"] or c["updated"] or c["deleted"]}
    assert not changed, f"replaying an applied batch changed rows: {changed}"
