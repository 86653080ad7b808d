"""How ``cdclake dump`` renders values (pure Python, no Spark)."""

from __future__ import annotations

import json
import struct

import pytest

from cdclake.reader import render, shortest_float32


def as_float32(x: float) -> float:
    """What a 32-bit float column hands back to Python: the float32 nearest ``x``, widened to a double."""
    return struct.unpack("f", struct.pack("f", x))[0]


@pytest.mark.parametrize(("stored", "shown"), [
    (5.17, 5.17),            # MySQL FLOAT 5.17 comes back as 5.170000076293945
    (0.1, 0.1),
    (-2.5, -2.5),
    (1 / 3, 0.33333334),
    (16777217.0, 16777216.0),  # beyond float32's 24-bit mantissa: the float32 that was stored
    (3.4028234663852886e38, 3.4028235e38),
    (1e-45, 1e-45),          # the smallest subnormal
])
def test_float32_values_show_as_their_shortest_decimal(stored, shown):
    assert shortest_float32(as_float32(stored)) == shown
    assert as_float32(shown) == as_float32(stored)  # the same float32


def test_float32_null_and_non_finite_values_pass_through():
    assert shortest_float32(None) is None
    assert shortest_float32(float("inf")) == float("inf")
    nan = shortest_float32(float("nan"))
    assert nan != nan


def test_non_finite_floats_render_as_the_strings_debezium_writes():
    """JSON has no NaN or infinity: ``cdclake dump`` printed a bare ``NaN``, which strict JSON readers refuse."""
    assert [render(v) for v in (float("nan"), float("inf"), float("-inf"), 1.5, [float("nan")])] == [
        "NaN", "Infinity", "-Infinity", 1.5, ["NaN"]]
    assert json.loads(json.dumps(render({"x": float("inf")}), allow_nan=False)) == {"x": "Infinity"}
