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


def test_dates_and_timestamps_beyond_pythons_years_render_as_iso_text():
    """Debezium's stand-ins for PostgreSQL's ``infinity`` (date 5877611-06-21, timestamp year 294247) and BC
    values are stored as they are; Python's date and datetime end at year 9999 and begin at year 1, so ``dump``
    failed with an OverflowError on such a row. Expected texts are ISO 8601 (``-YYYY`` before year 0)."""
    import pyarrow as pa

    from cdclake.reader import _pylist

    days = [0, 2146033979, -719528 - 366, None, 19783]
    micros = [9223372036854775807, -62135596800000001, -63524131200000000, None, 0]
    table = pa.table({
        "d": pa.array(days, pa.int32()).cast(pa.date32()),
        "ts": pa.array(micros, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
        "ntz": pa.array(micros, pa.int64()).cast(pa.timestamp("us")),
        "dates": pa.array([days, None, [], [None], [1]], pa.list_(pa.int32())).cast(pa.list_(pa.date32())),
    })
    rows = _pylist(table)
    assert [r["d"] for r in rows] == ["1970-01-01", "5877611-06-21", "-0002-12-31", None, "2024-03-01"]
    assert [r["ts"] for r in rows] == ["294247-01-10T04:00:54.775807Z", "0000-12-31T23:59:59.999999Z",
                                       "-0043-01-01T00:00:00.000000Z", None, "1970-01-01T00:00:00.000000Z"]
    assert rows[0]["ntz"] == "294247-01-10T04:00:54.775807"
    assert [r["dates"] for r in rows] == [
        ["1970-01-01", "5877611-06-21", "-0002-12-31", None, "2024-03-01"], None, [], [None], ["1970-01-02"]]
