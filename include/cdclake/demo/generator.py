"""A deterministic simulated PostgreSQL database and the Debezium change stream it produces.

The simulation owns two tables of database ``shop``, schema ``public``::

    customers(id int4 PRIMARY KEY, first_name text, last_name text, email text, vip bool,
              created_at timestamp, birth_date date NULL)
    orders(order_id int8 PRIMARY KEY, customer_id int4 REFERENCES customers ON UPDATE CASCADE ON DELETE CASCADE,
           amount numeric(10,2), status text, note text NULL)

It first takes an initial snapshot, then runs a seeded mix of transactions, and records every row change twice:
as a :class:`LogicalChange` (what happened, in plain Python values) and as the messages the Debezium 2.3
PostgreSQL connector (``topic.prefix=demo``, JSON converter with ``schemas.enable=true``, tables with
``REPLICA IDENTITY DEFAULT``) would have written to Kafka, framed the way ``kcat -C -J`` prints them.

Fidelity notes, where the stream follows the connector rather than the simplified documentation:

- Snapshot records carry ``source.sequence = [null, "<snapshot lsn>"]``; streamed records carry
  ``["<lsn of the last commit>", "<lsn of the change>"]``. Every event of one transaction shares ``txId`` and the
  commit time in ``source.ts_ms``.
- A primary-key change is one WAL record, so its ``d`` and ``c`` events share one LSN. The tombstone after the
  ``d`` carries the same ``__debezium.newkey`` header as the ``d`` (Debezium copies the delete's headers onto it).
  Header values are the key serialised by the JSON converter (``schema`` + ``payload``), i.e. identical to the
  ``key`` string of the record they point at.
- Cascaded changes (``ON UPDATE/DELETE CASCADE`` on ``orders.customer_id``) follow the customer change in the
  same transaction, as PostgreSQL's after-row triggers produce them.
- ``before`` of ``u`` and ``d`` events holds only the key columns (REPLICA IDENTITY DEFAULT as documented).
  ``kcat`` omits ``headers`` when a message has none; this framing writes ``"headers": null`` instead, which
  readers must accept as well.
"""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

TOPIC_PREFIX = "demo"
"""The connector's ``topic.prefix`` (also ``source.name``)."""

DATABASE = "shop"
SCHEMA = "public"
CONNECTOR_VERSION = "2.3.7.Final"

SNAPSHOT_LSN = 24023128
"""The LSN the initial snapshot is consistent with; every streamed change has a larger one."""

NEW_KEY_HEADER = "__debezium.newkey"
OLD_KEY_HEADER = "__debezium.oldkey"

MICRO_TIMESTAMP = "io.debezium.time.MicroTimestamp"
DATE = "io.debezium.time.Date"
DECIMAL = "org.apache.kafka.connect.data.Decimal"

_EPOCH = datetime(1970, 1, 1)
_EPOCH_DATE = date(1970, 1, 1)
_START = datetime(2024, 3, 4, 8, 15, 0)
_FIRST_STREAM_TXID = 771
_SNAPSHOT_TXID = 767


@dataclass(frozen=True)
class Column:
    """One source column and its Kafka Connect schema.

    Attributes:
        name: Column name.
        type: Kafka Connect schema type (``int32``, ``int64``, ``string``, ``boolean``, ``bytes``).
        optional: True for a nullable column.
        logical: Kafka Connect / Debezium logical type name, if any.
        parameters: Logical type parameters (Decimal scale and precision), as ``(name, value)`` pairs.
    """

    name: str
    type: str
    optional: bool = False
    logical: str | None = None
    parameters: tuple[tuple[str, str], ...] = ()

    def schema(self) -> dict[str, Any]:
        """The field's schema as the JSON converter writes it inside a struct's ``fields``."""
        out: dict[str, Any] = {"type": self.type, "optional": self.optional}
        if self.logical is not None:
            out["name"] = self.logical
            out["version"] = 1
        if self.parameters:
            out["parameters"] = dict(self.parameters)
        out["field"] = self.name
        return out

    def encode(self, value: Any) -> Any:
        """A Python value as the JSON converter writes it for this column."""
        if value is None:
            return None
        if self.logical == MICRO_TIMESTAMP:
            return (value - _EPOCH) // timedelta(microseconds=1)
        if self.logical == DATE:
            return (value - _EPOCH_DATE).days
        if self.logical == DECIMAL:
            return encode_decimal(value, int(dict(self.parameters)["scale"]))
        return value


@dataclass(frozen=True)
class Table:
    """One source table.

    Attributes:
        name: Table name in schema ``public``.
        key: Primary-key column names, in key order.
        columns: All columns, in table order.
    """

    name: str
    key: tuple[str, ...]
    columns: tuple[Column, ...]

    @property
    def topic(self) -> str:
        """The Kafka topic Debezium writes this table's changes to."""
        return f"{TOPIC_PREFIX}.{SCHEMA}.{self.name}"

    def column(self, name: str) -> Column:
        """The column called ``name``."""
        return next(c for c in self.columns if c.name == name)

    def key_schema(self) -> dict[str, Any]:
        """The record key's schema."""
        return {
            "type": "struct",
            "fields": [self.column(k).schema() for k in self.key],
            "optional": False,
            "name": f"{self.topic}.Key",
        }

    def value_schema(self) -> dict[str, Any]:
        """The record value's schema: the Debezium envelope around before/after/source."""
        row = [c.schema() for c in self.columns]
        row_struct = {"type": "struct", "fields": row, "optional": True, "name": f"{self.topic}.Value"}
        return {
            "type": "struct",
            "fields": [
                {**row_struct, "field": "before"},
                {**row_struct, "field": "after"},
                _SOURCE_SCHEMA,
                {"type": "string", "optional": False, "field": "op"},
                {"type": "int64", "optional": True, "field": "ts_ms"},
                _TRANSACTION_SCHEMA,
            ],
            "optional": False,
            "name": f"{self.topic}.Envelope",
            "version": 1,
        }

    def encode_key(self, key: dict[str, Any]) -> dict[str, Any]:
        """Key values as the JSON converter writes them."""
        return {k: self.column(k).encode(key[k]) for k in self.key}

    def encode_row(self, row: dict[str, Any]) -> dict[str, Any]:
        """A full row as the JSON converter writes it."""
        return {c.name: c.encode(row[c.name]) for c in self.columns}


_SOURCE_SCHEMA: dict[str, Any] = {
    "type": "struct",
    "fields": [
        {"type": "string", "optional": False, "field": "version"},
        {"type": "string", "optional": False, "field": "connector"},
        {"type": "string", "optional": False, "field": "name"},
        {"type": "int64", "optional": False, "field": "ts_ms"},
        {
            "type": "string",
            "optional": True,
            "name": "io.debezium.data.Enum",
            "version": 1,
            "parameters": {"allowed": "true,first,last,false,incremental"},
            "default": "false",
            "field": "snapshot",
        },
        {"type": "string", "optional": False, "field": "db"},
        {"type": "string", "optional": True, "field": "sequence"},
        {"type": "string", "optional": False, "field": "schema"},
        {"type": "string", "optional": False, "field": "table"},
        {"type": "int64", "optional": True, "field": "txId"},
        {"type": "int64", "optional": True, "field": "lsn"},
        {"type": "int64", "optional": True, "field": "xmin"},
    ],
    "optional": False,
    "name": "io.debezium.connector.postgresql.Source",
    "field": "source",
}

_TRANSACTION_SCHEMA: dict[str, Any] = {
    "type": "struct",
    "fields": [
        {"type": "string", "optional": False, "field": "id"},
        {"type": "int64", "optional": False, "field": "total_order"},
        {"type": "int64", "optional": False, "field": "data_collection_order"},
    ],
    "optional": True,
    "name": "event.block",
    "version": 1,
    "field": "transaction",
}

CUSTOMERS = Table(
    name="customers",
    key=("id",),
    columns=(
        Column("id", "int32"),
        Column("first_name", "string"),
        Column("last_name", "string"),
        Column("email", "string"),
        Column("vip", "boolean"),
        Column("created_at", "int64", logical=MICRO_TIMESTAMP),
        Column("birth_date", "int32", optional=True, logical=DATE),
    ),
)

ORDERS = Table(
    name="orders",
    key=("order_id",),
    columns=(
        Column("order_id", "int64"),
        Column("customer_id", "int32"),
        Column("amount", "bytes", logical=DECIMAL, parameters=(("scale", "2"), ("connect.decimal.precision", "10"))),
        Column("status", "string"),
        Column("note", "string", optional=True),
    ),
)

TABLES: dict[str, Table] = {t.name: t for t in (CUSTOMERS, ORDERS)}
"""The simulated tables by name, in snapshot order."""


@dataclass(frozen=True)
class LogicalChange:
    """One row change in the simulated database, independent of how Debezium encodes it.

    Attributes:
        table: ``customers`` or ``orders``.
        op: ``snapshot``, ``insert``, ``update`` or ``delete``.
        key: Primary-key values.
        row: The full row after the change (int, str, bool, None, naive UTC datetime, date, Decimal), or None for
            a delete.
        old_key: For the insert half of a primary-key change, the key the row had before.
    """

    table: str
    op: str
    key: dict[str, Any]
    row: dict[str, Any] | None
    old_key: dict[str, Any] | None = None


@dataclass(frozen=True)
class DemoStream:
    """A generated change stream.

    Attributes:
        changes: Every row change in source commit order (snapshot first).
        batches: Micro-batches of ``kcat -C -J`` lines, all topics interleaved in commit order. The first batch is
            the whole snapshot; the streamed changes are split evenly (by message count) over the rest.
    """

    changes: list[LogicalChange]
    batches: list[list[str]]


def encode_decimal(value: Decimal, scale: int) -> str:
    """Encode a decimal as Kafka Connect's Decimal logical type does in JSON.

    The unscaled integer is written as big-endian two's complement in the fewest bytes that hold its sign (Java's
    ``BigInteger.toByteArray``), then base64-encoded.

    Args:
        value: The decimal; it must have at most ``scale`` fractional digits.
        scale: The column's scale.

    Returns:
        The base64 text.

    Raises:
        ValueError: If ``value`` has more fractional digits than ``scale``.
    """
    scaled = value.scaleb(scale)
    if scaled != scaled.to_integral_value():
        raise ValueError(f"decimal {value} has more than {scale} fractional digits")
    unscaled = int(scaled)
    # Java's bitLength() of a negative number is that of its one's complement.
    magnitude_bits = (unscaled if unscaled >= 0 else -unscaled - 1).bit_length()
    raw = unscaled.to_bytes(magnitude_bits // 8 + 1, "big", signed=True)
    return base64.b64encode(raw).decode("ascii")


def _dumps(value: Any) -> str:
    """Compact JSON, as Kafka's JsonConverter and kcat write it (UTF-8 text, not ASCII escapes)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


_FIRST_NAMES = (
    "Anne", "Sally", "George", "Edward", "Maria", "José", "Chen", "Aisha", "Søren", "Zoë", "Ravi", "Olga",
    "Liam", "Emma", "Noah", "Yuki", "Fatima", "Lukas", "Ingrid", "Mateo", "Priya", "Kofi", "Hannah", "Omar",
)
_LAST_NAMES = (
    "Kretchmar", "Thomas", "Bailey", "Walker", "García", "Wang", "Khan", "Jørgensen", "Müller", "Novak",
    "O'Brien", "Patel", "Smith", "Tanaka", "Rossi", "Dubois", "Mensah", "Kowalski", "Silva", "Nguyen",
)
_NOTES = (
    "leave at front door",
    "gift wrap, please",
    'deliver to "Building B"',
    "call on arrival\nring twice",
    "fragile",
    "customer requested invoice",
    "express shipping",
)
_NEXT_STATUS = {"pending": "paid", "paid": "shipped", "shipped": "delivered"}


@dataclass
class _Transaction:
    txid: int
    commit_ms: int
    processed_ms: int
    last_commit_lsn: int


@dataclass
class _Simulation:
    """The database, the connector's position and the Kafka topics, advanced one transaction at a time."""

    rng: random.Random
    clock_ms: int = (_START - _EPOCH) // timedelta(milliseconds=1)
    lsn: int = SNAPSHOT_LSN
    last_commit_lsn: int = SNAPSHOT_LSN
    txid: int = _FIRST_STREAM_TXID
    rows: dict[str, dict[tuple[Any, ...], dict[str, Any]]] = field(
        default_factory=lambda: {name: {} for name in TABLES}
    )
    changes: list[LogicalChange] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    offsets: dict[str, int] = field(default_factory=lambda: {name: 0 for name in TABLES})
    next_customer_id: int = 1
    next_order_id: int = 10001
    last_ts: int = 0
    tx: _Transaction | None = None

    # ---- Kafka side -------------------------------------------------------------------------------------------

    def emit(
        self, table: Table, key: dict[str, Any], value: dict[str, Any] | None, headers: list[str] | None, ts: int
    ) -> str:
        """Append one kcat line for a message (``value`` None = tombstone); returns the key JSON."""
        key_json = _dumps({"schema": table.key_schema(), "payload": table.encode_key(key)})
        # Connect's producer stamps messages as it sends them, so CreateTime never goes back.
        ts = self.last_ts = max(ts, self.last_ts)
        line = {
            "topic": table.topic,
            "partition": 0,
            "offset": self.offsets[table.name],
            "tstype": "create",
            "ts": ts,
            "broker": 1,
            "headers": headers,
            "key": key_json,
            "payload": None if value is None else _dumps(value),
        }
        self.offsets[table.name] += 1
        self.messages.append(_dumps(line))
        return key_json

    def envelope(
        self,
        table: Table,
        op: str,
        before: dict[str, Any] | None,
        after: dict[str, Any] | None,
        source: dict[str, Any],
        ts_ms: int,
    ) -> dict[str, Any]:
        """The JSON converter's value: envelope schema plus payload (no transaction metadata configured)."""
        return {
            "schema": table.value_schema(),
            "payload": {
                "before": before,
                "after": after,
                "source": source,
                "op": op,
                "ts_ms": ts_ms,
                "transaction": None,
            },
        }

    def source_block(
        self, table: Table, *, ts_ms: int, snapshot: str, sequence: list[str | None], txid: int
    ) -> dict[str, Any]:
        """The ``source`` block of an event at the current LSN."""
        return {
            "version": CONNECTOR_VERSION,
            "connector": "postgresql",
            "name": TOPIC_PREFIX,
            "ts_ms": ts_ms,
            "snapshot": snapshot,
            "db": DATABASE,
            "sequence": _dumps(sequence),
            "schema": SCHEMA,
            "table": table.name,
            "txId": txid,
            "lsn": self.lsn,
            "xmin": None,
        }

    def _streamed_event(
        self,
        table: Table,
        op: str,
        key: dict[str, Any],
        after: dict[str, Any] | None,
        headers: list[str] | None = None,
    ) -> str:
        """Emit one streamed event at the current LSN (plus a tombstone after a delete); returns the key JSON."""
        tx = self.tx
        if tx is None:
            raise RuntimeError("streamed changes must happen inside a transaction")
        tx.processed_ms += self.rng.randint(0, 3)
        source = self.source_block(
            table,
            ts_ms=tx.commit_ms,
            snapshot="false",
            sequence=[str(tx.last_commit_lsn), str(self.lsn)],
            txid=tx.txid,
        )
        before = table.encode_key(key) if op in ("u", "d") else None
        value = self.envelope(
            table, op, before, None if after is None else table.encode_row(after), source, tx.processed_ms
        )
        ts = tx.processed_ms + self.rng.randint(1, 25)
        key_json = self.emit(table, key, value, headers, ts)
        if op == "d":
            self.emit(table, key, None, headers, ts)
        return key_json

    # ---- database side ----------------------------------------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Run the enclosed changes as one committed transaction."""
        self.txid += self.rng.randint(1, 3)
        self.clock_ms += self.rng.randint(150, 12_000)
        self.tx = _Transaction(
            txid=self.txid,
            commit_ms=self.clock_ms,
            processed_ms=max(self.clock_ms + self.rng.randint(20, 600), self.last_ts),
            last_commit_lsn=self.last_commit_lsn,
        )
        yield
        self.lsn += self._wal_record_size()
        self.last_commit_lsn = self.lsn
        self.tx = None

    def _wal_record_size(self) -> int:
        return self.rng.randint(7, 90) * 8

    def now(self) -> datetime:
        """``now()`` inside the current transaction: its start, a little before the commit."""
        assert self.tx is not None
        micros = self.tx.commit_ms * 1000 - self.rng.randint(300, 900_000)
        return _EPOCH + timedelta(microseconds=micros)

    def insert(self, table: Table, row: dict[str, Any], old_key: dict[str, Any] | None = None) -> None:
        """``INSERT`` one row."""
        key = {k: row[k] for k in table.key}
        pk = tuple(key.values())
        if pk in self.rows[table.name]:
            raise RuntimeError(f"duplicate key {key} in {table.name}")
        self.lsn += self._wal_record_size()
        self.rows[table.name][pk] = dict(row)
        self.changes.append(LogicalChange(table.name, "insert", key, dict(row), old_key))
        self._streamed_event(table, "c", key, row)

    def update(self, table: Table, key: dict[str, Any], **values: Any) -> None:
        """``UPDATE`` non-key columns of one row."""
        pk = tuple(key[k] for k in table.key)
        row = {**self.rows[table.name][pk], **values}
        self.lsn += self._wal_record_size()
        self.rows[table.name][pk] = row
        self.changes.append(LogicalChange(table.name, "update", dict(key), dict(row)))
        self._streamed_event(table, "u", key, row)

    def delete(self, table: Table, key: dict[str, Any]) -> None:
        """``DELETE`` one row; a customer's orders go with it (``ON DELETE CASCADE``)."""
        pk = tuple(key[k] for k in table.key)
        del self.rows[table.name][pk]
        self.lsn += self._wal_record_size()
        self.changes.append(LogicalChange(table.name, "delete", dict(key), None))
        self._streamed_event(table, "d", key, None)
        if table is CUSTOMERS:
            for order in self._orders_of(key["id"]):
                self.delete(ORDERS, {"order_id": order["order_id"]})

    def change_customer_id(self, old_id: int, new_id: int) -> None:
        """``UPDATE customers SET id = new_id``: Debezium's delete + tombstone + create, then the cascade."""
        old_key, new_key = {"id": old_id}, {"id": new_id}
        row = {**self.rows["customers"].pop((old_id,)), "id": new_id}
        self.rows["customers"][(new_id,)] = row
        self.lsn += self._wal_record_size()
        self.changes.append(LogicalChange("customers", "delete", old_key, None))
        self.changes.append(LogicalChange("customers", "insert", new_key, dict(row), old_key))
        new_key_json = _dumps({"schema": CUSTOMERS.key_schema(), "payload": CUSTOMERS.encode_key(new_key)})
        old_key_json = self._streamed_event(CUSTOMERS, "d", old_key, None, [NEW_KEY_HEADER, new_key_json])
        self._streamed_event(CUSTOMERS, "c", new_key, row, [OLD_KEY_HEADER, old_key_json])
        for order in self._orders_of(old_id):
            self.update(ORDERS, {"order_id": order["order_id"]}, customer_id=new_id)

    def _orders_of(self, customer_id: int) -> list[dict[str, Any]]:
        return [o for o in self.rows["orders"].values() if o["customer_id"] == customer_id]

    # ---- row factories ----------------------------------------------------------------------------------------

    def new_customer(self, customer_id: int, created_at: datetime) -> dict[str, Any]:
        """A random customer row (not yet stored)."""
        first = self.rng.choice(_FIRST_NAMES)
        last = self.rng.choice(_LAST_NAMES)
        birth = None
        if self.rng.random() < 0.8:
            birth = date(1950, 1, 1) + timedelta(days=self.rng.randint(0, 20_000))
        return {
            "id": customer_id,
            "first_name": first,
            "last_name": last,
            "email": _email(first, last, customer_id),
            "vip": self.rng.random() < 0.2,
            "created_at": created_at,
            "birth_date": birth,
        }

    def new_order(self, order_id: int, *, refund: bool = False) -> dict[str, Any]:
        """A random order row for an existing customer (not yet stored); a refund has a negative amount."""
        customer_id = self.rng.choice(list(self.rows["customers"]))[0]
        cents = self.rng.randint(100, 250_000)
        if refund:
            return {
                "order_id": order_id,
                "customer_id": customer_id,
                "amount": -Decimal(self.rng.randint(100, 20_000)).scaleb(-2),
                "status": "refunded",
                "note": f"refund for order {self.rng.randint(10001, order_id - 1)}",
            }
        return {
            "order_id": order_id,
            "customer_id": customer_id,
            "amount": Decimal(cents).scaleb(-2),
            "status": self.rng.choice(("pending", "pending", "paid", "shipped", "delivered", "cancelled")),
            "note": self.rng.choice(_NOTES) if self.rng.random() < 0.6 else None,
        }


def _email(first: str, last: str, n: int) -> str:
    local = "".join(ch for ch in f"{first}.{last}".lower() if ch.isascii() and (ch.isalnum() or ch == "."))
    return f"{local}{n}@example.com"


def _snapshot(sim: _Simulation, customers: int, orders: int) -> None:
    """Fill the tables and emit the initial snapshot (``op=r``), table by table in key order."""
    start = _START
    for _ in range(customers):
        created = start - timedelta(microseconds=sim.rng.randint(3_600 * 10**6, 400 * 86_400 * 10**6))
        row = sim.new_customer(sim.next_customer_id, created)
        sim.rows["customers"][(row["id"],)] = row
        sim.next_customer_id += 1
    for i in range(orders):
        row = sim.new_order(sim.next_order_id)
        if i == 0:
            row["note"] = _NOTES[0]
        sim.rows["orders"][(row["order_id"],)] = row
        sim.next_order_id += 1

    records = [(TABLES[name], row) for name in TABLES for row in sim.rows[name].values()]
    read_ms = sim.clock_ms
    for i, (table, row) in enumerate(records):
        marker = "last" if i == len(records) - 1 else "first" if i == 0 else "true"
        read_ms += sim.rng.randint(0, 2)
        source = sim.source_block(
            table, ts_ms=read_ms, snapshot=marker, sequence=[None, str(SNAPSHOT_LSN)], txid=_SNAPSHOT_TXID
        )
        processed = read_ms + sim.rng.randint(1, 40)
        value = sim.envelope(table, "r", None, table.encode_row(row), source, processed)
        key = {k: row[k] for k in table.key}
        sim.emit(table, key, value, None, processed + sim.rng.randint(1, 25))
        sim.changes.append(LogicalChange(table.name, "snapshot", key, dict(row)))
    sim.clock_ms = read_ms + 5_000


def _random_transaction(sim: _Simulation, protected: set[int]) -> None:
    """A transaction of one to three random business operations."""
    with sim.transaction():
        for _ in range(sim.rng.choices((1, 2, 3), weights=(6, 3, 1))[0]):
            _random_operation(sim, protected)


def _random_operation(sim: _Simulation, protected: set[int]) -> None:
    rng = sim.rng
    kind = rng.choices(
        ("new_order", "advance_order", "edit_note", "new_customer", "edit_customer", "cancel", "refund", "churn"),
        weights=(28, 24, 6, 10, 16, 8, 5, 3),
    )[0]
    orders = sim.rows["orders"]
    customers = sim.rows["customers"]
    if kind == "advance_order":
        open_orders = [o for o in orders.values() if o["status"] in _NEXT_STATUS]
        if open_orders:
            order = rng.choice(open_orders)
            sim.update(ORDERS, {"order_id": order["order_id"]}, status=_NEXT_STATUS[order["status"]])
            return
        kind = "new_order"
    if kind == "edit_note" and orders:
        order = rng.choice(list(orders.values()))
        note = None if order["note"] is not None and rng.random() < 0.5 else rng.choice(_NOTES)
        sim.update(ORDERS, {"order_id": order["order_id"]}, note=note)
        return
    if kind == "cancel":
        # Deleting a pending order is how the shop cancels it.
        pending = [o for o in orders.values() if o["status"] in ("pending", "cancelled")]
        if pending:
            sim.delete(ORDERS, {"order_id": rng.choice(pending)["order_id"]})
            return
        kind = "new_order"
    if kind == "churn":
        candidates = [pk[0] for pk in customers if pk[0] not in protected]
        if len(customers) > 3 and candidates:
            sim.delete(CUSTOMERS, {"id": rng.choice(candidates)})
            return
        kind = "new_customer"
    if kind == "new_customer":
        row = sim.new_customer(sim.next_customer_id, sim.now())
        sim.next_customer_id += 1
        sim.insert(CUSTOMERS, row)
        return
    if kind == "edit_customer":
        _edit_customer(sim, rng.choice(list(customers))[0])
        return
    sim.insert(ORDERS, sim.new_order(sim.next_order_id, refund=kind == "refund"))
    sim.next_order_id += 1


def _edit_customer(sim: _Simulation, customer_id: int) -> None:
    rng = sim.rng
    row = sim.rows["customers"][(customer_id,)]
    what = rng.choice(("email", "vip", "last_name", "birth_date"))
    if what == "email":
        changes: dict[str, Any] = {"email": f"{row['first_name'][0].lower()}.{customer_id}@mail.example.org"}
    elif what == "vip":
        changes = {"vip": not row["vip"]}
    elif what == "last_name":
        last = rng.choice([n for n in _LAST_NAMES if n != row["last_name"]])
        changes = {"last_name": last, "email": _email(row["first_name"], last, customer_id)}
    else:
        changes = {"birth_date": date(1950, 1, 1) + timedelta(days=rng.randint(0, 20_000))}
    sim.update(CUSTOMERS, {"id": customer_id}, **changes)


def _script(
    sim: _Simulation, hot_customer: int, protected: set[int], streaming_batches: int
) -> list[tuple[float, Callable[[], None]]]:
    """The scenarios every stream contains, each with the fraction of the stream at which it runs."""
    rng = sim.rng
    state: dict[str, int] = {}

    def touch_hot() -> None:
        with sim.transaction():
            _edit_customer(sim, hot_customer)

    def change_key() -> None:
        old_id = rng.choice([pk[0] for pk in sim.rows["customers"] if pk[0] not in protected])
        new_id = 9000 + old_id
        with sim.transaction():
            sim.change_customer_id(old_id, new_id)

    def delete_for_reinsert() -> None:
        victim = rng.choice([pk[0] for pk in sim.rows["customers"] if pk[0] not in protected])
        state["reinsert"] = victim
        protected.add(victim)
        with sim.transaction():
            sim.delete(CUSTOMERS, {"id": victim})

    def reinsert() -> None:
        with sim.transaction():
            sim.insert(CUSTOMERS, sim.new_customer(state["reinsert"], sim.now()))

    def set_nulls() -> None:
        with_note = [o for o in sim.rows["orders"].values() if o["note"] is not None]
        with_birth = [c for c in sim.rows["customers"].values() if c["birth_date"] is not None]
        with sim.transaction():
            if not with_note:
                order = rng.choice(list(sim.rows["orders"].values()))
                sim.update(ORDERS, {"order_id": order["order_id"]}, note=_NOTES[1])
                with_note = [sim.rows["orders"][(order["order_id"],)]]
            sim.update(ORDERS, {"order_id": rng.choice(with_note)["order_id"]}, note=None)
            if with_birth:
                sim.update(CUSTOMERS, {"id": rng.choice(with_birth)["id"]}, birth_date=None)

    def refund() -> None:
        with sim.transaction():
            sim.insert(ORDERS, sim.new_order(sim.next_order_id, refund=True))
            sim.next_order_id += 1

    steps: list[tuple[float, Callable[[], None]]] = [
        (0.12, change_key),
        (0.22, delete_for_reinsert),
        (0.35, set_nulls),
        (0.45, refund),
        (0.68, reinsert),
    ]
    # One hot-key change in the middle of every streaming batch, so that key spans all of them.
    steps += [((k + 0.5) / streaming_batches, touch_hot) for k in range(streaming_batches)]
    return sorted(steps, key=lambda step: step[0])


def generate(
    seed: int = 7, *, customers: int = 40, orders: int = 60, stream_changes: int = 300, batches: int = 4
) -> DemoStream:
    """Simulate the shop database and return its change stream.

    Args:
        seed: Seed of the simulation; the same arguments always give the same stream.
        customers: Customers in the initial snapshot (at least 5).
        orders: Orders in the initial snapshot (at least 1).
        stream_changes: Row changes to stream after the snapshot (at least 30); the last transaction may add a
            few more.
        batches: Micro-batches (at least 2): the snapshot, then the streamed changes split over the rest.

    Returns:
        The logical changes and the kcat micro-batches.

    Raises:
        ValueError: If an argument is below its minimum.
    """
    for name, value, minimum in (
        ("customers", customers, 5),
        ("orders", orders, 1),
        ("stream_changes", stream_changes, 30),
        ("batches", batches, 2),
    ):
        if value < minimum:
            raise ValueError(f"generate(): {name}={value} is below the minimum of {minimum}")

    sim = _Simulation(rng=random.Random(seed))
    _snapshot(sim, customers, orders)
    snapshot_messages = len(sim.messages)
    snapshot_changes = len(sim.changes)

    hot_customer = 1
    protected = {hot_customer}
    script = _script(sim, hot_customer, protected, batches - 1)
    while len(sim.changes) - snapshot_changes < stream_changes or script:
        done = len(sim.changes) - snapshot_changes
        if script and done >= script[0][0] * stream_changes:
            script.pop(0)[1]()
        else:
            _random_transaction(sim, protected)

    streamed = sim.messages[snapshot_messages:]
    parts = batches - 1
    cuts = [round(len(streamed) * k / parts) for k in range(parts + 1)]
    out = [sim.messages[:snapshot_messages]] + [streamed[cuts[k] : cuts[k + 1]] for k in range(parts)]
    return DemoStream(changes=sim.changes, batches=out)


def write_batches(stream: DemoStream, inbox: Path) -> list[Path]:
    """Write each micro-batch as ``inbox/batch-0001.jsonl``, ``batch-0002.jsonl``, ... (UTF-8, one line per message).

    Args:
        stream: The generated stream.
        inbox: Directory to write to; created if missing.

    Returns:
        The written files, in batch order.
    """
    inbox.mkdir(parents=True, exist_ok=True)
    paths = []
    for number, lines in enumerate(stream.batches, start=1):
        path = inbox / f"batch-{number:04d}.jsonl"
        path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
        paths.append(path)
    return paths
