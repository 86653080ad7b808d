"""The process's SparkSession across batches: later batches of the same shape reuse the code Spark compiled for the
first (``spark.sql.codegen.cache.maxEntries``, :func:`cdclake.spark.spark_conf`) and the expressions the process
built for it (:mod:`cdclake.plans`), and each batch's records still carry their own batch id."""

from __future__ import annotations

import json
import uuid

import pytest

from cdclake.apply_options import ApplyOptions
from cdclake import plans
from cdclake.normalize import normalize_batch, read_staged, staging_dir
from cdclake.pipeline import apply_batch
from cdclake.reader import dump_rows
from tests.support.canal_batches import TYPES, canal, land_messages


AMOUNTS = {**TYPES, "amt": ("decimal(10,2)", 3)}


def test_later_batches_of_the_same_shape_compile_little(spark, session_lake, monkeypatch):
    # Spark's default cache (100 classes) is smaller than what one batch's normalize and apply generate (~170), so
    # each batch used to compile every class again; with room for them a later batch compiles only a few.
    metrics = spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics  # type: ignore[attr-defined]
    source, database = f"codegen_{uuid.uuid4().hex[:6]}", f"cg{uuid.uuid4().hex[:6]}"
    compiled, batches, plans_built = [], [], []
    built: list[int] = []
    of = plans.ColumnPlan.of
    monkeypatch.setattr(plans.ColumnPlan, "of", classmethod(lambda cls, *items: built.append(1) or of(*items)))
    for n in range(3):
        messages = [
            canal(database, "INSERT", [{"id": str(10 * n + i), "name": f"x{i}", "amt": "1.50"} for i in range(3)],
                  2 * n + 1, types=AMOUNTS),
            canal(database, "UPDATE", [{"id": str(10 * n), "name": "y", "amt": "2.00"}], 2 * n + 2,
                  old=[{"name": "x0"}], types=AMOUNTS),
        ]
        batch_id = land_messages(session_lake, source, str(n), messages)
        batches.append(batch_id)
        before, known = metrics.METRIC_COMPILATION_TIME().getCount(), len(built)
        normalize_batch(spark, session_lake, source=source, batch_id=batch_id, fmt="canal")
        plans_built.append(len(built) - known)
        staged = read_staged(spark, staging_dir(session_lake, source, batch_id) / f"{database}.items").collect()
        # The cached expressions take the batch id from a column: each batch's records carry their own.
        assert {(r["batch_id"], f"/{batch_id}/" in r["position"]) for r in staged} == {(batch_id, True)}
        apply_batch(spark, session_lake, source=source, batch_id=batch_id, default=ApplyOptions())
        compiled.append(metrics.METRIC_COMPILATION_TIME().getCount() - before)
    rows = dump_rows(session_lake, f"{database}.items", all_columns=True)
    assert [(r["id"], r["name"], r["_cdc_batch_id"]) for r in rows] == [
        (0, "y", batches[0]), (1, "x1", batches[0]), (2, "x2", batches[0]), (10, "y", batches[1]),
        (11, "x1", batches[1]), (12, "x2", batches[1]), (20, "y", batches[2]), (21, "x1", batches[2]),
        (22, "x2", batches[2])]
    assert compiled[2] < 60, compiled
    assert plans_built[1:] == [0, 0], plans_built  # the parse and the table's typing were built once


def test_a_process_serves_one_lake(spark, session_lake, tmp_path):
    # The session's catalog is fixed when it starts: a call for another lake is refused instead of writing that
    # lake's tables into the session's lake, and the CLI says so.
    from cdclake.exceptions import ConfigError
    from cdclake.settings import LakeSettings
    from cdclake.spark import get_spark
    from tests.support.cli_session import call_cli

    assert get_spark(session_lake) is spark
    other = tmp_path / "other-lake"
    with pytest.raises(ConfigError, match="needs a process of its own") as refused:
        get_spark(LakeSettings.from_env(other, env={}))
    assert session_lake.catalog_uri in str(refused.value) and str(other) in str(refused.value)
    messages = tmp_path / "messages.jsonl"
    messages.write_text(json.dumps(canal("one_lake", "INSERT", [{"id": "1", "name": "a"}], 1)) + "\n")
    result = call_cli(["apply", "--format", "canal", "--input", str(messages), "--lake", str(other)])
    assert result["exit"] != 0 and "needs a process of its own" in result["stderr"], result
    assert not (other / "raw").exists() or not any((other / "raw").iterdir()), "the refused call landed a batch"
