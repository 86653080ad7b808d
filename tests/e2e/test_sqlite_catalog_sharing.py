"""Two processes share the embedded SQLite catalog (a replay or the CLI beside a DAG run): each commits after the
other has, and neither fails. Iceberg's catalog-table check used to leave a read transaction open in every
process, so a process's commits failed with ``SQLITE_BUSY`` ("Unknown failure") once another process had
committed after it started."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

OTHER = """
import sys
from cdclake.settings import LakeSettings
from cdclake.spark import get_spark

spark = get_spark(LakeSettings.from_env(sys.argv[1], env={}), app_name="other-process")
table = f"lake.{sys.argv[2]}.theirs"
spark.sql(f"CREATE TABLE {table} (id int) USING iceberg")
spark.sql(f"INSERT INTO {table} VALUES (1)")
print("committed", flush=True)
sys.stdin.readline()
spark.sql(f"INSERT INTO {table} VALUES (2)")
print("committed again", flush=True)
"""


def test_two_processes_commit_in_turn_to_one_sqlite_catalog(spark, session_lake) -> None:
    namespace = f"shared_{uuid.uuid4().hex[:8]}"
    spark.sql(f"CREATE NAMESPACE lake.{namespace}")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "include"), os.environ.get("PYTHONPATH", "")])}
    other = subprocess.Popen([sys.executable, "-c", OTHER, str(session_lake.root), namespace], env=env, text=True,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert other.stdout is not None and other.stdin is not None
        assert other.stdout.readline().strip() == "committed", other.communicate(timeout=60)[1][-3000:]
        # This process commits after the other one did, and the other one then commits after this one.
        spark.sql(f"CREATE TABLE lake.{namespace}.ours (id int) USING iceberg")
        spark.sql(f"INSERT INTO lake.{namespace}.ours VALUES (10)")
        other.stdin.write("go\n")
        other.stdin.flush()
        out, err = other.communicate(timeout=300)
        assert other.returncode == 0 and out.strip() == "committed again", err[-3000:]
    finally:
        other.kill()
        other.wait(30)
    spark.sql(f"REFRESH TABLE lake.{namespace}.theirs")
    assert sorted(r["id"] for r in spark.table(f"lake.{namespace}.theirs").collect()) == [1, 2]
    assert [r["id"] for r in spark.table(f"lake.{namespace}.ours").collect()] == [10]
