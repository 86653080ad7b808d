"""Every source format through ``cdclake apply``, against the plain-Python oracle of its simulated source.

Each format variant in :data:`tests.support.format_streams.VARIANTS` encodes the same logical history (snapshot,
inserts, partial updates, deletes, a delete and re-insert, a primary-key change, multi-row statements, a new
nullable column) the way its connector would. Variants that share a ``--format`` share a lake; each ``apply``
takes one micro-batch file of every variant of that format (their table ids are disjoint), and every table must
equal the oracle's replay (:mod:`tests.support.format_runs`). ``--format auto`` and batches out of order are
``test_formats_auto_e2e.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest

from tests.support.format_runs import GROUPS, Run, assert_variant_tables, run_batches, variant_keys
from tests.support.format_streams import VARIANTS

# CI runs the variants of these formats; the others' (DRS, CKafka: their seed examples run in CI, in
# tests/unit/test_flat_format_seeds.py) are in the extended tier, `CDCLAKE_TESTS=all ./.ci/run`. All of them took
# 16 minutes of a CI worker.
CI_FORMATS = {"canal", "dtle", "debezium"}


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
            runs[fmt] = run_batches(lake, names, batches, variant_keys(names))
        return runs[fmt]

    return run


@pytest.mark.parametrize("name", [name if variant.fmt in CI_FORMATS else pytest.param(name, marks=pytest.mark.extended)
                                  for name, variant in VARIANTS.items()])
def test_micro_batches_in_order_equal_oracle(name: str, in_order: Callable[[str], Run]) -> None:
    assert_variant_tables(in_order(VARIANTS[name].fmt), VARIANTS[name])
