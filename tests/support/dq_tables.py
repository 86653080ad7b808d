"""Deliberately broken tables and staged micro-batches for the data-quality tests, built with the test's Spark.

A table is written the way a broken writer would leave it (rows with bookkeeping, no checks); a batch is staged
exactly as normalize lays it out, so the real apply and validation code run on it.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from cdclake.apply import BOOKKEEPING, create_table_sql
from cdclake.identity import spark_table_name
from cdclake.normalize import STAGING_MARKER, staging_dir
from cdclake.settings import LakeSettings

CANONICAL = ("op string, table_id string, key struct<id:int>, before struct<id:int,name:string>, "
             "after struct<id:int,name:string>, position string, source_ts timestamp, snapshot string, "
             "batch_id string, source string, format string, input_file string, raw_line bigint, "
             "raw_offset bigint, unavailable array<string>, patch string")
"""The canonical change record of an ``(id int key, name string)`` table."""


def create_table(spark: Any, tid: str, rows: list[tuple[Any, str]], *, source_ts: datetime) -> None:
    """Create ``tid`` (id int key, name string) holding ``rows`` (id, name) with bookkeeping, unchecked."""
    from pyspark.sql.types import IntegerType, StringType, StructField

    name = spark_table_name(tid)
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS lake.`{tid.split('.')[0]}`")
    spark.sql(create_table_sql(name, [StructField("id", IntegerType()), StructField("name", StringType())], ["id"]))
    data = [(i, n, f"0000-{k:04d}", "r", source_ts, "b0", source_ts) for k, (i, n) in enumerate(rows)]
    schema = "id int, name string, " + ", ".join(f"{c} {t}" for c, t in BOOKKEEPING)
    spark.createDataFrame(data, schema).writeTo(name).append()


def stage_inserts(spark: Any, settings: LakeSettings, *, source: str, batch_id: str,
                  tables: dict[str, list[tuple[int, str]]], source_ts: datetime, position_prefix: str = "0001") -> None:
    """Stage one batch of inserts per table (``{tid: [(id, name), ...]}``) exactly as normalize lays it out."""
    out = staging_dir(settings, source, batch_id)
    for tid, changes in tables.items():
        rows = [("c", tid, {"id": i}, None, {"id": i, "name": n}, f"{position_prefix}-{k:04d}", source_ts, None,
                 batch_id, source, "debezium", "inbox/batch.jsonl", k + 1, k * 100, None, None)
                for k, (i, n) in enumerate(changes)]
        spark.createDataFrame(rows, CANONICAL).write.mode("overwrite").parquet(str(out / tid))
    (out / STAGING_MARKER).write_text(json.dumps(
        {"tables": {tid: {"key": ["id"], "columns": ["id", "name"]} for tid in tables}}))
