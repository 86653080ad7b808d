"""Apply (MERGE) throughput: B deduplicated changes into tables of N rows, merge-on-read vs copy-on-write, against
pyiceberg's ``Table.upsert`` and, for the snapshot bulk load, a plain Iceberg append of the same rows.

Targets (issue 4):

* time at B=100k grows <= 1.5x from the N=1M to the N=5M table;
* >= 10x faster than pyiceberg's upsert at B=100k;
* snapshot bulk load (a snapshot-only batch into an empty table) >= 0.8x a plain Iceberg append of the same rows.

Workload. A table of N rows (``id`` bigint key, ``a`` bigint, ``b`` string, ``c`` double, ``d`` timestamp) is
loaded as a snapshot batch through :func:`cdclake.apply.apply_table` (timed against ``DataFrame.writeTo().append()``
of the same rows into a table with the same layout). Then a batch of B changes: 80% updates of random existing
keys, 10% inserts of new keys, 10% deletes, one change per key, positions newer than the snapshot's. Canonical
records are generated in Spark (``spark.range``), so the numbers are apply's alone. Each (N, B, mode) cell is
measured on a fresh copy of the loaded table (the batch is applied once; apply is idempotent, a second run would
only measure the stale path).

pyiceberg's upsert runs the same B changes (updates + inserts; it has no delete action) against a pyiceberg copy of
the N-row table, in this process, with Arrow tables.

Usage::

    .venv/bin/python bench/merge_bench.py                           # quick: N=100k,500k  B=10k  mor,cow
    .venv/bin/python bench/merge_bench.py --rows 1000000,5000000 --changes 10000,100000,1000000 \\
        --modes mor,cow --upsert-changes 100000 --out bench/results/
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "include"))


def _canonical(spark: Any, ids: Any, *, op: str, position_base: int, snapshot: str | None, batch_id: str) -> Any:
    from pyspark.sql import functions as F

    after = None if op == "d" else F.struct(
        F.col("id"), (F.col("id") * 7).alias("a"), F.concat(F.lit("name-"), F.col("id").cast("string")).alias("b"),
        (F.col("id") / 3.0).alias("c"), F.timestamp_seconds(F.lit(1_700_000_000) + F.col("id")).alias("d"))
    after_type = "struct<id:bigint,a:bigint,b:string,c:double,d:timestamp>"
    pos = F.concat(F.lpad(F.hex(F.lit(position_base) + F.col("id")), 16, "0"), F.lit(f"/{batch_id}/000000/"),
                   F.lpad(F.col("id").cast("string"), 10, "0"), F.lit("/00000"))
    return ids.select(
        F.lit(op).alias("op"),
        F.struct(F.col("id")).alias("key"),
        F.lit(None).cast(after_type).alias("before"),
        (after if after is not None else F.lit(None).cast(after_type)).alias("after"),
        pos.alias("position"),
        F.current_timestamp().alias("source_ts"),
        F.lit(snapshot).cast("string").alias("snapshot"),
        F.lit(batch_id).alias("batch_id"), F.lit("bench").alias("source"),
        F.lit(None).cast("array<string>").alias("unavailable"),
    )


def _plain_table(spark: Any, tid: str) -> None:
    """The plain append's target: the layout apply gives a new table (bucket on the key, sorted by it)."""
    from cdclake.identity import spark_table_name

    name = spark_table_name(tid)
    spark.sql(f"CREATE TABLE {name} (id bigint, a bigint, b string, c double, d timestamp) USING iceberg "
              "PARTITIONED BY (bucket(16, id)) TBLPROPERTIES ('format-version'='2')")
    spark.sql(f"ALTER TABLE {name} WRITE ORDERED BY id")


def _timed(fn: Any) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="100000,500000", help="table sizes N, comma-separated")
    parser.add_argument("--changes", default="10000", help="batch sizes B, comma-separated")
    parser.add_argument("--modes", default="mor,cow", help="mor and/or cow")
    parser.add_argument("--upsert-changes", type=int, default=10000, help="B for the pyiceberg upsert comparison "
                        "(0: skip)")
    parser.add_argument("--out", type=Path, help="directory for merge-<date>.json/.md")
    args = parser.parse_args(argv)
    rows = [int(x) for x in args.rows.split(",")]
    changes = [int(x) for x in args.changes.split(",")]
    modes = args.modes.split(",")

    from cdclake.apply import ApplyOptions, apply_table
    from cdclake.identity import spark_table_name
    from cdclake.settings import LakeSettings
    from cdclake.spark import get_spark

    work = Path(tempfile.mkdtemp(prefix="cdclake-merge-bench-"))
    settings = LakeSettings.from_env(work / "lake", env={})
    spark = get_spark(settings, app_name="merge-bench")
    spark.sparkContext.setLogLevel("ERROR")
    results: dict[str, Any] = {"cells": [], "loads": [], "upsert": []}
    try:
        # Warm-up (JIT, codegen, catalog): one small load each way, so neither timed path pays the first run.
        warm = _canonical(spark, spark.range(20_000), op="r", position_base=0, snapshot="true", batch_id="00000001")
        apply_table(spark, warm, tid="bench.warm_apply", key=["id"], options=ApplyOptions(changelog=False))
        _plain_table(spark, "bench.warm_plain")
        warm.select("after.*").writeTo(spark_table_name("bench.warm_plain")).append()
        for n in rows:
            base = f"bench.base_{n}"
            load = _canonical(spark, spark.range(n), op="r", position_base=0, snapshot="true", batch_id="00000001")
            load = load.localCheckpoint(eager=True)
            t_load = _timed(lambda: apply_table(spark, load, tid=base, key=["id"],
                                                options=ApplyOptions(changelog=False)))
            plain = f"bench.plain_{n}"
            _plain_table(spark, plain)
            flat = load.select("after.*")
            t_plain = _timed(lambda: flat.writeTo(spark_table_name(plain)).append())
            results["loads"].append({"rows": n, "snapshot_load_s": t_load, "plain_append_s": t_plain,
                                     "ratio": t_plain / t_load})
            print(f"N={n}: snapshot load {t_load:.1f}s, plain append {t_plain:.1f}s, ratio {t_plain / t_load:.2f}",
                  flush=True)
            for mode in modes:
                write_mode = "merge-on-read" if mode == "mor" else "copy-on-write"
                for b in changes:
                    tid = f"bench.t_{n}_{b}_{mode}"
                    spark.sql(f"CREATE TABLE {spark_table_name(tid)} USING iceberg "
                              f"PARTITIONED BY (bucket(16, id)) TBLPROPERTIES ('format-version'='2') "
                              f"AS SELECT * FROM {spark_table_name(base)}")
                    spark.sql(f"ALTER TABLE {spark_table_name(tid)} SET TBLPROPERTIES "
                              f"('cdclake.key-columns'='id', 'cdclake.delete-mode'='hard')")
                    batch = _batch(spark, n, b, "00000002").localCheckpoint(eager=True)
                    t = _timed(lambda: apply_table(spark, batch, tid=tid, key=["id"], options=ApplyOptions(
                        write_mode=write_mode, changelog=False)))
                    results["cells"].append({"rows": n, "changes": b, "mode": mode, "seconds": t,
                                             "changes_per_s": b / t})
                    print(f"N={n} B={b} {mode}: {t:.1f}s ({b / t:,.0f} changes/s)", flush=True)
                    spark.sql(f"DROP TABLE {spark_table_name(tid)} PURGE")
            if args.upsert_changes:
                results["upsert"].append(_upsert(spark, settings, base, n, args.upsert_changes))
        _gate(results, rows, args.upsert_changes)
        results["environment"] = {
            "date": dt.date.today().isoformat(), "python": platform.python_version(), "cpus": os.cpu_count(),
            "spark_master": os.environ.get("CDCLAKE_SPARK_MASTER", "local[*]"),
            "driver_memory": os.environ.get("CDCLAKE_DRIVER_MEMORY", "default"),
        }
        print(json.dumps(results, indent=2))
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            stem = args.out / f"merge-{dt.date.today().isoformat()}"
            stem.with_suffix(".json").write_text(json.dumps(results, indent=2))
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


def _batch(spark: Any, n: int, b: int, batch_id: str) -> Any:
    """B changes, one per key: 80% updates, 10% inserts of new keys, 10% deletes; newer than the load."""
    from pyspark.sql import functions as F

    picked = spark.range(b).select(
        F.when(F.col("id") % 10 == 0, F.lit(n) + F.col("id"))              # insert: a new key
        .otherwise(F.pmod(F.xxhash64(F.col("id")), F.lit(n))).alias("id"),  # update/delete: an existing key
        (F.col("id") % 10).alias("kind")).dropDuplicates(["id"])
    upserts = _canonical(spark, picked.where(F.col("kind") != 1).select("id"), op="u", position_base=1 << 40,
                         snapshot=None, batch_id=batch_id)
    deletes = _canonical(spark, picked.where(F.col("kind") == 1).select("id"), op="d", position_base=1 << 40,
                         snapshot=None, batch_id=batch_id)
    return upserts.unionByName(deletes)


def _upsert(spark: Any, settings: Any, base: str, n: int, b: int) -> dict[str, Any]:
    """pyiceberg ``Table.upsert`` of B updates/inserts into a pyiceberg copy of the N-row table."""
    import pyarrow as pa
    from pyspark.sql import functions as F

    from cdclake.catalog import pyiceberg_catalog
    from cdclake.identity import spark_table_name

    copy = f"bench.upsert_{n}"
    spark.sql(f"CREATE TABLE {spark_table_name(copy)} USING iceberg TBLPROPERTIES ('format-version'='2') "
              f"AS SELECT id, a, b, c, d FROM {spark_table_name(base)}")
    batch = _batch(spark, n, b, "00000003").where(F.col("op") != "d").select("after.*").toPandas()
    catalog = pyiceberg_catalog(settings)
    table = catalog.load_table(copy)
    arrow = pa.Table.from_pandas(batch, preserve_index=False).cast(table.schema().as_arrow())
    t = _timed(lambda: table.upsert(arrow, join_cols=["id"]))
    print(f"pyiceberg upsert N={n} B={b}: {t:.1f}s", flush=True)
    return {"rows": n, "changes": b, "seconds": t}


def _gate(results: dict[str, Any], rows: list[int], upsert_b: int) -> None:
    cells = {(c["rows"], c["changes"], c["mode"]): c["seconds"] for c in results["cells"]}
    gates: dict[str, Any] = {}
    if len(rows) >= 2:
        for mode in ("mor", "cow"):
            for b in sorted({c["changes"] for c in results["cells"]}):
                small, large = cells.get((rows[0], b, mode)), cells.get((rows[-1], b, mode))
                if small and large:
                    gates[f"growth_{mode}_B{b}"] = {"ratio": large / small, "target": "<= 1.5"}
    for u in results["upsert"]:
        ours = cells.get((u["rows"], u["changes"], "mor"))
        if ours:
            gates[f"vs_upsert_N{u['rows']}_B{u['changes']}"] = {"speedup": u["seconds"] / ours, "target": ">= 10"}
    for load in results["loads"]:
        gates[f"bulk_load_N{load['rows']}"] = {"ratio": load["ratio"], "target": ">= 0.8"}
    results["gates"] = gates


if __name__ == "__main__":
    sys.exit(main())
