"""The demo change-stream generator and its oracle, checked without Spark.

The decoding helpers here are written from the Debezium / Kafka Connect documentation, not taken from the
generator, so a round trip through them checks the encoding rather than restating it.
"""

from __future__ import annotations

import base64
import json
from datetime import date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from cdclake.demo import DemoStream, LogicalChange, expected_tables, generate, write_batches
from cdclake.demo.generator import encode_decimal

TOPICS = {"demo.public.customers": "customers", "demo.public.orders": "orders"}
KEYS = {"customers": ("id",), "orders": ("order_id",)}
OP_OF = {"r": "snapshot", "c": "insert", "u": "update", "d": "delete"}


@pytest.fixture(scope="module", params=[7, 1, 2024])
def stream(request: pytest.FixtureRequest) -> DemoStream:
    """The default stream (seed 7) and two more seeds, so no property holds by luck of one seed."""
    return generate(request.param)


@pytest.fixture(scope="module")
def messages(stream: DemoStream) -> list[dict[str, Any]]:
    """Every kcat line of the stream, parsed, with ``key``/``payload`` parsed too and the batch number added."""
    out = []
    for number, batch in enumerate(stream.batches, start=1):
        for line in batch:
            message = json.loads(line)
            message["batch"] = number
            message["key_json"] = json.loads(message["key"]) if message["key"] is not None else None
            message["value_json"] = json.loads(message["payload"]) if message["payload"] is not None else None
            out.append(message)
    return out


def _events(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages that carry a change event (not tombstones)."""
    return [m for m in messages if m["value_json"] is not None]


def _decode_decimal(text: str, scale: int) -> Decimal:
    unscaled = int.from_bytes(base64.b64decode(text), "big", signed=True)
    return Decimal(unscaled).scaleb(-scale)


def _decode_row(value_schema: dict[str, Any], row: dict[str, Any]) -> dict[str, Any]:
    """Decode an after/before struct using the logical types its schema declares."""
    fields = {f["field"]: f for f in value_schema["fields"]}
    after_schema = {f["field"]: f for f in fields["after"]["fields"]}
    decoded: dict[str, Any] = {}
    for name, raw in row.items():
        schema = after_schema[name]
        logical = schema.get("name")
        if raw is None:
            decoded[name] = None
        elif logical == "io.debezium.time.MicroTimestamp":
            decoded[name] = datetime(1970, 1, 1) + timedelta(microseconds=raw)
        elif logical == "io.debezium.time.Date":
            decoded[name] = date(1970, 1, 1) + timedelta(days=raw)
        elif logical == "org.apache.kafka.connect.data.Decimal":
            decoded[name] = _decode_decimal(raw, int(schema["parameters"]["scale"]))
        else:
            decoded[name] = raw
    return decoded


def test_same_seed_gives_identical_stream() -> None:
    first, second = generate(11), generate(11)
    assert first.batches == second.batches
    assert first.changes == second.changes
    assert generate(12).batches != first.batches


def test_batches_and_kcat_framing(stream: DemoStream, messages: list[dict[str, Any]]) -> None:
    assert len(stream.batches) == 4
    assert all(stream.batches), "no empty micro-batch"
    expected_offset = dict.fromkeys(TOPICS, 0)
    for m in messages:
        assert list(m)[:9] == ["topic", "partition", "offset", "tstype", "ts", "broker", "headers", "key", "payload"]
        assert m["topic"] in TOPICS
        assert m["partition"] == 0
        assert m["tstype"] == "create"
        assert m["broker"] == 1
        assert isinstance(m["ts"], int) and m["ts"] > 1_600_000_000_000
        assert m["offset"] == expected_offset[m["topic"]]
        expected_offset[m["topic"]] += 1
        assert m["headers"] is None or (isinstance(m["headers"], list) and len(m["headers"]) % 2 == 0)
        assert isinstance(m["key"], str)
        assert m["payload"] is None or isinstance(m["payload"], str)


def test_keys_and_envelopes_follow_debezium(messages: list[dict[str, Any]]) -> None:
    for m in messages:
        table = TOPICS[m["topic"]]
        key = m["key_json"]
        assert key["schema"]["name"] == f"demo.public.{table}.Key"
        assert key["schema"]["optional"] is False
        assert [f["field"] for f in key["schema"]["fields"]] == list(KEYS[table])
        assert list(key["payload"]) == list(KEYS[table])
        value = m["value_json"]
        if value is None:
            continue
        schema, payload = value["schema"], value["payload"]
        assert schema["name"] == f"demo.public.{table}.Envelope"
        assert [f["field"] for f in schema["fields"]] == ["before", "after", "source", "op", "ts_ms", "transaction"]
        assert list(payload) == ["before", "after", "source", "op", "ts_ms", "transaction"]
        source = payload["source"]
        assert source["version"] == "2.3.7.Final"
        assert source["connector"] == "postgresql"
        assert (source["name"], source["db"], source["schema"], source["table"]) == ("demo", "shop", "public", table)
        assert source["xmin"] is None
        assert isinstance(source["txId"], int) and isinstance(source["lsn"], int)
        assert payload["ts_ms"] >= source["ts_ms"]
        assert m["ts"] >= payload["ts_ms"]
        assert (payload["before"] is None) == (payload["op"] in ("r", "c"))
        if payload["op"] in ("u", "d"):
            assert payload["before"] == key["payload"], "REPLICA IDENTITY DEFAULT: before holds the key only"
        assert (payload["after"] is None) == (payload["op"] == "d")


def test_row_schemas_carry_logical_types(messages: list[dict[str, Any]]) -> None:
    by_table = {}
    for m in _events(messages):
        by_table.setdefault(TOPICS[m["topic"]], m["value_json"]["schema"])
    customers = {f["field"]: f for f in by_table["customers"]["fields"][1]["fields"]}
    assert customers["id"] == {"type": "int32", "optional": False, "field": "id"}
    assert customers["created_at"] == {
        "type": "int64",
        "optional": False,
        "name": "io.debezium.time.MicroTimestamp",
        "version": 1,
        "field": "created_at",
    }
    assert customers["birth_date"]["name"] == "io.debezium.time.Date"
    assert customers["birth_date"]["optional"] is True
    orders = {f["field"]: f for f in by_table["orders"]["fields"][0]["fields"]}
    assert orders["order_id"]["type"] == "int64"
    assert orders["amount"] == {
        "type": "bytes",
        "optional": False,
        "name": "org.apache.kafka.connect.data.Decimal",
        "version": 1,
        "parameters": {"scale": "2", "connect.decimal.precision": "10"},
        "field": "amount",
    }
    assert orders["note"]["optional"] is True


def test_every_delete_is_followed_by_a_tombstone(messages: list[dict[str, Any]]) -> None:
    tombstones = [i for i, m in enumerate(messages) if m["payload"] is None]
    deletes = [i for i, m in enumerate(_events(messages)) if m["value_json"]["payload"]["op"] == "d"]
    assert tombstones and len(tombstones) == len(deletes)
    for i in tombstones:
        delete = messages[i - 1]
        assert delete["value_json"]["payload"]["op"] == "d"
        assert (messages[i]["topic"], messages[i]["key"]) == (delete["topic"], delete["key"])


def test_primary_key_change_is_delete_tombstone_create_with_headers(messages: list[dict[str, Any]]) -> None:
    with_new_key = [
        i for i, m in enumerate(messages) if m["headers"] and m["headers"][0] == "__debezium.newkey" and m["payload"]
    ]
    assert with_new_key, "the stream has a primary-key change"
    for i in with_new_key:
        delete, tombstone, create = messages[i : i + 3]
        assert delete["topic"] == "demo.public.customers"
        assert delete["value_json"]["payload"]["op"] == "d"
        assert tombstone["payload"] is None and tombstone["key"] == delete["key"]
        assert create["value_json"]["payload"]["op"] == "c"
        assert create["headers"] == ["__debezium.oldkey", delete["key"]]
        assert delete["headers"] == ["__debezium.newkey", create["key"]]
        assert json.loads(create["key"])["payload"] != json.loads(delete["key"])["payload"]
        # One WAL record: both halves share the LSN and transaction.
        d_source, c_source = delete["value_json"]["payload"]["source"], create["value_json"]["payload"]["source"]
        assert (d_source["lsn"], d_source["txId"]) == (c_source["lsn"], c_source["txId"])


def test_snapshot_records(stream: DemoStream, messages: list[dict[str, Any]]) -> None:
    snapshot = [m for m in messages if m["batch"] == 1]
    assert snapshot == [m for m in messages if m["value_json"] and m["value_json"]["payload"]["op"] == "r"]
    assert len(snapshot) == 40 + 60
    payloads = [m["value_json"]["payload"] for m in snapshot]
    markers = [p["source"]["snapshot"] for p in payloads]
    assert markers == ["first"] + ["true"] * (len(markers) - 2) + ["last"]
    assert {p["source"]["lsn"] for p in payloads} == {24023128}
    assert {p["source"]["sequence"] for p in payloads} == {'[null,"24023128"]'}
    assert all(p["before"] is None for p in payloads)
    streamed = [m["value_json"]["payload"]["source"] for m in _events(messages[len(snapshot) :])]
    assert {source["snapshot"] for source in streamed} == {"false"}


def test_streamed_lsns_strictly_increase(messages: list[dict[str, Any]]) -> None:
    streamed = [m["value_json"]["payload"] for m in _events(messages) if m["value_json"]["payload"]["op"] != "r"]
    assert len(streamed) >= 300
    previous_lsn, previous_op = 24023128, None
    for payload in streamed:
        lsn = payload["source"]["lsn"]
        assert 24023128 < lsn < 2**63
        last_commit, current = json.loads(payload["source"]["sequence"])
        assert current == str(lsn)
        assert 24023128 <= int(last_commit) < lsn
        if lsn == previous_lsn:
            # Only the create half of a primary-key change shares its delete's LSN.
            assert (previous_op, payload["op"]) == ("d", "c")
        else:
            assert lsn > previous_lsn
        previous_lsn, previous_op = lsn, payload["op"]
    assert sum(1 for a, b in zip(streamed, streamed[1:]) if a["source"]["lsn"] == b["source"]["lsn"]) == 1


def test_events_decode_to_the_logical_changes(stream: DemoStream, messages: list[dict[str, Any]]) -> None:
    events = _events(messages)
    assert len(events) == len(stream.changes)
    for m, change in zip(events, stream.changes):
        payload = m["value_json"]["payload"]
        assert TOPICS[m["topic"]] == change.table
        assert OP_OF[payload["op"]] == change.op
        assert m["key_json"]["payload"] == change.key
        if change.row is None:
            assert payload["after"] is None
        else:
            assert _decode_row(m["value_json"]["schema"], payload["after"]) == change.row


def test_decimal_encoding_round_trips_including_negative(stream: DemoStream, messages: list[dict[str, Any]]) -> None:
    amounts = [
        (m["value_json"]["payload"]["after"]["amount"], change.row["amount"])
        for m, change in zip(_events(messages), stream.changes)
        if change.table == "orders" and change.row is not None
    ]
    assert any(logical < 0 for _, logical in amounts), "a refund has a negative amount"
    for text, logical in amounts:
        assert _decode_decimal(text, 2) == logical
    # Minimal two's complement, as Java's BigInteger.toByteArray: 127 -> 7f, 128 -> 0080, -128 -> 80, -129 -> ff7f.
    for value, raw in [("1.27", b"\x7f"), ("1.28", b"\x00\x80"), ("-1.28", b"\x80"), ("-1.29", b"\xff\x7f")]:
        assert base64.b64decode(encode_decimal(Decimal(value), 2)) == raw
    assert encode_decimal(Decimal("0.00"), 2) == "AA=="


def test_stream_contains_the_required_scenarios(stream: DemoStream, messages: list[dict[str, Any]]) -> None:
    streamed = [c for c in stream.changes if c.op != "snapshot"]
    nulled = [
        c
        for c in streamed
        if c.op == "update" and ((c.table == "orders" and c.row["note"] is None) or c.table == "customers")
    ]
    assert any(c.table == "orders" and c.row["note"] is None for c in nulled)
    assert any(c.table == "customers" and c.row["birth_date"] is None for c in nulled)
    assert any(c.old_key is not None for c in streamed)

    deleted_then_reinserted = False
    for i, change in enumerate(streamed):
        if change.op == "delete":
            later = [c for c in streamed[i + 1 :] if c.table == change.table and c.key == change.key]
            if later and later[0].op == "insert" and later[0].old_key is None:
                deleted_then_reinserted = True
    assert deleted_then_reinserted

    batches_per_key: dict[tuple[str, str], set[int]] = {}
    for m in messages:
        if m["batch"] > 1:
            batches_per_key.setdefault((m["topic"], m["key"]), set()).add(m["batch"])
    assert max(len(b) for b in batches_per_key.values()) == 3


def test_naive_replay_of_the_messages_matches_the_oracle(stream: DemoStream, messages: list[dict[str, Any]]) -> None:
    """Apply the Debezium events by key, render the result by hand, and compare with the oracle's tables."""
    tables: dict[str, dict[str, dict[str, Any]]] = {"customers": {}, "orders": {}}
    for m in _events(messages):
        payload = m["value_json"]["payload"]
        table = TOPICS[m["topic"]]
        if payload["op"] == "d":
            tables[table].pop(m["key"], None)
        else:
            tables[table][m["key"]] = _decode_row(m["value_json"]["schema"], payload["after"])

    def render(row: dict[str, Any]) -> dict[str, Any]:
        out = {}
        for name, value in row.items():
            if isinstance(value, datetime):
                value = value.strftime("%Y-%m-%dT%H:%M:%S.%f")
            elif isinstance(value, date):
                value = value.strftime("%Y-%m-%d")
            elif isinstance(value, Decimal):
                value = f"{value:.2f}"
            out[name] = value
        return out

    replayed = {
        f"public.{table}": sorted((render(r) for r in rows.values()), key=lambda r: r[KEYS[table][0]])
        for table, rows in tables.items()
    }
    assert replayed == expected_tables(stream.changes)


def _customer(id_: int, first: str, created_at: datetime, birth_date: date | None, vip: bool = False) -> dict:
    return {
        "id": id_,
        "first_name": first,
        "last_name": "Thomas",
        "email": f"{first.lower()}@x.org",
        "vip": vip,
        "created_at": created_at,
        "birth_date": birth_date,
    }


def _order(order_id: int, customer_id: int, amount: str, status: str, note: str | None) -> dict:
    return {"order_id": order_id, "customer_id": customer_id, "amount": Decimal(amount), "status": status, "note": note}


def test_oracle_on_a_hand_written_history() -> None:
    sally = _customer(2, "Sally", datetime(2024, 1, 2, 3, 4, 5), date(1990, 5, 17))
    anne = _customer(1, "Anne", datetime(2023, 12, 31, 23, 59, 59, 120), None, vip=True)
    changes = [
        LogicalChange("customers", "snapshot", {"id": 2}, sally),
        LogicalChange("customers", "snapshot", {"id": 1}, anne),
        LogicalChange("orders", "snapshot", {"order_id": 10}, _order(10, 1, "12.5", "pending", "fragile")),
        LogicalChange("orders", "insert", {"order_id": 11}, _order(11, 2, "-3.00", "refunded", None)),
        LogicalChange("orders", "update", {"order_id": 10}, _order(10, 1, "12.50", "paid", None)),
        # Sally's id changes 2 -> 7 (delete + insert), her refund is deleted and re-inserted, a stray delete.
        LogicalChange("customers", "delete", {"id": 2}, None),
        LogicalChange("customers", "insert", {"id": 7}, {**sally, "id": 7}, old_key={"id": 2}),
        LogicalChange("orders", "delete", {"order_id": 11}, None),
        LogicalChange("orders", "insert", {"order_id": 11}, _order(11, 7, "0.01", "pending", "again")),
        LogicalChange("customers", "delete", {"id": 99}, None),
    ]
    expected = {
        "public.customers": [
            {
                "id": 1,
                "first_name": "Anne",
                "last_name": "Thomas",
                "email": "anne@x.org",
                "vip": True,
                "created_at": "2023-12-31T23:59:59.000120",
                "birth_date": None,
            },
            {
                "id": 7,
                "first_name": "Sally",
                "last_name": "Thomas",
                "email": "sally@x.org",
                "vip": False,
                "created_at": "2024-01-02T03:04:05.000000",
                "birth_date": "1990-05-17",
            },
        ],
        "public.orders": [
            {"order_id": 10, "customer_id": 1, "amount": "12.50", "status": "paid", "note": None},
            {"order_id": 11, "customer_id": 7, "amount": "0.01", "status": "pending", "note": "again"},
        ],
    }
    result = expected_tables(changes)
    assert result == expected
    assert list(result["public.customers"][0]) == list(expected["public.customers"][0])
    assert list(result["public.orders"][0]) == ["order_id", "customer_id", "amount", "status", "note"]
    assert expected_tables([]) == {"public.customers": [], "public.orders": []}


def test_oracle_rejects_a_row_that_disagrees_with_its_key() -> None:
    bad = LogicalChange("orders", "insert", {"order_id": 1}, _order(2, 1, "1.00", "paid", None))
    with pytest.raises(ValueError, match="does not have key"):
        expected_tables([bad])


def test_write_batches(stream: DemoStream, tmp_path: Path) -> None:
    paths = write_batches(stream, tmp_path / "inbox")
    assert [p.name for p in paths] == [f"batch-{n:04d}.jsonl" for n in range(1, 5)]
    for path, batch in zip(paths, stream.batches):
        assert path.read_text(encoding="utf-8").split("\n") == [*batch, ""]


def test_generate_rejects_too_small_arguments() -> None:
    with pytest.raises(ValueError, match="batches=1"):
        generate(batches=1)


def test_kafka_mode_source_config_is_a_valid_kafka_source(tmp_path: Path) -> None:
    from cdclake.config import load_source
    from cdclake.demo.run import KAFKA_DAG_ID, kafka_source_yaml

    path = tmp_path / "demo.yaml"
    path.write_text(kafka_source_yaml("127.0.0.1:9", ["demo.public.customers", "demo.public.orders"], 113))
    config = load_source(path)
    assert config.dag_id == KAFKA_DAG_ID and config.inbox is None and config.schedule is None
    assert config.kafka is not None
    assert (config.kafka.bootstrap, config.kafka.topics, config.kafka.max_records) == (
        "127.0.0.1:9", ("demo.public.customers", "demo.public.orders"), 113)
