"""Landing from a real Kafka-protocol broker (Tansu), then normalize and apply, against the plain-Python oracle.

The demo's Debezium PostgreSQL stream is produced to multi-partition topics (one key always on one partition, as
Debezium's producers do), landed by Spark tasks, normalized and applied to Iceberg; the tables must equal the
oracle's replay of the logical changes, and the raw zone must hold every produced offset exactly once, with keys,
values, tombstones and headers byte-exact. The fault test kills the landing process for real (``kill -9``, through
the ``CDCLAKE_FAULT`` test hook) at each dangerous point and re-runs it.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Callable

import pytest

from cdclake import pipeline
from cdclake.demo.generator import generate
from cdclake.demo.oracle import expected_tables
from cdclake.kafka import KafkaSource
from cdclake.reader import dump_rows
from cdclake.settings import LakeSettings
from tests.support import kafka_broker as broker_support
from tests.support.kafka_broker import Broker, Message

kafka_broker = broker_support.kafka_broker  # the module's broker fixture

CLI = [str(Path(sys.executable).parent / "cdclake")]
STREAM = generate(seed=5, customers=12, orders=15, stream_changes=80, batches=3)


def rewrite(prefix: str, namespace: str) -> Callable[[dict], dict]:
    """Envelope rewrite: topics ``<prefix>.<namespace>.<table>``, and the namespace as the events' source schema
    (tests sharing one catalog keep their tables apart)."""
    def apply(doc: dict) -> dict:
        doc = dict(doc, topic=f"{prefix}.{namespace}.{doc['topic'].rsplit('.', 1)[1]}")
        if doc.get("payload") is not None and namespace != "public":
            value = json.loads(doc["payload"])
            value["payload"]["source"]["schema"] = namespace
            doc["payload"] = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
        return doc
    return apply


def oracle(namespace: str) -> dict[str, list[dict[str, Any]]]:
    return {f"{namespace}.{t.split('.', 1)[1]}": rows for t, rows in expected_tables(STREAM.changes).items()}


def raw_records(settings: LakeSettings, source: str) -> list[dict[str, Any]]:
    """Every raw record in the source's raw zone (all batches), with its batch id as ``_batch``."""
    out = []
    for path in sorted((Path(settings.raw_root) / source / "batches").glob("*/part-*.jsonl")):
        for line in path.read_text("utf-8").splitlines():
            out.append(dict(json.loads(line), _batch=path.parent.name))
    return out


def _bytes(record: dict[str, Any], field: str, text: str | None) -> bytes | None:
    if text is None:
        return None
    return base64.b64decode(text) if field in record.get("binary", []) else text.encode("utf-8")


def assert_exactly_once(records: list[dict[str, Any]], produced: dict[tuple[str, int, int], Message]) -> None:
    """Every produced offset is in the raw zone exactly once, with key, value and headers byte-exact."""
    seen = Counter((r["topic"], r["partition"], r["offset"]) for r in records)
    duplicates = {k: n for k, n in seen.items() if n > 1}
    assert not duplicates, f"offsets landed more than once: {sorted(duplicates)[:5]}"
    assert set(seen) == set(produced), (f"missing {sorted(set(produced) - set(seen))[:5]}, "
                                        f"unexpected {sorted(set(seen) - set(produced))[:5]}")
    for r in records:
        _, key, value, headers = produced[(r["topic"], r["partition"], r["offset"])]
        assert _bytes(r, "key", r["key"]) == key
        assert _bytes(r, "value", r["value"]) == value
        expected_headers = None if headers is None else {n: v for n, v in headers}
        got = None if r["headers"] is None else {n: _bytes(r, f"header:{n}", v) for n, v in r["headers"].items()}
        assert got == expected_headers
        assert r["framing"] == "kafka" and r["input"] == f"kafka:{r['topic']}/{r['partition']}"


def committed(broker: Broker, group: str, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        got = consumer.committed([TopicPartition(t, p) for t, p in partitions], timeout=10)
        return {(tp.topic, tp.partition): tp.offset for tp in got}
    finally:
        consumer.close()


def ends(produced: dict[tuple[str, int, int], Message]) -> dict[tuple[str, int], int]:
    out: dict[tuple[str, int], int] = {}
    for topic, partition, offset in produced:
        out[(topic, partition)] = max(out.get((topic, partition), 0), offset + 1)
    return out


def test_land_grow_and_cap_exactly_once(kafka_broker: Broker, spark, session_lake: LakeSettings) -> None:
    """In-process landing (the shared session): raw zone contents, growth, the batch cap, lag and commits.

    Normalize and apply of Kafka batches against the oracle run in the CLI test below (Spark time is scarce)."""
    namespace, prefix, source, group = "kafka_e2e", "k1", "kafka-e2e", "cdclake-kafka-e2e"
    odd = f"{prefix}.odd"
    topics = {f"{prefix}.{namespace}.customers": 3, f"{prefix}.{namespace}.orders": 2, odd: 1}
    kafka_broker.create_topics(topics)
    produced = kafka_broker.produce_kcat_lines(STREAM.batches[0] + STREAM.batches[1], rewrite(prefix, namespace))
    # Bytes that are not UTF-8 (key and a header) survive byte-exact; the message is quarantined, not dropped.
    produced.update(kafka_broker.produce([(odd, b"\xff\xfe\x00k", b'{"not": "debezium"}', [("h", b"\x80\x81")])]))
    assert {p for _, p, _ in produced} == {0, 1, 2}, "the stream should spread over the partitions"
    kafka = KafkaSource.from_config(kafka_broker.bootstrap, topics=list(topics), group_id=group, env={})

    first = pipeline.land_kafka(session_lake, source=source, kafka=kafka, spark=spark)
    assert (first.batch_id, first.created, first.message_count) == ("00000001", True, len(produced))
    assert all(n == 0 for parts in first.lag.values() for n in parts.values()), first.lag
    records = raw_records(session_lake, source)
    assert_exactly_once(records, produced)
    assert any(r["value"] is None for r in records), "tombstones are kept in the raw zone"
    assert any("__debezium.oldkey" in (r["headers"] or {}) for r in records), "headers travel with the records"
    assert [r for r in records if r["topic"] == odd][0]["binary"] == ["header:h", "key"]
    manifest = json.loads(Path(first.manifest).read_text())
    assert {(r["topic"], r["partition"], r["start"], r["end"]) for r in manifest["kafka"]["ranges"]} == {
        (t, p, 0, end) for (t, p), end in ends(produced).items()}

    # Growth: the next batches hold exactly the offsets produced since, split by the batch-size cap.
    more = kafka_broker.produce_kcat_lines(STREAM.batches[2], rewrite(prefix, namespace))
    capped = KafkaSource.from_config(kafka_broker.bootstrap, topics=list(topics), group_id=group, env={},
                                     max_batch_records=len(more) // 2)
    second = pipeline.land_kafka(session_lake, source=source, kafka=capped, spark=spark)
    assert second.batch_id == "00000002" and second.message_count == len(more) // 2
    assert sum(n for parts in second.lag.values() for n in parts.values()) == len(more) - len(more) // 2
    third = pipeline.land_kafka(session_lake, source=source, kafka=kafka, spark=spark)
    assert third.batch_id == "00000003" and third.message_count == len(more) - len(more) // 2
    records = raw_records(session_lake, source)
    assert_exactly_once(records, {**produced, **more})
    new = {(r["topic"], r["partition"], r["offset"]) for r in records if r["_batch"] in ("00000002", "00000003")}
    assert new == set(more)

    nothing = pipeline.land_kafka(session_lake, source=source, kafka=kafka, spark=lambda: pytest.fail("no Spark"))
    assert nothing.batch_id is None and nothing.lag is not None
    assert all(n == 0 for parts in nothing.lag.values() for n in parts.values())
    # The advisory consumer-group commit mirrors the landed offsets.
    final = ends({**produced, **more})
    assert committed(kafka_broker, group, list(final)) == final


def run_cli(lake: Path, bootstrap: str, topics: list[str], fault: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, CDCLAKE_SPARK_MASTER="local[2]", CDCLAKE_SHUFFLE_PARTITIONS="2",
               CDCLAKE_DRIVER_MEMORY="1g")
    env.pop("CDCLAKE_FAULT", None)
    if fault:
        env["CDCLAKE_FAULT"] = fault
    return subprocess.run([*CLI, "-v", "apply", "--format", "debezium", "--kafka", bootstrap, "--topics",
                           ",".join(topics), "--lake", str(lake), "--group", "cdclake-fault"],
                          capture_output=True, text=True, timeout=600, env=env)


def test_kill_9_at_each_point_then_rerun_lands_each_offset_once(kafka_broker: Broker, lake: LakeSettings) -> None:
    prefix = "k2"
    topics = {f"{prefix}.public.customers": 2, f"{prefix}.public.orders": 3}
    kafka_broker.create_topics(topics)
    produced = kafka_broker.produce_kcat_lines(STREAM.batches[0] + STREAM.batches[1], rewrite(prefix, "public"))
    raw = Path(lake.raw_root) / "default"

    def killed(fault: str) -> None:
        result = run_cli(lake.root, kafka_broker.bootstrap, list(topics), fault)
        assert result.returncode == -signal.SIGKILL, (fault, result.returncode, result.stderr[-3000:])
        assert (raw / "manifests" / "00000001.json").exists()

    # (a) after the manifest, before any file; then again while the files are being written.
    killed("after-manifest")
    assert not list(raw.glob("batches/*/part-*"))
    killed("mid-files")
    assert not (raw / "kafka" / "complete" / "00000001.json").exists()
    # (b) the files are done and the batch complete, but the consumer group was not committed.
    killed("before-commit")
    assert (raw / "kafka" / "complete" / "00000001.json").exists()
    assert all(o < 0 for o in committed(kafka_broker, "cdclake-fault", list(ends(produced))).values())
    assert_exactly_once(raw_records(lake, "default"), produced)

    # Re-run: the landed-but-unapplied batch is applied first; the next run lands exactly the new offsets.
    more = kafka_broker.produce_kcat_lines(STREAM.batches[2], rewrite(prefix, "public"))
    resumed = run_cli(lake.root, kafka_broker.bootstrap, list(topics))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    summary = json.loads(resumed.stdout)
    assert (summary["batch_id"], summary["new_batch"], summary["messages"]) == ("00000001", False, len(produced))
    assert summary["quarantined"] == 0
    tombstones = sum(value is None for _, _, value, _ in produced.values())
    assert summary["skipped"] == {"tombstone (null value)": tombstones}, "tombstones are handled by normalization"
    grown = run_cli(lake.root, kafka_broker.bootstrap, list(topics))
    assert grown.returncode == 0, grown.stderr[-3000:]
    summary = json.loads(grown.stdout)
    assert (summary["batch_id"], summary["new_batch"], summary["messages"]) == ("00000002", True, len(more))
    assert all(n == 0 for parts in summary["lag"].values() for n in parts.values())
    assert set(summary) >= {"tables", "quarantined", "skipped"}

    records = raw_records(lake, "default")
    assert_exactly_once(records, {**produced, **more})
    assert {(r["topic"], r["partition"], r["offset"]) for r in records if r["_batch"] == "00000002"} == set(more)
    for table, rows in oracle("public").items():
        assert dump_rows(lake, table) == rows, table
    final = ends({**produced, **more})
    assert committed(kafka_broker, "cdclake-fault", list(final)) == final
