"""A per-source ingestion DAG whose config names Kafka, run with Airflow's ``dag.test()`` against a real broker (Tansu).

One broker and one lake for the module; the runs happen in one Airflow process, in order:

0. the topics exist but are empty: the run short-circuits before any Spark starts;
1. the demo stream's snapshot is produced: the run lands it as batch 1, applies it, records the lag (0) as the
   ``kafka_lag`` data-quality result, and the tables equal the oracle's replay of the snapshot;
2. nothing new: the run short-circuits, and no batch is written;
3. the streamed changes are produced: the run lands exactly the new offsets (from batch 1's offsets to the
   broker's high watermarks, each once) as batch 2, and the tables equal the oracle's replay of the whole stream.
"""

from __future__ import annotations

import json
import os
import textwrap
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from cdclake import airflow_home
from cdclake.demo.generator import generate
from cdclake.demo.oracle import expected_tables
from cdclake.dq_results import read_rows
from cdclake.reader import dump_rows, list_tables
from cdclake.settings import LakeSettings
from tests.support import kafka_broker as broker_support
from tests.support.airflow_runs import run_plan
from tests.support.kafka_broker import Broker

# In the extended tier (3 minutes of a CI worker; Kafka landing has its tests in CI): `CDCLAKE_TESTS=all ./.ci/run`.
pytestmark = pytest.mark.extended

kafka_broker = broker_support.kafka_broker  # the module's broker fixture

REPO = Path(__file__).resolve().parents[2]
SOURCE = "topics"
DAG_ID = f"cdclake_sources__{SOURCE}"
TOPICS = {"demo.public.customers": 3, "demo.public.orders": 2}
DATES = [datetime(2026, 3, 1, tzinfo=timezone.utc) + timedelta(days=i) for i in range(4)]
STREAM = generate(seed=11, customers=8, orders=10, stream_changes=40, batches=2)  # [snapshot, streamed changes]


def high_watermarks(bootstrap: str) -> dict[tuple[str, int], int]:
    """The broker's high watermark per partition, read with a plain consumer (not cdclake's code)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "test-watermarks"})
    try:
        return {(t, p): consumer.get_watermark_offsets(TopicPartition(t, p), timeout=10)[1]
                for t, n in TOPICS.items() for p in range(n)}
    finally:
        consumer.close()


def raw_offsets(settings: LakeSettings, batch_id: str) -> Counter[tuple[str, int, int]]:
    """(topic, partition, offset) of every raw record of one batch, counted."""
    folder = Path(settings.raw_root) / SOURCE / "batches" / batch_id
    return Counter((r["topic"], r["partition"], r["offset"])
                   for path in sorted(folder.glob("part-*.jsonl"))
                   for r in map(json.loads, path.read_text("utf-8").splitlines()))


def assert_skipped(run: dict[str, Any]) -> None:
    assert run["state"] == "success", run
    assert run["tasks"]["land_batch"] == "success" and run["xcom"].get("land_batch") is None
    assert all(state == "skipped" for task, state in run["tasks"].items() if task != "land_batch"), run["tasks"]


def test_kafka_source_dag_lands_skips_and_lands_exactly_the_new_offsets(kafka_broker: Broker,
                                                                         tmp_path: Path) -> None:
    lake, sources = tmp_path / "lake", tmp_path / "sources"
    sources.mkdir()
    (sources / f"{SOURCE}.yaml").write_text(textwrap.dedent(f"""\
        name: {SOURCE}
        format: debezium
        schedule: "@daily"
        retries: 0
        kafka:
          bootstrap: {kafka_broker.bootstrap}
          pattern: "demo\\\\.public\\\\..*"
          group: cdclake-{SOURCE}
          max_lag: 0
        """))
    kafka_broker.create_topics(TOPICS)
    lines = []
    for number, batch in enumerate(STREAM.batches):
        lines.append(tmp_path / f"part-{number}.jsonl")
        lines[-1].write_text("".join(f"{line}\n" for line in batch))
    produce = [{"bootstrap": kafka_broker.bootstrap, "lines": str(path)} for path in lines]
    first_tables = tmp_path / "first-tables.json"

    env = airflow_home.prepare(tmp_path / "airflow", base={
        **{k: v for k, v in os.environ.items() if not k.startswith("CDCLAKE_")},
        "CDCLAKE_SOURCES_DIR": str(sources), "CDCLAKE_LAKE": str(lake),
        "CDCLAKE_SPARK_MASTER": "local[2]", "CDCLAKE_SHUFFLE_PARTITIONS": "2", "CDCLAKE_DRIVER_MEMORY": "2g",
    })
    run = [{"runs": [{"dag_id": DAG_ID, "logical_date": d.isoformat()}]} for d in DATES]
    empty, first, idle, grown = run_plan(env, [run[0], {**run[1], "produce": produce[0], "dump": str(first_tables)},
                                               run[2], {**run[3], "produce": produce[1]}], tmp_path, "runs")
    settings = LakeSettings.from_env(lake, env={})
    snapshot = [c for c in STREAM.changes if c.op == "snapshot"]
    assert len(snapshot) == 18 and len(STREAM.batches[0]) == 18

    # 0: empty topics: skipped, decided from the watermarks alone.
    assert_skipped(empty)
    assert not empty["spark_started"], "a run with nothing new must not start Spark"

    # 1: the snapshot, landed and applied; the lag recorded as a data-quality result.
    assert first["state"] == "success", first["tasks"]
    landed = first["xcom"]["land_batch"]
    assert landed["batches"] == ["00000001"] and not landed["reprocess"]
    assert landed["lag"] == {t: {str(p): 0 for p in range(n)} for t, n in sorted(TOPICS.items())}
    assert first["xcom"]["check_kafka_lag"] == {"table_id": f"kafka_lag.{SOURCE}", "success": True, "lag_total": 0,
                                                "max_lag": 0, "lag": landed["lag"]}
    assert sorted(v["table_id"] for k, v in first["xcom"].items() if k.startswith("apply_table")) == [
        "public.customers", "public.orders"]
    assert all(first["tasks"][f"validate_table[{i}]"] == "success" for i in range(2))
    assert first["tasks"]["mark_applied"] == "success"
    first_offsets = raw_offsets(settings, "00000001")
    assert sum(first_offsets.values()) == len(first_offsets) == len(STREAM.batches[0])
    assert json.loads(first_tables.read_text()) == json.loads(json.dumps(expected_tables(snapshot), default=str))
    lag_rows = [r for r in read_rows(settings) if r["table_id"] == f"kafka_lag.{SOURCE}"]
    assert sorted((r["batch_id"], r["expectation"], r["status"], r["success"], r["observed_value"]["total"])
                  for r in lag_rows) == [("00000001", "kafka_lag", "passed", True, 0),
                                         ("00000002", "kafka_lag", "passed", True, 0)]

    # 2: nothing new: skipped, no batch.
    assert_skipped(idle)
    manifests = sorted(p.name for p in (Path(settings.raw_root) / SOURCE / "manifests").glob("*.json"))

    # 3: exactly the offsets produced since batch 1, each once, as batch 2.
    assert grown["state"] == "success", grown["tasks"]
    assert grown["xcom"]["land_batch"]["batches"] == ["00000002"]
    assert manifests == ["00000001.json", "00000002.json"]  # as listed after the whole plan: idle wrote none
    # Batch 1 holds the offsets produced before run 1; batch 2 every other offset up to the broker's high
    # watermarks, once: together, every produced offset exactly once.
    every_offset = {(t, p, o) for (t, p), high in high_watermarks(kafka_broker.bootstrap).items()
                    for o in range(high)}
    second = raw_offsets(settings, "00000002")
    assert set(second.values()) == {1} and not set(second) & set(first_offsets)
    assert set(second) == every_offset - set(first_offsets)
    assert len(second) == len(STREAM.batches[1])
    assert grown["xcom"]["check_kafka_lag"]["lag_total"] == 0

    expected = expected_tables(STREAM.changes)
    assert list_tables(settings) == sorted(expected)
    for table, rows in expected.items():
        assert dump_rows(settings, table) == rows, table
