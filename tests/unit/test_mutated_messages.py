"""Seed messages mutated at random go through normalize and apply, one batch per format: nothing raises, and every
message ends somewhere (staged, quarantined or skipped).

A mutation removes a field, gives it another JSON type, or changes a text (cut in half, a stray quote, repeated,
non-ASCII, ``NaN``, ``1e400``). Run at scale, this found a schema field of the wrong JSON type stopping the whole
batch (now only the messages with that schema are quarantined), CKafka ``TIME`` texts that made Spark's datetime
parser fail the job, and a key column Iceberg cannot bucket (a double) failing the table's CREATE TABLE. The seed
is fixed, so a failure reproduces. Every message is moved into a namespace of this test's own (database and schema
fields are set) and table names are not mutated, so the batch touches a few tables no other test reads. DDL
examples are left out: their statements name tables of their own (the DDL parser has its cases in ``test_ddl.py``).
"""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any, Iterator

import pytest

from cdclake.keys import KeySpec
from cdclake.landing import InputFile, land_files
from cdclake.normalize import normalize_batch

# In the extended tier (600 random mutations; the broken corpus covers each reason in CI):
# `CDCLAKE_TESTS=all ./.ci/run`.
pytestmark = pytest.mark.extended

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
MESSAGES = {
    "debezium": ["debezium/pg_create.json", "debezium/pg_update.json", "debezium/pg_delete.json",
                 "debezium/pg_truncate.json", "debezium/pg_message_transactional.json",
                 "debezium/sqlserver_create.json"],
    "dtle": ["debezium/dtle_create_snapshot.json"],
    "drs": ["drs/mysql_update.json", "drs/gauss_update.json", "drs/mongo_insert.json", "drs/mongo_update_set.json",
            "drs/mongo_delete.json"],
    "ckafka": ["ckafka/dml_insert.json", "ckafka/dml_update.json", "ckafka/dml_delete.json"],
    "canal": ["external/flink-canal-data.jsonl", "external/tiflow-canal-json-types.jsonl"],
}
NAMESPACE_FIELDS = frozenset(("db", "schema", "database", "DATABASE"))
NAME_FIELDS = NAMESPACE_FIELDS | {"table", "TABLE", "coll"}
"""Not mutated: each new table name would be one more table to create and apply (minutes, not a new case)."""
COUNT = 100


def _messages(fmt: str) -> list[Any]:
    found = []
    for name in MESSAGES[fmt]:
        text = (FIXTURES / name).read_text(encoding="utf-8")
        chunks = text.splitlines() if name.endswith(".jsonl") else [text]
        found += [json.loads(chunk) for chunk in chunks if chunk.strip()]
        assert found, name
    return [m for m in found if not m.get("isDdl")]


def _in_namespace(value: Any, namespace: str) -> Any:
    if isinstance(value, dict):
        return {k: namespace if k in NAMESPACE_FIELDS and isinstance(v, str) else _in_namespace(v, namespace)
                for k, v in value.items()}
    if isinstance(value, list):
        return [_in_namespace(v, namespace) for v in value]
    return value


def _nodes(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    if path and path[-1] not in NAME_FIELDS:
        yield path, value
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _nodes(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value[:4]):
            yield from _nodes(v, (*path, i))


def _mutated(message: Any, rng: random.Random) -> Any:
    out = copy.deepcopy(message)
    for _ in range(rng.choice((1, 1, 2, 3))):
        nodes = list(_nodes(out))
        if not nodes:
            break
        path, value = rng.choice(nodes)
        parent = out
        for step in path[:-1]:
            parent = parent[step]
        if rng.random() < 0.2 and isinstance(parent, dict):
            del parent[path[-1]]
        elif isinstance(value, str):
            parent[path[-1]] = rng.choice((value[: len(value) // 2], value + '"', value * 20, "NaN", "1e400",
                                           "\u00e9\u4e2d" + value, f" {value} ", ""))
        else:
            parent[path[-1]] = rng.choice((None, "", "x", 0, -1, 1.5, 2**63, True, [], {}, [None], [{}]))
    return out


@pytest.mark.parametrize("fmt", sorted(MESSAGES))
def test_mutated_messages_never_stop_the_batch(spark, session_lake, fmt: str) -> None:
    from cdclake.pipeline import apply_batch, is_applied

    rng = random.Random(f"mutants-{fmt}")
    namespace = f"mutants_{fmt}"
    originals = [_in_namespace(m, namespace) for m in _messages(fmt)]
    lines = [json.dumps(_mutated(rng.choice(originals), rng), ensure_ascii=rng.random() < 0.5) for _ in range(COUNT)]
    source = f"mutants_{fmt}"
    batch_id, _, _, _ = land_files(session_lake, source=source, files=[
        InputFile(f"mem://{source}/mutants.jsonl", ("\n".join(lines) + "\n").encode("utf-8"))])

    result = normalize_batch(spark, session_lake, source=source, batch_id=batch_id, fmt=fmt,
                             keys=KeySpec(default=("id",)))
    # Staged counts rows (a canal message may hold several), the others messages: no message is lost.
    assert sum(result.tables.values()) + result.quarantined + sum(result.skipped.values()) >= COUNT, result
    assert result.quarantined, result  # the mutations do break messages
    applied = apply_batch(spark, session_lake, source=source, batch_id=batch_id)
    assert set(applied.tables) == set(result.tables)
    assert is_applied(session_lake, source, batch_id)


def test_a_source_time_beyond_the_calendar_is_no_source_time(spark, session_lake) -> None:
    """An `es` in microseconds (the year 15700) on a DDL message stopped every run of its batch: the driver reads
    DDL rows into Python, whose datetime ends in 9999. Such a time is null, on every message; the rest applies."""
    from cdclake.normalize import read_staged, staging_dir
    from cdclake.pipeline import apply_batch

    huge = 433305438660591
    base = {"database": "calendar", "table": "t", "es": huge, "ts": 1652950000000, "old": None, "id": 1}
    messages = [
        {**base, "data": None, "isDdl": True, "type": "CREATE", "mysqlType": None, "sqlType": None,
         "pkNames": None, "sql": "CREATE TABLE `t` (`id` INT NOT NULL, `v` VARCHAR(5), PRIMARY KEY(`id`))"},
        {**base, "id": 2, "data": [{"id": "1", "v": "a"}], "isDdl": False, "type": "INSERT", "sql": "",
         "mysqlType": {"id": "int", "v": "varchar(5)"}, "sqlType": {"id": 4, "v": 12}, "pkNames": ["id"]},
        {**base, "id": 3, "es": 1652950000000, "data": [{"id": "2", "v": "b"}], "isDdl": False, "type": "INSERT",
         "sql": "", "mysqlType": {"id": "int", "v": "varchar(5)"}, "sqlType": {"id": 4, "v": 12}, "pkNames": ["id"]},
    ]
    source = "calendar"
    batch_id, _, _, _ = land_files(session_lake, source=source, files=[
        InputFile(f"mem://{source}/calendar.jsonl", "".join(json.dumps(m) + "\n" for m in messages).encode())])
    result = normalize_batch(spark, session_lake, source=source, batch_id=batch_id, fmt="canal")
    assert (result.tables, result.quarantined) == ({"calendar.t": 2}, 0), result
    staged = read_staged(spark, staging_dir(session_lake, source, batch_id) / "calendar.t")
    times = {r["key"]["id"]: r["source_ts"] for r in staged.collect()}
    assert times[1] is None and times[2] is not None and times[2].year == 2022, times
    assert apply_batch(spark, session_lake, source=source, batch_id=batch_id).tables["calendar.t"].inserted == 2
