"""Kafka landing in cluster mode: the per-source land task's body (``source_tasks.land_from``) with
``CDCLAKE_SPARK_MASTER`` a real standalone master + worker, so the offset ranges are read by tasks on the cluster's
executor, from a real broker (Tansu). Every produced offset lands exactly once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from tests.support import kafka_broker as broker_support
from tests.support.kafka_broker import Broker
from tests.support.spark_cluster import SparkCluster, spark_cluster  # noqa: F401

# In the extended tier (a standalone Spark master and worker): `CDCLAKE_TESTS=all ./.ci/run`.
pytestmark = pytest.mark.extended

kafka_broker = broker_support.kafka_broker  # the module's broker fixture

SOURCE = "clustered"
TOPIC = "cluster.public.items"

_LAND = """
import json, sys
from pyspark import SparkContext
from cdclake import source_tasks
from cdclake.settings import LakeSettings

result, _ = source_tasks.land_from(source_tasks.source_config(sys.argv[1]), LakeSettings.from_env())
print("RESULT " + json.dumps({**result.to_dict(), "master": SparkContext._active_spark_context.master}))
"""


def test_kafka_landing_reads_on_the_cluster_executors(kafka_broker: Broker, spark_cluster: SparkCluster,
                                                       tmp_path: Path) -> None:
    kafka_broker.create_topics({TOPIC: 2})
    produced = kafka_broker.produce([(TOPIC, b'{"id": %d}' % i, b'{"v": %d}' % i, None) for i in range(40)])
    sources, lake = tmp_path / "sources", tmp_path / "lake"
    sources.mkdir()
    (sources / f"{SOURCE}.yaml").write_text(textwrap.dedent(f"""\
        name: {SOURCE}
        format: debezium
        kafka: {{bootstrap: "{kafka_broker.bootstrap}", topics: ["{TOPIC}"], group: cdclake-{SOURCE}}}
        """))
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("CDCLAKE_")},
           "CDCLAKE_SOURCES_DIR": str(sources), "CDCLAKE_LAKE": str(lake),
           "CDCLAKE_SPARK_MASTER": spark_cluster.master_url, "CDCLAKE_DRIVER_MEMORY": "1g",
           "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    proc = subprocess.run([sys.executable, "-c", _LAND, SOURCE], env=env, capture_output=True, text=True,
                          timeout=600, check=False)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert proc.returncode == 0 and line, f"exit {proc.returncode}\n{proc.stderr[-4000:]}"
    result = json.loads(line[len("RESULT "):])
    assert result["master"] == spark_cluster.master_url
    assert (result["batch_id"], result["created"], result["message_count"]) == ("00000001", True, 40)
    assert result["lag"] == {TOPIC: {"0": 0, "1": 0}}

    # The ranges were read by the cluster's executor (its work directory holds the application) ...
    assert any(spark_cluster.work_dir.glob("app-*")), "no application ran on the worker"
    # ... into the raw zone, every produced offset exactly once.
    landed = Counter((r["topic"], r["partition"], r["offset"])
                     for path in sorted((lake / "raw" / SOURCE / "batches" / "00000001").glob("part-*.jsonl"))
                     for r in map(json.loads, path.read_text("utf-8").splitlines()))
    assert set(landed.values()) == {1} and set(landed) == set(produced)
