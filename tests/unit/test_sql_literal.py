"""``cdclake.catalog.sql_literal`` against Spark's own SQL parser: any text survives a round trip."""

from __future__ import annotations

import pytest

from cdclake.catalog import sql_literal


@pytest.mark.parametrize("text", ["plain", "it's", "back\\slash", "\\'", "''", "100%_x", "line\nbreak", "ünï"])
def test_text_round_trips_through_spark_sql(spark, text: str) -> None:
    assert spark.sql(f"SELECT '{sql_literal(text)}' AS v").first()["v"] == text
