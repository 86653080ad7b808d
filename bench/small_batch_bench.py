"""Latency of small batches: one process lands, normalizes and applies tiny batches one after another.

A source on a short schedule (or a replay, or a backfill) sends batches of a few messages; their cost is the
driver's fixed work per batch (planning, code generation, catalog and Iceberg commits), not the data. This runs
``--batches`` batches of 4 canal messages over two tables (inserts and an update with a partial ``old`` image) in
one SparkSession, as ``cdclake apply`` and the tests do, and prints per batch:

- normalize and apply wall seconds;
- how many classes Spark compiled for the batch (``CodegenMetrics``), which shows whether the process reuses the
  code it generated for the earlier batches (``spark.sql.codegen.cache.maxEntries``).

The first batch carries the JVM's warm-up; the summary is the median of the batches after ``--skip`` (default 2).

Usage::

    .venv/bin/python bench/small_batch_bench.py --batches 10 [--format canal|auto] [--lake DIR] [--src DIR]

Spark is configured the way the project configures it (``CDCLAKE_SPARK_MASTER`` etc.); ``SPARK_CONF_DIR`` points
a run at other defaults (``tests/support/spark-conf`` for the tests' JIT settings).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _canal(table: str, kind: str, rows: list[dict[str, str]], position: int,
           old: list[dict[str, str]] | None = None) -> dict[str, object]:
    return {"data": rows, "database": "shop", "es": position, "id": position, "isDdl": False,
            "mysqlType": {"id": "int", "name": "varchar(20)", "amt": "decimal(10,2)"}, "old": old,
            "pkNames": ["id"], "sql": "", "sqlType": {"id": 4, "name": 12, "amt": 3}, "table": table,
            "ts": position, "type": kind}


def _batch(n: int) -> bytes:
    messages = []
    for t, table in enumerate(("a", "b")):
        position = 4 * n + 2 * t
        messages.append(_canal(table, "INSERT", [{"id": str(10 * n + i), "name": f"x{i}", "amt": "1.50"}
                                                 for i in range(3)], position + 1))
        messages.append(_canal(table, "UPDATE", [{"id": str(10 * n), "name": "y", "amt": "2.00"}], position + 2,
                               old=[{"name": "x0"}]))
    return "".join(json.dumps(m) + "\n" for m in messages).encode("utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--skip", type=int, default=2, help="leading batches left out of the medians (warm-up)")
    parser.add_argument("--format", default="canal", help="format name given to normalize (canal or auto)")
    parser.add_argument("--lake", type=Path, help="lake directory (default: a new temporary one)")
    parser.add_argument("--src", type=Path, default=REPO / "include",
                        help="directory to import cdclake from (e.g. an exported older commit's include/)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(args.src))

    from cdclake.apply_options import ApplyOptions
    from cdclake.landing import InputFile, land_files
    from cdclake.pipeline import apply_batch, normalize_batch
    from cdclake.settings import LakeSettings
    from cdclake.spark import get_spark

    lake = LakeSettings.from_env(args.lake or Path(tempfile.mkdtemp(prefix="cdclake-small-")), env={})
    spark = get_spark(lake, app_name="cdclake-small-batch-bench")
    metrics = spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics  # type: ignore[union-attr]
    print(f"cdclake from {args.src}, lake {lake.root}, format {args.format}, "
          f"codegen cache {spark.conf.get('spark.sql.codegen.cache.maxEntries')} classes")
    rows = []
    for n in range(args.batches):
        batch_id, _, _, _ = land_files(lake, source="bench", files=[InputFile(f"mem://bench/{n}.jsonl", _batch(n))])
        compiled = metrics.METRIC_COMPILATION_TIME().getCount()
        start = time.perf_counter()
        normalize_batch(spark, lake, source="bench", batch_id=batch_id, fmt=args.format)
        middle = time.perf_counter()
        apply_batch(spark, lake, source="bench", batch_id=batch_id, default=ApplyOptions())
        end = time.perf_counter()
        row = (middle - start, end - middle, metrics.METRIC_COMPILATION_TIME().getCount() - compiled)
        rows.append(row)
        print(f"batch {n}: normalize {row[0]:.2f} s, apply {row[1]:.2f} s, {row[2]} classes compiled", flush=True)
    steady = rows[args.skip:] or rows
    print(f"median of batches {args.skip}..{args.batches - 1}: normalize "
          f"{statistics.median(r[0] for r in steady):.2f} s, apply {statistics.median(r[1] for r in steady):.2f} s, "
          f"{statistics.median(r[2] for r in steady):.0f} classes compiled per batch")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
