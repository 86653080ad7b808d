"""Kafka landing pieces: the raw-record encoding, source config, range planning and the batch cap; range reading
and lander recovery against a real broker (Tansu)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from cdclake.exceptions import ConfigError
from cdclake.kafka import KafkaSource, OffsetRegressionError, _cap, plan_ranges, raw_line, read_range
from cdclake.landing import _record
from cdclake.settings import LakeSettings
from tests.support import kafka_broker as broker_support
from tests.support.kafka_broker import Broker
from tests.support.s3_server import S3Bucket, s3_bucket, s3_endpoint  # noqa: F401 - fixtures

kafka_broker = broker_support.kafka_broker  # the module's broker fixture


@pytest.mark.parametrize("key, value, headers", [
    (b'{"id":1}', b'{"a":"caf\xc3\xa9 \\"q\\" \xe2\x80\xa8 \\n"}', [("__debezium.oldkey", b'{"id":0}')]),
    (None, None, None),
    (b"line\nbreak\ttab\x01", b"", [("a", None), ("b", b"\xe2\x98\x83")]),
])
def test_raw_line_is_the_raw_record_json_of_file_landing(key, value, headers) -> None:
    line = raw_line(file_index=2, index=7, topic="t", partition=3, offset=41,
                    timestamp=1700000000123, headers=headers, key=key, value=value)
    expected = _record(input="kafka:t/3", file_index=2, index=7, framing="kafka", topic="t", partition=3,
                       offset=41, timestamp=1700000000123,
                       headers=None if headers is None else {n: None if v is None else v.decode() for n, v in headers},
                       key=None if key is None else key.decode(), value=None if value is None else value.decode())
    assert line == json.dumps(expected, ensure_ascii=False) + "\n"


def test_raw_line_keeps_bytes_that_are_not_utf8_as_base64() -> None:
    record = json.loads(raw_line(file_index=0, index=0, topic="t", partition=0, offset=0,
                                 timestamp=None, headers=[("h", b"\xff")], key=b"\x80\x00", value=b"ok"))
    assert record["binary"] == ["header:h", "key"]
    assert (record["key"], record["headers"], record["value"]) == ("gAA=", {"h": "/w=="}, "ok")



@pytest.mark.parametrize("value, documents", [
    (b'{"op": "c", "after": {"id": 1}}{"op": "d", "before": {"id": 1}}', 2),
    (b'{"op": "c"}\n{"op": "u"}\n{"op": "d"}\n', 3),
    (b'{"op": "c"} trailing', 2),
])
def test_raw_line_of_a_record_holding_several_documents_is_broken_not_read_as_its_first(value, documents) -> None:
    # Spark's JSON reader takes a value's first document and drops the rest without a word, so a record of
    # several (a producer that batches events into one record) is quarantined whole, with the reason.
    record = json.loads(raw_line(file_index=0, index=0, topic="t", partition=0, offset=9, timestamp=None,
                                 headers=None, key=None, value=value))
    assert record["value"] == value.decode()
    assert record["error"].startswith(f"the Kafka record's value holds {documents} JSON documents"), record["error"]


@pytest.mark.parametrize("value", [
    b'{"op": "c", "after": {"doc": "{\\"a\\": {\\"b\\": 1}}", "s": "}{"}}\n',
    b'{\n  "op": "c",\n  "after": {\n    "id": 1\n  }\n}\n',
])
def test_raw_line_of_one_document_with_braces_in_strings_or_pretty_printed_is_not_broken(value) -> None:
    record = json.loads(raw_line(file_index=0, index=0, topic="t", partition=0, offset=9, timestamp=None,
                                 headers=None, key=None, value=value))
    assert record["error"] is None

@pytest.mark.parametrize("lags, limit, expected", [
    ([5, 5], 100, [5, 5]),
    ([10, 10, 10], 9, [3, 3, 3]),
    ([1, 10, 10], 9, [1, 4, 4]),
    ([10, 10], 5, [3, 2]),
    ([0, 7], 3, [0, 3]),
])
def test_cap_splits_the_batch_size_fairly(lags, limit, expected) -> None:
    assert _cap(lags, limit) == expected


def test_plan_starts_after_the_landed_offsets_and_reports_retention_gaps() -> None:
    source = KafkaSource("b:1", topics=("t",), max_batch_records=100)
    marks = {("t", 0): (0, 10), ("t", 1): (5, 8), ("t", 2): (0, 4), ("u", 0): (2, 6)}
    plan = plan_ranges(source, marks, {("t", 0): 7, ("t", 1): 3, ("t", 2): 4})
    assert plan.planned == [("t", 0, 7, 10, 10), ("t", 1, 5, 8, 8), ("u", 0, 2, 6, 6)]
    assert plan.lost == [{"topic": "t", "partition": 1, "start": 3, "end": 5}] and plan.resets == []


def test_offsets_that_went_backwards_stop_the_plan_and_name_the_partition() -> None:
    source = KafkaSource("b:1", topics=("t",))
    # Partition 1 was landed up to offset 49 but its high watermark is now 3: the topic was recreated.
    marks = {("t", 0): (0, 10), ("t", 1): (0, 3)}
    with pytest.raises(OffsetRegressionError, match=r"t/1: landed up to offset 49, high watermark 3.*"
                                                     r"offset_reset: earliest"):
        plan_ranges(source, marks, {("t", 0): 4, ("t", 1): 50})


def test_offset_reset_earliest_lands_a_recreated_partition_again_from_its_low_watermark() -> None:
    source = KafkaSource("b:1", topics=("t",), offset_reset="earliest")
    plan = plan_ranges(source, {("t", 0): (0, 10), ("t", 1): (1, 3)}, {("t", 0): 4, ("t", 1): 50})
    assert plan.planned == [("t", 0, 4, 10, 10), ("t", 1, 1, 3, 3)]
    assert plan.resets == [{"topic": "t", "partition": 1, "landed": 50, "low": 1, "high": 3}]


@pytest.mark.parametrize("kwargs, message", [
    ({"topics": None}, "exactly one of topics"),
    ({"topics": "a", "pattern": "a.*"}, "exactly one of topics"),
    ({"topics": None, "pattern": "("}, "not a regular expression"),
    ({"topics": "a", "max_batch_records": 0}, "at least 1"),
    ({"topics": "a", "client_config": {"bootstrap.servers": "x"}}, "'bootstrap.servers' is not passed through"),
    ({"topics": "a", "env": {"CDCLAKE_KAFKA_MAX_BATCH_RECORDS": "many"}}, "is not an integer"),
    ({"topics": "a", "offset_reset": "latest"}, "expected one of fail, earliest"),
])
def test_config_errors_name_the_setting(kwargs, message) -> None:
    kwargs.setdefault("env", {})
    with pytest.raises(ConfigError, match=message):
        KafkaSource.from_config("broker:9092", **kwargs)


def test_security_settings_pass_through_from_config_and_env() -> None:
    source = KafkaSource.from_config(
        "broker:9093", topics="dbserver1.inventory.customers, dbserver1.inventory.orders",
        client_config={"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.username": "u"},
        env={"CDCLAKE_KAFKA_SASL_PASSWORD": "secret", "CDCLAKE_KAFKA_SSL_CA_LOCATION": "/ca.pem",
             "CDCLAKE_KAFKA_GROUP_ID": "g", "CDCLAKE_KAFKA_MAX_BATCH_RECORDS": "500", "OTHER": "x"})
    assert source.topics == ("dbserver1.inventory.customers", "dbserver1.inventory.orders")
    assert (source.group_id, source.max_batch_records) == ("g", 500)
    config = source.consumer_config()
    assert {k: config[k] for k in ("security.protocol", "sasl.mechanism", "sasl.username", "sasl.password",
                                   "ssl.ca.location")} == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.username": "u",
        "sasl.password": "secret", "ssl.ca.location": "/ca.pem"}
    assert "secret" not in repr(source)


def test_settings_the_client_rejects_are_a_config_error(tmp_path: Path) -> None:
    from cdclake.kafka import land_kafka

    source = KafkaSource("127.0.0.1:9", topics=("t",), client_config={"security.protocol": "carrier-pigeon"})
    with pytest.raises(ConfigError, match="kafka client settings for 127.0.0.1:9 are invalid: .*security.protocol"):
        land_kafka(LakeSettings.from_env(tmp_path / "lake", env={}), source="s", kafka=source)


def test_read_range_stops_at_its_end_although_more_records_exist(kafka_broker: Broker, tmp_path: Path) -> None:
    kafka_broker.create_topics({"unit.range": 1})
    kafka_broker.produce([("unit.range", b"k%d" % i, b"v%d" % i, None) for i in range(20)])
    source = KafkaSource(kafka_broker.bootstrap, topics=("unit.range",), group_id="unit")
    result = read_range({"range": {"topic": "unit.range", "partition": 0, "start": 5, "end": 12,
                                   "high_watermark": 20, "file_index": 0, "raw_object": "part.jsonl"},
                         "consumer": source.consumer_config(), "raw_root": str(tmp_path), "s3_endpoint": None,
                         "timeout_s": 30})
    lines = [json.loads(x) for x in (tmp_path / "part.jsonl").read_text().splitlines()]
    assert [r["offset"] for r in lines] == list(range(5, 12)) == list(range(result["first_offset"], 12))
    assert [r["value"] for r in lines] == [f"v{i}" for i in range(5, 12)] and result["messages"] == 7


def test_current_lag_counts_from_the_low_watermark_before_anything_landed(kafka_broker: Broker,
                                                                         tmp_path: Path) -> None:
    from cdclake.kafka import current_lag

    kafka_broker.create_topics({"unit.lag": 2})
    produced = kafka_broker.produce([("unit.lag", b"k%d" % i, b"v%d" % i, None) for i in range(9)])
    per_partition = Counter(str(p) for _, p, _ in produced)
    source = KafkaSource(kafka_broker.bootstrap, topics=("unit.lag",), group_id="unit")
    lake = LakeSettings.from_env(tmp_path / "lake", env={})
    assert current_lag(lake, source="s", kafka=source) == {"unit.lag": {"0": per_partition["0"],
                                                                        "1": per_partition["1"]}}


def test_read_range_writes_its_file_to_an_s3_raw_zone(kafka_broker: Broker, s3_bucket: S3Bucket) -> None:
    kafka_broker.create_topics({"unit.s3": 1})
    kafka_broker.produce([("unit.s3", b"k%d" % i, None if i == 2 else b"v%d" % i, None) for i in range(4)])
    source = KafkaSource(kafka_broker.bootstrap, topics=("unit.s3",), group_id="unit")
    result = read_range({"range": {"topic": "unit.s3", "partition": 0, "start": 0, "end": 4, "high_watermark": 4,
                                   "file_index": 0, "raw_object": "batches/00000001/part-00000.jsonl"},
                         "consumer": source.consumer_config(), "raw_root": s3_bucket.uri("raw/src"),
                         "s3_endpoint": s3_bucket.endpoint, "timeout_s": 30})
    body = s3_bucket.client().get_object(Bucket=s3_bucket.name,
                                         Key="raw/src/batches/00000001/part-00000.jsonl")["Body"].read()
    assert [json.loads(x)["value"] for x in body.decode().splitlines()] == ["v0", "v1", None, "v3"]
    assert (result["messages"], result["tombstones"]) == (4, 1)


def test_a_lander_that_died_after_claiming_the_successor_is_taken_over(kafka_broker: Broker, spark,
                                                                       session_lake: LakeSettings) -> None:
    from cdclake.kafka import land_kafka
    from cdclake.landing import raw_store

    kafka_broker.create_topics({"unit.takeover": 2})
    kafka_broker.produce([("unit.takeover", b"k%d" % i, b"v%d" % i, None) for i in range(10)])
    source = KafkaSource(kafka_broker.bootstrap, topics=("unit.takeover",), group_id="unit-takeover")
    store = raw_store(session_lake, "unit-takeover")
    # The dead lander claimed batch 00000001 and the right to follow "no batch", then died before its manifest.
    store.write_bytes("claims/00000001", b"")
    store.write_bytes("kafka/successor/00000000", b"00000001")
    landed = land_kafka(session_lake, source="unit-takeover", kafka=source, spark=spark)
    assert (landed.batch_id, landed.message_count) == ("00000001", 10)
    again = land_kafka(session_lake, source="unit-takeover", kafka=source, spark=lambda: pytest.fail("no Spark"))
    assert again.batch_id is None and again.lag == {"unit.takeover": {"0": 0, "1": 0}}


def test_an_unreadable_range_fails_with_one_clear_error_and_stays_incomplete(kafka_broker: Broker, spark,
                                                                               session_lake: LakeSettings) -> None:
    from cdclake.kafka import KafkaLandingError, land_kafka
    from cdclake.landing import raw_store

    kafka_broker.create_topics({"unit.gone": 1})
    kafka_broker.produce([("unit.gone", b"k%d" % i, b"v%d" % i, None) for i in range(5)])
    store = raw_store(session_lake, "unit-gone")
    # A planned range the broker no longer has (as after retention or a recreated topic).
    planned = {"topic": "unit.gone", "partition": 0, "start": 100, "end": 110, "high_watermark": 110,
               "file_index": 0, "raw_object": "batches/00000001/part-00000.jsonl"}
    store.write_bytes("manifests/00000001.json", json.dumps({
        "batch_id": "00000001", "source": "unit-gone", "message_count": 10, "files": [],
        "kafka": {"ranges": [planned], "offsets": {"unit.gone": {"0": 110}}}}).encode())
    source = KafkaSource(kafka_broker.bootstrap, topics=("unit.gone",), group_id="unit-gone", timeout_s=5)
    with pytest.raises(KafkaLandingError, match=r"1 of 1 offset range\(s\) could not be read .*unit.gone/0"):
        land_kafka(session_lake, source="unit-gone", kafka=source, spark=spark)
    assert not store.exists("kafka/complete/00000001.json")


def test_a_recreated_topic_stops_the_landing_unless_offset_reset_is_earliest(kafka_broker: Broker, spark,
                                                                             session_lake: LakeSettings) -> None:
    from cdclake.kafka import land_kafka
    from cdclake.landing import raw_store

    kafka_broker.create_topics({"unit.recreated": 1})
    kafka_broker.produce([("unit.recreated", b"k%d" % i, b"v%d" % i, None) for i in range(5)])
    store = raw_store(session_lake, "unit-recreated")
    # The lake landed 40 offsets of the topic's earlier incarnation, completely.
    store.write_bytes("claims/00000001", b"")
    store.write_bytes("kafka/successor/00000000", b"00000001")
    store.write_bytes("manifests/00000001.json", json.dumps({
        "batch_id": "00000001", "source": "unit-recreated", "message_count": 40, "files": [],
        "kafka": {"ranges": [], "offsets": {"unit.recreated": {"0": 40}}}}).encode())
    store.write_bytes("kafka/complete/00000001.json", b"{}")
    strict = KafkaSource(kafka_broker.bootstrap, topics=("unit.recreated",), group_id="unit-recreated")
    with pytest.raises(OffsetRegressionError, match=r"unit.recreated/0: landed up to offset 39, high watermark 5"):
        land_kafka(session_lake, source="unit-recreated", kafka=strict, spark=lambda: pytest.fail("no Spark"))
    assert not store.exists("manifests/00000002.json")

    lenient = KafkaSource(kafka_broker.bootstrap, topics=("unit.recreated",), group_id="unit-recreated",
                          offset_reset="earliest")
    landed = land_kafka(session_lake, source="unit-recreated", kafka=lenient, spark=spark)
    assert (landed.batch_id, landed.message_count) == ("00000002", 5)
    manifest = json.loads(store.read_bytes("manifests/00000002.json"))
    assert manifest["kafka"]["offset_resets"] == [{"topic": "unit.recreated", "partition": 0, "landed": 40,
                                                   "low": 0, "high": 5}]
    assert manifest["kafka"]["offsets"] == {"unit.recreated": {"0": 5}}
    assert land_kafka(session_lake, source="unit-recreated", kafka=strict, spark=spark).batch_id is None


def test_demo_stream_produced_to_topics_keeps_every_message(kafka_broker: Broker) -> None:
    from confluent_kafka import Consumer, TopicPartition

    from cdclake.demo.generator import generate
    from cdclake.demo.produce import produce_lines
    from tests.support.kafka_broker import EXACT_WATERMARK_PRODUCER

    lines = [line for batch in generate(3, customers=6, orders=6, stream_changes=30, batches=2).batches
             for line in batch]
    counts = produce_lines(kafka_broker.bootstrap, lines, partitions=2, producer_config=EXACT_WATERMARK_PRODUCER)
    assert counts == dict(Counter(json.loads(x)["topic"] for x in lines))
    consumer = Consumer({"bootstrap.servers": kafka_broker.bootstrap, "group.id": "unit-demo"})
    try:
        for topic, n in counts.items():
            assert sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in (0, 1)) == n
    finally:
        consumer.close()
