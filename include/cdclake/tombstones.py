"""Tombstone retention: deleted keys keep their delete position, truncates their position as a watermark.

One Iceberg table, ``cdclake_meta.tombstones`` (table_id, key_json, position, deleted_at); a truncate is the row
with ``key_json = '*'``. Apply treats a change as stale when it is not newer than its key's tombstone or the
table's truncate watermark, so deletes are never undone by a late or replayed older change.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cdclake.catalog import create_table, retry_conflicts, sql_literal
from cdclake.identity import meta_table, spark_table_name

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

TABLE = meta_table("tombstones")
COMMIT_ATTEMPTS = 8
TRUNCATE_KEY = "*"


def ensure_table(spark: "SparkSession") -> str:
    """Create the tombstone table if missing; return its Spark name."""
    name = spark_table_name(TABLE)
    create_table(
        spark, TABLE, f"CREATE TABLE IF NOT EXISTS {name} (table_id string, key_json string, position string, "
        "deleted_at timestamp) USING iceberg TBLPROPERTIES ('format-version'='2', "
        "'write.merge.mode'='merge-on-read', 'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read')"
    )
    return name


def of_table(spark: "SparkSession", tid: str) -> "DataFrame":
    """A table's deleted keys: ``_key_json``, ``_tomb_position``."""
    from pyspark.sql import functions as F

    return (
        spark.table(spark_table_name(TABLE))
        .where((F.col("table_id") == tid) & (F.col("key_json") != TRUNCATE_KEY))
        .select(F.col("key_json").alias("_key_json"), F.col("position").alias("_tomb_position"))
    )


def watermark(spark: "SparkSession", tid: str) -> str | None:
    """Position of the table's latest truncate, or None."""
    rows = spark.sql(
        f"SELECT max(position) FROM {spark_table_name(TABLE)} "
        f"WHERE table_id = '{sql_literal(tid)}' AND key_json = '{TRUNCATE_KEY}'"
    ).collect()
    return rows[0][0] if rows else None


def record_deletes(spark: "SparkSession", tid: str, deletes: "DataFrame") -> None:
    """Upsert tombstones for applied deletes (``_key_json``, ``_cdc_position``), keeping the newest position."""
    from pyspark.sql import functions as F

    source = deletes.select(
        F.lit(tid).alias("table_id"), F.col("_key_json").alias("key_json"),
        F.col("_cdc_position").alias("position"), F.current_timestamp().alias("deleted_at"),
    )
    _upsert(spark, source)


def record_truncate(spark: "SparkSession", tid: str, position: str) -> None:
    """Raise the table's truncate watermark to a truncate's position (creating the tombstone table: a new lake's
    first batch may be a truncate of a table it has not seen)."""
    from pyspark.sql import functions as F

    ensure_table(spark)
    source = spark.range(1).select(
        F.lit(tid).alias("table_id"), F.lit(TRUNCATE_KEY).alias("key_json"),
        F.lit(position).alias("position"), F.current_timestamp().alias("deleted_at"),
    )
    _upsert(spark, source)


def _upsert(spark: "SparkSession", source: "DataFrame") -> None:
    """MERGE tombstones in, keeping each key's newest position. The table is shared by every table of the lake, so
    applies of two tables at once can conflict here; the MERGE alone is retried (it reads only its source and the
    tombstones as they are then)."""
    view = f"cdclake_tombstones_{abs(hash(id(source)))}"
    source.createOrReplaceTempView(view)
    try:
        retry_conflicts(lambda: spark.sql(
            f"MERGE INTO {spark_table_name(TABLE)} t USING {view} s "
            "ON t.table_id = s.table_id AND t.key_json = s.key_json "
            "WHEN MATCHED AND s.position > t.position THEN UPDATE SET t.position = s.position, "
            "t.deleted_at = s.deleted_at "
            "WHEN NOT MATCHED THEN INSERT *"
        ), what=TABLE, attempts=COMMIT_ATTEMPTS, again="merging again")
    finally:
        spark.catalog.dropTempView(view)
