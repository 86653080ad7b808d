"""The Iceberg catalog on a real PostgreSQL server: `cdclake apply` (Spark's JdbcCatalog) writes the tables,
pyiceberg's SqlCatalog reads them, and they equal both the oracle and the same stream applied to the SQLite default.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cdclake.demo.generator import generate, write_batches
from cdclake.demo.oracle import expected_tables
from cdclake.settings import LakeSettings
from tests.support.postgres_server import PostgresServer, postgres_server  # noqa: F401

CLI = str(Path(sys.executable).parent / "cdclake")
CATALOG_ENV = ("CDCLAKE_CATALOG_URI", "CDCLAKE_CATALOG_USER", "CDCLAKE_CATALOG_PASSWORD", "CDCLAKE_WAREHOUSE",
               "CDCLAKE_RAW")


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([CLI, *args], env=env, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, f"cdclake {' '.join(args)}: exit {proc.returncode}\n{proc.stderr[-3000:]}"
    return proc


def _dump(env: dict[str, str], lake: Path, table: str) -> list[dict]:
    return [json.loads(line) for line in _cli(env, "dump", "--lake", str(lake), "--table", table).stdout.splitlines()]


@pytest.fixture(scope="module")
def stream(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Path], dict[str, list[dict]]]:
    changes = generate(seed=23, customers=10, orders=12, stream_changes=50, batches=3)
    return write_batches(changes, tmp_path_factory.mktemp("inbox")), expected_tables(changes.changes)


def test_postgres_catalog_matches_sqlite_default_and_pyiceberg_reads_it(
    tmp_path: Path, postgres_server: PostgresServer, stream: tuple[list[Path], dict[str, list[dict]]],  # noqa: F811
) -> None:
    files, expected = stream
    base = {k: v for k, v in os.environ.items() if k not in CATALOG_ENV}
    postgres_server.create_database("iceberg")
    pg_env = {**base, **postgres_server.lake_env("iceberg")}
    pg_lake, sqlite_lake = tmp_path / "pg-lake", tmp_path / "sqlite-lake"

    # PostgreSQL catalog: two micro-batches (the first, then the rest), so the second applies to existing tables.
    first = json.loads(_cli(pg_env, "apply", "--format", "debezium", "--input", str(files[0]),
                            "--lake", str(pg_lake)).stdout)
    rest = json.loads(_cli(pg_env, "apply", "--format", "debezium", "--input", *map(str, files[1:]),
                           "--lake", str(pg_lake)).stdout)
    assert [first["batch_id"], rest["batch_id"]] == ["00000001", "00000002"]
    assert first["quarantined"] == rest["quarantined"] == 0
    assert not (pg_lake / "catalog.db").exists(), "the PostgreSQL lake must not fall back to the SQLite catalog"

    # The SQLite default, same stream.
    _cli(base, "apply", "--format", "debezium", "--input", *map(str, files), "--lake", str(sqlite_lake))
    assert (sqlite_lake / "catalog.db").is_file()

    pg_tables = json.loads(_cli(pg_env, "tables", "--lake", str(pg_lake)).stdout)
    assert pg_tables == json.loads(_cli(base, "tables", "--lake", str(sqlite_lake)).stdout) == sorted(expected)
    for table, rows in expected.items():
        assert _dump(pg_env, pg_lake, table) == rows, table
        assert _dump(base, sqlite_lake, table) == rows, table

    # The catalog rows really live in PostgreSQL, under the catalog name Spark and pyiceberg share.
    import psycopg2

    conn = psycopg2.connect(host=postgres_server.host, port=postgres_server.port, user=postgres_server.user,
                            password=postgres_server.password, dbname="iceberg")
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT catalog_name, table_namespace, table_name FROM iceberg_tables "
                        "WHERE table_namespace NOT IN ('cdclake_meta', 'cdclake_changelog') ORDER BY 2, 3")
            rows_in_pg = cur.fetchall()
    finally:
        conn.close()
    assert rows_in_pg == [("lake", *t.split(".")) for t in sorted(expected)]

    # pyiceberg's SqlCatalog, in this process, over the same PostgreSQL catalog: same row counts and keys.
    from cdclake.catalog import pyiceberg_catalog

    settings = LakeSettings.from_env(pg_lake, env=pg_env)
    assert settings.sqlalchemy_uri.startswith("postgresql+psycopg2://")
    catalog = pyiceberg_catalog(settings)
    for table, rows in expected.items():
        arrow = catalog.load_table(table).scan().to_arrow()
        assert arrow.num_rows == len(rows), table
        user_columns = {c for c in arrow.column_names if not c.startswith("_cdc_")}
        assert rows and user_columns == set(rows[0]), table
