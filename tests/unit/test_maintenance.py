"""Table maintenance with Iceberg's Spark procedures: many small merge-on-read commits become few files, deletes are
compacted away, snapshots expire, an orphan file is removed, and the table's rows stay exactly the same."""

from __future__ import annotations

import os
import time
from datetime import timedelta
from pathlib import Path

from cdclake.config import MaintenanceOptions, SourceConfig
from cdclake.maintenance import file_counts, maintain_table, table_thresholds

TID = "maint_test.events"
NAME = "lake.maint_test.events"


def _rows(spark) -> list[tuple]:
    return sorted(tuple(r) for r in spark.table(NAME).collect())


def test_many_small_batches_are_compacted_contents_identical(spark, session_lake) -> None:
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.maint_test")
    spark.sql(f"DROP TABLE IF EXISTS {NAME}")
    spark.sql(f"CREATE TABLE {NAME} (id BIGINT, v STRING) USING iceberg TBLPROPERTIES ("
              "'format-version'='2', 'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read', "
              "'write.merge.mode'='merge-on-read')")
    # Twelve small micro-batch commits, then deletes and updates that write position-delete files.
    for batch in range(12):
        spark.sql(f"INSERT INTO {NAME} VALUES " + ", ".join(f"({batch * 10 + i}, 'b{batch}-{i}')" for i in range(10)))
    spark.sql(f"DELETE FROM {NAME} WHERE id % 7 = 0")
    spark.sql(f"UPDATE {NAME} SET v = concat(v, '-u') WHERE id % 5 = 0")
    # Oracle: the rows the statements above imply, computed in Python.
    expected = sorted((i, f"b{i // 10}-{i % 10}" + ("-u" if i % 5 == 0 else "")) for i in range(120) if i % 7)
    assert _rows(spark) == expected

    before = file_counts(spark, TID)
    assert before.data_files >= 12 and before.position_delete_files >= 1 and before.snapshots == 14

    # A file no snapshot references (a failed write), old enough to be removed.
    data_dir = Path(session_lake.warehouse) / "maint_test" / "events" / "data"
    orphan = data_dir / "orphan-from-a-failed-write.parquet"
    orphan.write_bytes(b"not referenced")
    old = time.time() - 3 * 86400
    os.utime(orphan, (old, old))

    options = MaintenanceOptions(min_data_files=4, min_input_files=2, min_delete_files=1,
                                 expire_older_than=timedelta(0), retain_last=1, orphan_older_than=timedelta(days=1))
    report = maintain_table(spark, TID, options)

    assert _rows(spark) == expected
    assert report.before == before
    assert report.after.data_files < before.data_files
    assert report.after.data_files <= 2, report.describe()
    assert report.after.position_delete_files == 0, report.describe()
    assert report.after.snapshots == 1, report.describe()
    assert report.steps["rewrite_data_files"]["rewritten_data_files_count"] >= 12
    assert report.steps["expire_snapshots"]["deleted_data_files_count"] >= 12
    assert any(p.endswith(orphan.name) for p in report.orphan_files), report.orphan_files
    assert not orphan.exists()

    # Below the thresholds nothing is rewritten, and a second run finds no orphans.
    again = maintain_table(spark, TID, MaintenanceOptions(min_data_files=100, min_delete_files=100))
    assert "skipped" in again.steps["rewrite_data_files"] and "skipped" in again.steps["rewrite_position_delete_files"]
    assert again.orphan_files == [] and _rows(spark) == expected


def test_thresholds_come_from_the_source_that_applies_the_table() -> None:
    shop = SourceConfig.model_validate({
        "name": "shop", "format": "debezium", "inbox": "i", "tables": {"include": ["public.*"]},
        "overrides": {"public.orders": {"maintenance": {"min_data_files": 3}}}})
    assert table_thresholds({"shop": shop}, "public.orders") == ("shop", MaintenanceOptions(min_data_files=3))
    assert table_thresholds({"shop": shop}, "public.customers") == ("shop", MaintenanceOptions())
    assert table_thresholds({"shop": shop}, "other.t") == (None, MaintenanceOptions())


def test_tombstone_retention_forgets_old_deletes_but_keeps_the_truncate_watermark(spark) -> None:
    from datetime import datetime, timezone

    from cdclake import tombstones
    from cdclake.maintenance import expire_tombstones

    name = f"lake.{tombstones.TABLE}"
    tombstones.ensure_table(spark)
    tid = "maint_test.retention"
    spark.sql(f"DELETE FROM {name} WHERE table_id = '{tid}'")
    spark.sql(f"INSERT INTO {name} VALUES "
              f"('{tid}', '{{\"id\":1}}', 'p1', TIMESTAMP '2026-01-01 00:00:00'), "
              f"('{tid}', '{{\"id\":2}}', 'p2', TIMESTAMP '2026-11-20 00:00:00'), "
              f"('{tid}', '*', 'p0', TIMESTAMP '2025-01-01 00:00:00'), "
              f"('maint_test.other', '{{\"id\":1}}', 'p1', TIMESTAMP '2026-01-01 00:00:00')")

    removed = expire_tombstones(spark, tid, datetime(2026, 11, 1, tzinfo=timezone.utc))

    assert removed == 1
    left = sorted((r["table_id"], r["key_json"]) for r in spark.table(name).where(
        f"table_id IN ('{tid}', 'maint_test.other')").collect())
    assert left == [("maint_test.other", '{"id":1}'), (tid, "*"), (tid, '{"id":2}')]
    assert MaintenanceOptions(tombstone_retention="30d").tombstone_retention == timedelta(days=30)
    assert MaintenanceOptions().tombstone_retention is None
