"""The per-source DAG's landing bookkeeping, without Spark: an interval records its batches once, and every later
run of that interval gets exactly those batches back; the replay DAG's batch selection by id and landing time."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from cdclake import source_tasks
from cdclake.exceptions import SourceConfigError
from cdclake.landing import raw_store
from cdclake.settings import LakeSettings

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
DAY = timedelta(days=1)
MESSAGE = {"schema": None, "payload": {"op": "c", "after": {"id": 1}, "source": {"lsn": 1, "schema": "public",
                                                                                  "table": "t"}}}


@pytest.fixture()
def lake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> LakeSettings:
    sources = tmp_path / "sources"
    sources.mkdir()
    (sources / "src.yaml").write_text("name: src\nformat: debezium\ninbox: inbox\n")
    monkeypatch.setenv("CDCLAKE_SOURCES_DIR", str(sources))
    monkeypatch.setenv("CDCLAKE_LAKE", str(tmp_path / "lake"))
    for name in ("CDCLAKE_CATALOG_URI", "CDCLAKE_RAW", "CDCLAKE_WAREHOUSE"):
        monkeypatch.delenv(name, raising=False)
    return LakeSettings.from_env()


def deliver(lake: LakeSettings, name: str) -> None:
    inbox = lake.root / "inbox"
    inbox.mkdir(parents=True, exist_ok=True)
    (inbox / name).write_text(json.dumps({**MESSAGE, "n": name}) + "\n")


def test_an_interval_always_gets_the_batches_it_recorded(lake: LakeSettings) -> None:
    deliver(lake, "a.jsonl")
    first = source_tasks.land_batch("src", interval_start=T0, interval_end=T0 + DAY)
    assert first == {"source": "src", "batches": ["00000001"], "reprocess": False,
                     "interval": f"{T0.isoformat()} -- {(T0 + DAY).isoformat()}"}
    # The batch is not marked applied yet, but a re-run of the same interval must not land or resume anything else.
    deliver(lake, "b.jsonl")
    again = source_tasks.land_batch("src", interval_start=T0, interval_end=T0 + DAY)
    assert again == {**first, "reprocess": True}
    record = raw_store(lake, "src").read_bytes(source_tasks.interval_key(T0, T0 + DAY))
    assert json.loads(record)["batches"] == ["00000001"]

    # The next interval resumes the unapplied batch 1 first (a failed run's batch is never left behind).
    second = source_tasks.land_batch("src", interval_start=T0 + DAY, interval_end=T0 + 2 * DAY)
    assert second["batches"] == ["00000001"] and second["reprocess"] is False


def test_an_interval_with_nothing_new_stays_empty(lake: LakeSettings) -> None:
    assert source_tasks.land_batch("src", interval_start=T0, interval_end=T0 + DAY) is None
    deliver(lake, "late.jsonl")
    # Re-running the empty interval does not pick up what arrived later; the next interval does.
    assert source_tasks.land_batch("src", interval_start=T0, interval_end=T0 + DAY) is None
    assert source_tasks.land_batch("src", interval_start=T0 + DAY, interval_end=T0 + 2 * DAY)["batches"] == [
        "00000001"]


def test_unknown_source_is_a_config_error(lake: LakeSettings) -> None:
    with pytest.raises(SourceConfigError, match="no config file for source 'nope'"):
        source_tasks.land_batch("nope", interval_start=T0, interval_end=T0 + DAY)


def test_select_batches_by_id_and_landing_time(lake: LakeSettings) -> None:
    from cdclake import pipeline

    for name in ("1.jsonl", "2.jsonl", "3.jsonl"):
        path = lake.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({**MESSAGE, "n": name}) + "\n")
        pipeline.land_inputs(lake, source="src", inputs=[str(path)])
    assert source_tasks.select_batches(lake, "src") == ["00000001", "00000002", "00000003"]
    assert source_tasks.select_batches(lake, "src", batch_from="2") == ["00000002", "00000003"]
    assert source_tasks.select_batches(lake, "src", batch_from="00000001", batch_to="1") == ["00000001"]
    now = datetime.now(timezone.utc)
    assert source_tasks.select_batches(lake, "src", time_from=(now - DAY).isoformat()) == [
        "00000001", "00000002", "00000003"]
    assert source_tasks.select_batches(lake, "src", time_to=(now - DAY).isoformat()) == []
    with pytest.raises(SourceConfigError, match="param batch_from='x'"):
        source_tasks.select_batches(lake, "src", batch_from="x")
    with pytest.raises(SourceConfigError, match="param time_to='yesterday'"):
        source_tasks.select_batches(lake, "src", time_to="yesterday")


def test_replay_rejects_an_unknown_mode_and_explains_resnapshot(lake: LakeSettings) -> None:
    with pytest.raises(SourceConfigError, match="param mode='rewind'"):
        source_tasks.replay({"source": "src", "mode": "rewind"})
    with pytest.raises(SourceConfigError, match="execute-snapshot"):
        source_tasks.replay({"source": "src", "mode": "resnapshot"})


def test_kafka_security_from_an_airflow_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    from cdclake.config import KafkaConfig

    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_SHOP", json.dumps({
        "conn_type": "generic", "login": "lander", "password": "s3cret",
        "extra": {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512"}}))
    settings = source_tasks.kafka_connection_settings("kafka_shop")
    assert settings == {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                        "sasl.username": "lander", "sasl.password": "s3cret"}
    # The source config's own security entries win over the connection's.
    config = KafkaConfig(bootstrap="b:9093", topics=("t",), group="g", connection="kafka_shop",
                         security={"sasl.mechanism": "PLAIN"})
    source = config.kafka_source(env={}, connection=settings)
    assert dict(source.client_config) == {**settings, "sasl.mechanism": "PLAIN"}
    assert source_tasks.kafka_connection_settings(None) == {}

    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_TYPO", json.dumps({"conn_type": "generic",
                                                              "extra": {"bootstrap.servers": "x:1"}}))
    with pytest.raises(SourceConfigError, match="extra key\\(s\\) bootstrap.servers are not Kafka security"):
        source_tasks.kafka_connection_settings("kafka_typo")
    with pytest.raises(SourceConfigError, match="'kafka_missing' cannot be read"):
        source_tasks.kafka_connection_settings("kafka_missing")
