"""Snapshots a table was read in whose end has not been seen (``cdclake_meta.open_snapshots``), so a snapshot that
ends in a later batch reconciles the tables it read in earlier ones.

Before Debezium 2.x only the very last record of a whole snapshot is ``last``; every read of the snapshot, of every
table, carries the snapshot's one source position. A table whose reads all came in earlier batches than that record
must still be reconciled when it arrives. So:

- apply records, on the table, the source position of its snapshot reads while no end of theirs has been seen
  (table property :data:`PROPERTY`, the truth) and, once per table and position, a row here (the index normalize
  searches): ``source``, ``table_id``, ``position``;
- normalize, for a batch that ends a snapshot at a position, looks up the source's tables read at that position
  that the batch does not carry, and stages an empty change set for each; applying it cuts the table just below
  the snapshot's rows, as for a table the batch carries, and clears the property.

Rows are appended, never rewritten; a table whose property no longer holds the position (its own end came, or a
newer snapshot read it) is left alone.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import TYPE_CHECKING, Collection, Sequence

from cdclake.catalog import create_table, retry_conflicts, sql_literal, table_exists, table_properties
from cdclake.identity import meta_table, spark_table_name

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

TABLE = meta_table("open_snapshots")
PROPERTY = "cdclake.open-snapshot"
"""Table property: the source position of the table's snapshot reads whose end has not been seen; empty when none."""


def record(spark: "SparkSession", source: str, tid: str, position: str) -> None:
    """Index a table's open snapshot (before its property is set, so a crash between the two leaves the index
    ahead, which the property check makes harmless)."""
    name = spark_table_name(TABLE)
    create_table(spark, TABLE, f"CREATE TABLE IF NOT EXISTS {name} (source string, table_id string, "
                 "position string, at timestamp) USING iceberg TBLPROPERTIES ('format-version'='2')")
    now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    rows = spark.createDataFrame([(source, tid, position, now)], schema=spark.table(name).schema)
    retry_conflicts(lambda: rows.writeTo(name).append(), what=TABLE, attempts=8, again="appending again")


def ended_by(spark: "SparkSession", source: str, positions: Sequence[str], *,
             exclude: Collection[str] = ()) -> list[str]:
    """The source's tables, other than ``exclude``, whose open snapshot was read at one of ``positions``."""
    if not positions or not table_exists(spark, TABLE):
        return []
    listed = ", ".join(f"'{sql_literal(p)}'" for p in positions)
    candidates = {r["table_id"] for r in spark.sql(
        f"SELECT DISTINCT table_id FROM {spark_table_name(TABLE)} "
        f"WHERE source = '{sql_literal(source)}' AND position IN ({listed})").collect()}
    ended = sorted(tid for tid in candidates - set(exclude)
                   if table_exists(spark, tid) and table_properties(spark, tid).get(PROPERTY, "") in positions)
    if ended:
        log.info("source %s: the batch ends the snapshot of %s, read in earlier batches", source, ", ".join(ended))
    return ended
