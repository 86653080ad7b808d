"""Source configs (include/sources/*.yaml): the examples load, options merge, and every kind of mistake is an error
that names the file, the line and the field."""

from __future__ import annotations

import textwrap
from datetime import timedelta
from pathlib import Path

import pytest

from cdclake.config import (DEFAULT_SOURCES_DIR, SourceConfig, TableOptions, load_source, load_sources,
                            read_sources)
from cdclake.exceptions import ConfigError, SourceConfigError

VALID = """\
name: {name}
format: debezium
inbox: inbox/{name}
"""


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / f"{name}.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def test_example_sources_load() -> None:
    sources = load_sources(DEFAULT_SOURCES_DIR)
    assert set(sources) >= {"shop", "crm"}
    shop, crm = sources["shop"], sources["crm"]
    assert shop.format == "debezium" and crm.format == "canal"
    assert shop.kafka is not None and shop.kafka.pattern and crm.kafka is None
    assert shop.dag_id == "cdclake_sources__shop"
    assert shop.applies_to("public.customers") and not shop.applies_to("public.audit_log")
    assert not shop.applies_to("crm.contacts")


def test_table_options_merge_defaults_and_first_matching_override() -> None:
    crm = load_sources(DEFAULT_SOURCES_DIR)["crm"]
    contacts = crm.table_options("crm.contacts")
    assert isinstance(contacts, TableOptions)
    assert contacts.key == ("contact_id",)
    assert contacts.partition_spec == ("bucket(16, key)", "truncate(4, country)")
    assert contacts.delete_mode == "soft" and contacts.dq_policy == "warn"  # from defaults
    assert contacts.apply_options().partition_for(["contact_id"]) == ("bucket(16, `contact_id`)",
                                                                        "truncate(4, country)")
    # Iceberg cannot bucket a double: `key` in a bucket stands for the first key column it can bucket, or none.
    assert contacts.apply_options().partition_for(["score", "contact_id"], {"score": "double", "contact_id": "int"}) \
        == ("bucket(16, `contact_id`)", "truncate(4, country)")
    assert contacts.apply_options().partition_for(["score"], {"score": "double"}) == ("truncate(4, country)",)
    audit = crm.table_options("crm.audit_2024")
    assert audit.dq_policy == "quarantine" and audit.freshness_sla == timedelta(days=1)
    assert audit.partition_spec == ("bucket(8, key)",)
    plain = crm.table_options("crm.accounts")
    assert plain == crm.defaults and plain.key is None
    assert crm.declared_keys() == ["crm.contacts=contact_id"]


def test_defaults_when_only_required_fields(tmp_path: Path) -> None:
    config = load_source(write(tmp_path, "minimal", VALID.format(name="minimal")))
    options = config.table_options("public.anything")
    assert options.partition_spec == ("bucket(16, key)",)
    assert (options.delete_mode, options.write_mode, options.ddl_policy, options.dq_policy) == (
        "hard", "merge-on-read", "evolve", "fail")
    assert options.apply_options().reconcile_snapshots is True
    assert TableOptions(reconcile_snapshots=False).apply_options().reconcile_snapshots is False
    assert config.schedule == "*/15 * * * *" and config.retries == 2
    assert config.inbox_location(tmp_path) == str(tmp_path / "inbox" / "minimal")
    assert config.path == tmp_path / "minimal.yaml"


def test_maintenance_override_merges_field_by_field(tmp_path: Path) -> None:
    config = load_source(write(tmp_path, "m", VALID.format(name="m") + textwrap.dedent("""\
        defaults:
          maintenance: {retain_last: 3}
        overrides:
          public.big: {maintenance: {min_data_files: 2, expire_older_than: 12h}}
        """)))
    big = config.table_options("public.big").maintenance
    assert (big.retain_last, big.min_data_files, big.expire_older_than) == (3, 2, timedelta(hours=12))


def test_secret_from_environment(tmp_path: Path) -> None:
    config = load_source(write(tmp_path, "k", VALID.format(name="k") + textwrap.dedent("""\
        kafka:
          bootstrap: b:9092
          topics: [a.b.c]
          group: g
          security: {security.protocol: SASL_SSL, sasl.password: env:K_PASSWORD}
        """)))
    assert config.kafka is not None
    assert config.kafka.resolved_security({"K_PASSWORD": "s3cret"}) == {
        "security.protocol": "SASL_SSL", "sasl.password": "s3cret"}
    with pytest.raises(SourceConfigError, match="kafka.security.sasl.password: environment variable K_PASSWORD"):
        config.kafka.resolved_security({})


def test_kafka_source_without_inbox_resolves_its_client_settings(tmp_path: Path) -> None:
    config = load_source(write(tmp_path, "topics", """\
        name: topics
        format: debezium
        kafka:
          bootstrap: b:9092
          pattern: "shop\\\\.public\\\\..*"
          group: g
          max_records: 500
          max_lag: 10
          security: {security.protocol: SASL_SSL, sasl.password: env:K_PASSWORD}
        """))
    assert config.inbox is None and config.kafka is not None and config.kafka.max_lag == 10
    source = config.kafka.kafka_source({"K_PASSWORD": "s3cret", "CDCLAKE_KAFKA_SASL_USERNAME": "u"})
    assert (source.bootstrap, source.pattern, source.group_id, source.max_batch_records) == (
        "b:9092", "shop\\.public\\..*", "g", 500)
    assert dict(source.client_config) == {"security.protocol": "SASL_SSL", "sasl.password": "s3cret",
                                          "sasl.username": "u"}
    with pytest.raises(SourceConfigError, match="has no inbox"):
        config.inbox_location(tmp_path)


# (file name, extra YAML or full YAML, expected message fragments: field, line, reason)
ERRORS = [
    ("missing_format", "name: missing_format\ninbox: x\n", ["field format", "Field required", ":1:"]),
    ("missing_inbox", "name: missing_inbox\nformat: canal\n", ["missing_inbox.yaml:1:",
                                                                "inbox: required unless the source names kafka"]),
    ("bad_format", "name: bad_format\nformat: avro\ninbox: x\n", ["bad_format.yaml:2:", "field format",
                                                                  "unknown format 'avro'"]),
    ("BadName", "name: BadName\nformat: canal\ninbox: x\n", ["BadName.yaml:1:", "field name", "lower-case"]),
    ("other_file", VALID.format(name="elsewhere"), ["other_file.yaml:1:", "field name", "must equal the file name"]),
    ("bad_schedule", VALID.format(name="bad_schedule") + "schedule: every monday\n",
     ["bad_schedule.yaml:4:", "field schedule", "neither a cron expression"]),
    ("unknown_field", VALID.format(name="unknown_field") + "shedule: '@daily'\n",
     ["unknown_field.yaml:4:", "field shedule", "Extra inputs are not permitted"]),
    ("bad_delete_mode", VALID.format(name="bad_delete_mode") + "defaults:\n  delete_mode: purge\n",
     ["bad_delete_mode.yaml:5:", "field defaults.delete_mode", "'hard' or 'soft'", "'purge'"]),
    ("bad_write_mode", VALID.format(name="bad_write_mode") + "defaults:\n  write_mode: merge\n",
     ["field defaults.write_mode", "'merge-on-read' or 'copy-on-write'"]),
    ("bad_ddl_policy", VALID.format(name="bad_ddl_policy") + "defaults:\n  ddl_policy: apply\n",
     ["field defaults.ddl_policy", "'evolve', 'ignore' or 'fail'"]),
    ("bad_dq_policy", VALID.format(name="bad_dq_policy") + "defaults:\n  dq_policy: ignore\n",
     ["field defaults.dq_policy", "'fail', 'warn' or 'quarantine'"]),
    ("bad_partition", VALID.format(name="bad_partition") + "defaults:\n  partition_spec: ['bucket(id)']\n",
     ["bad_partition.yaml:5:", "field defaults.partition_spec", "partition field 'bucket(id)'"]),
    ("bad_sla", VALID.format(name="bad_sla") + "defaults:\n  freshness_sla: soon\n",
     ["field defaults.freshness_sla", "expected a duration", "'soon'"]),
    ("bad_key", VALID.format(name="bad_key") + "defaults:\n  key: ['order id']\n",
     ["field defaults.key", "'order id' is not a column name"]),
    ("key_twice", VALID.format(name="key_twice") + "overrides:\n  public.t: {key: [id, id]}\n",
     ["key_twice.yaml:5:", "field overrides", "key names a column twice"]),
    ("end_before_start", VALID.format(name="end_before_start") + "start_date: 2026-02-01\nend_date: 2026-01-31\n",
     ["end_before_start.yaml:", "end_date: 2026-01-31T00:00:00+00:00 is before start_date 2026-02-01"]),
    ("bad_retries", VALID.format(name="bad_retries") + "retries: -1\n", ["field retries", "greater than or equal"]),
    ("bad_include", VALID.format(name="bad_include") + "tables:\n  include: public.*\n",
     ["bad_include.yaml:5:", "field tables.include", "valid tuple"]),
    ("override_unknown", VALID.format(name="override_unknown") + "overrides:\n  public.t: {mode: soft}\n",
     ["field overrides", "public.t: unknown option(s) mode"]),
    ("override_bad_value", VALID.format(name="override_bad_value") + "overrides:\n  public.t: {delete_mode: x}\n",
     ["override_bad_value.yaml:5:", "field overrides",
      "public.t: delete_mode: Input should be 'hard' or 'soft' (got 'x')"]),
    ("kafka_both", VALID.format(name="kafka_both")
     + "kafka: {bootstrap: b, topics: [t], pattern: 't.*', group: g}\n",
     ["kafka_both.yaml:4:", "field kafka", "exactly one of topics"]),
    ("kafka_no_group", VALID.format(name="kafka_no_group") + "kafka: {bootstrap: b, topics: [t]}\n",
     ["field kafka.group", "Field required"]),
    ("kafka_bad_pattern", VALID.format(name="kafka_bad_pattern") + "kafka: {bootstrap: b, pattern: '(', group: g}\n",
     ["field kafka", "not a regular expression"]),
    ("kafka_literal_secret", VALID.format(name="kafka_literal_secret")
     + "kafka:\n  bootstrap: b\n  topics: [t]\n  group: g\n  security: {sasl.password: hunter2}\n",
     ["kafka_literal_secret.yaml:8:", "field kafka.security", "sasl.password: secrets come from the environment"]),
    ("kafka_max_records", VALID.format(name="kafka_max_records")
     + "kafka: {bootstrap: b, topics: [t], group: g, max_records: 0}\n",
     ["field kafka.max_records", "greater than 0"]),
    ("kafka_max_lag", VALID.format(name="kafka_max_lag")
     + "kafka: {bootstrap: b, topics: [t], group: g, max_lag: -1}\n",
     ["kafka_max_lag.yaml:4:", "field kafka.max_lag", "greater than or equal to 0"]),
    ("kafka_offset_reset", VALID.format(name="kafka_offset_reset")
     + "kafka: {bootstrap: b, topics: [t], group: g, offset_reset: latest}\n",
     ["field kafka.offset_reset", "'fail' or 'earliest'"]),
    ("bad_document_field", VALID.format(name="bad_document_field")
     + "overrides:\n  m.things: {document_fields: {qty: map}}\n",
     ["bad_document_field.yaml:5:", "field overrides", "document field 'qty': type 'map' is not one of"]),
    ("bad_maintenance", VALID.format(name="bad_maintenance") + "defaults:\n  maintenance: {retain_last: 0}\n",
     ["field defaults.maintenance.retain_last", "greater than or equal to 1"]),
    ("bad_start_date", VALID.format(name="bad_start_date") + "start_date: 2025-13-01\n",
     ["bad_start_date.yaml:4:", "field start_date", "month value is outside expected range", "'2025-13-01'"]),
    ("bad_start_day", VALID.format(name="bad_start_day") + "start_date: 2025-02-30\n",
     ["bad_start_day.yaml:4:", "field start_date", "day value is outside expected range"]),
    ("twice", VALID.format(name="twice") + "schedule: '@daily'\nschedule: '@hourly'\n",
     ["twice.yaml:5:", "field schedule appears twice (also on line 4)"]),
    ("not_yaml", "name: [unclosed\n", ["not_yaml.yaml:2:", "not valid YAML"]),
    ("not_mapping", "- a\n- b\n", ["not_mapping.yaml:1:", "must be a mapping", "list"]),
]


@pytest.mark.parametrize(("name", "text", "fragments"), ERRORS, ids=[e[0] for e in ERRORS])
def test_config_error_names_file_line_and_field(tmp_path: Path, name: str, text: str, fragments: list[str]) -> None:
    path = write(tmp_path, name, text)
    with pytest.raises(SourceConfigError) as caught:
        load_source(path)
    message = str(caught.value)
    assert str(path) in message
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    assert isinstance(caught.value, ConfigError)


def test_unreadable_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(SourceConfigError, match="missing.yaml: cannot read source config"):
        load_source(tmp_path / "missing.yaml")


def test_load_sources_reports_every_bad_file(tmp_path: Path) -> None:
    write(tmp_path, "good", VALID.format(name="good"))
    write(tmp_path, "bad1", "name: bad1\nformat: nope\ninbox: x\n")
    write(tmp_path, "bad2", "name: bad2\nformat: canal\n")
    with pytest.raises(SourceConfigError) as caught:
        load_sources(tmp_path)
    assert "bad1.yaml:2: field format" in str(caught.value) and "bad2.yaml" in str(caught.value)


def test_read_sources_returns_the_valid_sources_and_each_bad_files_error(tmp_path: Path) -> None:
    write(tmp_path, "good", VALID.format(name="good"))
    bad = write(tmp_path, "bad", VALID.format(name="bad") + "defaults:\n  delete_mode: purge\n")
    configs, errors = read_sources(tmp_path)
    assert list(configs) == ["good"] and configs["good"].dag_id == "cdclake_sources__good"
    assert list(errors) == [bad]
    assert "bad.yaml:5: field defaults.delete_mode" in errors[bad] and "'purge'" in errors[bad]
    assert read_sources(tmp_path / "missing") == ({}, {})


def test_models_are_frozen() -> None:
    config = SourceConfig(name="x", format="canal", inbox="i")
    with pytest.raises(Exception):
        config.name = "y"  # type: ignore[misc]
