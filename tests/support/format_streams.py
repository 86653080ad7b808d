"""Simulated CDC sources for the format end-to-end tests: logical operations, one encoder per format variant, and
a plain-Python oracle.

The simulated MySQL-like source is a list of logical operations (:class:`Event`) on two tables made of plain
Python values (int, :class:`~decimal.Decimal`, str, naive and UTC datetimes, date, float, bytes, None): snapshot
rows, inserts, updates (some of only a few columns), deletes, a delete and re-insert of the same key, a
primary-key change, multi-row statements, and a schema change (a nullable column appears in the last phase). A
second, MongoDB-like source (:class:`MongoEvent`) inserts, replaces, patches (``$set``/``$unset``) and deletes
documents.

Each encoder writes what one connector would have put on Kafka for those operations, following its format
document (``tests/fixtures/seeds``) field by field, as micro-batch files. The oracle (:func:`expected_tables`,
:func:`expected_documents`) replays the *logical operations*, never the encoded messages, and renders the tables
as ``cdclake dump`` prints them. Nothing here imports cdclake: the product is never compared with itself.

Everything is deterministic (seeded ``random.Random``).
"""

from __future__ import annotations

import base64
import json
import random
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any, Callable, Iterator

EPOCH = datetime(1970, 1, 1)
EPOCH_DATE = date(1970, 1, 1)
UTC = timezone.utc
START = datetime(2024, 3, 4, 8, 15, 0)
PHASES = 3
"""Phase 0: snapshot; phase 1: streamed changes; phase 2: the schema change and more streamed changes."""


# ---- logical model ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Col:
    """One source column.

    Attributes:
        name: Column name.
        kind: Logical type: ``int``, ``bigint``, ``decimal``, ``varchar``, ``text``, ``datetime`` (no zone),
            ``timestamp`` (an instant, UTC), ``date``, ``double`` or ``varbinary``.
        nullable: False for NOT NULL.
        length: Declared length (varchar, varbinary).
        precision: Decimal precision.
        scale: Decimal scale.
    """

    name: str
    kind: str
    nullable: bool = True
    length: int = 0
    precision: int = 0
    scale: int = 0


@dataclass(frozen=True)
class TableDef:
    """One source table: name, primary key, columns in table order."""

    name: str
    key: tuple[str, ...]
    columns: tuple[Col, ...]

    def col(self, name: str) -> Col:
        """The column called ``name``."""
        return next(c for c in self.columns if c.name == name)

    def with_column(self, col: Col) -> "TableDef":
        """This table with one more column at the end."""
        return replace(self, columns=(*self.columns, col))


CUSTOMERS = TableDef(
    name="customers",
    key=("id",),
    columns=(
        Col("id", "int", nullable=False),
        Col("name", "varchar", nullable=False, length=64),
        Col("email", "varchar", length=128),
        Col("balance", "decimal", nullable=False, precision=10, scale=2),
        Col("created_at", "datetime", nullable=False),
        Col("updated_at", "timestamp"),
        Col("birth_date", "date"),
        Col("score", "double"),
        Col("avatar", "varbinary", length=64),
    ),
)
ORDERS = TableDef(
    name="orders",
    key=("order_id", "line_no"),
    columns=(
        Col("order_id", "bigint", nullable=False),
        Col("line_no", "int", nullable=False),
        Col("customer_id", "int", nullable=False),
        Col("amount", "decimal", nullable=False, precision=12, scale=3),
        Col("note", "text"),
        Col("shipped_on", "date"),
    ),
)
POINTS = Col("points", "int")
"""The column ``ALTER TABLE customers ADD COLUMN`` adds in phase 2."""


@dataclass(frozen=True)
class Change:
    """One row's change: the full row before (None for an insert) and after (None for a delete)."""

    before: dict[str, Any] | None
    after: dict[str, Any] | None


@dataclass(frozen=True)
class Event:
    """One logical operation: a statement on one table (one or more rows), or a schema change.

    Attributes:
        kind: ``snapshot``, ``insert``, ``update``, ``delete`` or ``add_column``.
        table: Table name.
        changes: Row changes, in statement order (empty for ``add_column``).
        column: The added column (``add_column`` only).
        phase: 0 (snapshot), 1 or 2 (see :data:`PHASES`).
        txn: Transaction number; events of one transaction are consecutive.
        at: Commit time (naive UTC, millisecond precision).
    """

    kind: str
    table: str
    changes: tuple[Change, ...] = ()
    column: Col | None = None
    phase: int = 0
    txn: int = 0
    at: datetime = START


@dataclass(frozen=True)
class Stream:
    """A relational source's history: table definitions at the start, then events in commit order."""

    tables: tuple[TableDef, ...]
    events: tuple[Event, ...]

    def walk(self) -> Iterator[tuple[Event, TableDef]]:
        """Each event with its table's definition as of that event (``add_column`` already included)."""
        defs = {t.name: t for t in self.tables}
        for event in self.events:
            if event.kind == "add_column":
                assert event.column is not None
                defs[event.table] = defs[event.table].with_column(event.column)
            yield event, defs[event.table]

    def final_tables(self) -> dict[str, TableDef]:
        """Table definitions after every event."""
        defs = {t.name: t for t in self.tables}
        for event, table in self.walk():
            defs[event.table] = table
        return defs

    def without_columns(self, names: set[str]) -> "Stream":
        """The same history with some columns dropped everywhere (for formats that cannot carry them)."""

        def strip(row: dict[str, Any] | None) -> dict[str, Any] | None:
            return None if row is None else {k: v for k, v in row.items() if k not in names}

        tables = tuple(replace(t, columns=tuple(c for c in t.columns if c.name not in names)) for t in self.tables)
        events = tuple(
            replace(e, changes=tuple(Change(strip(c.before), strip(c.after)) for c in e.changes))
            for e in self.events
            if not (e.kind == "add_column" and e.column is not None and e.column.name in names)
        )
        return Stream(tables, events)


_FIRST = ("Anne", "José", "Søren", "Zoë", "Chen", "Aisha", "Łukasz", "Yuki", "Olga", "Ravi", "Ingrid", "Kofi")
_LAST = ("Kretchmar", "Müller", "Jørgensen", "García", "华为云huaweicloud", "O'Brien", "Nguyen", "Żółć", "Tanaka")
_NOTES = (
    "leave at front door",
    'deliver to "Building B"',
    "call on arrival\nring twice",
    "back\\slash and tab\there",
    "fragile 🎁",
    "请勿折叠",
)
_SCORES = (3.25, 12510357.0, -0.5, 0.1, 1e-05, 10357.0, 2.5e20, 42.0)


class _Sim:
    """The simulated database: applies operations to its own rows and records them as events."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.defs = {"customers": CUSTOMERS, "orders": ORDERS}
        self.rows: dict[str, dict[tuple[Any, ...], dict[str, Any]]] = {"customers": {}, "orders": {}}
        self.events: list[Event] = []
        self.clock = START
        self.txn = 0
        self.phase = 0

    def key(self, table: str, row: dict[str, Any]) -> tuple[Any, ...]:
        return tuple(row[k] for k in self.defs[table].key)

    def begin(self) -> None:
        """Start a transaction: a new number and a later commit time."""
        self.txn += 1
        self.clock += timedelta(seconds=self.rng.randint(1, 40), milliseconds=self.rng.randint(1, 999))

    def _record(self, kind: str, table: str, changes: list[Change], column: Col | None = None) -> None:
        self.events.append(Event(kind, table, tuple(changes), column, self.phase, self.txn, self.clock))

    def write(self, kind: str, table: str, *rows: dict[str, Any]) -> None:
        """Snapshot or insert rows (one statement)."""
        names = [c.name for c in self.defs[table].columns]
        changes = []
        for row in rows:
            assert sorted(row) == sorted(names), (row, names)
            k = self.key(table, row)
            assert k not in self.rows[table], k
            self.rows[table][k] = dict(row)
            changes.append(Change(None, dict(row)))
        self._record(kind, table, changes)

    def update(self, table: str, *edits: tuple[tuple[Any, ...], dict[str, Any]]) -> None:
        """Update rows (one statement); an edit that sets key columns changes the row's primary key."""
        changes = []
        for k, values in edits:
            before = self.rows[table].pop(k)
            after = {**before, **values}
            self.rows[table][self.key(table, after)] = after
            changes.append(Change(dict(before), dict(after)))
        self._record("update", table, changes)

    def delete(self, table: str, *keys: tuple[Any, ...]) -> None:
        """Delete rows (one statement)."""
        self._record("delete", table, [Change(self.rows[table].pop(k), None) for k in keys])

    def add_column(self, table: str, col: Col) -> None:
        """``ALTER TABLE ... ADD COLUMN`` (nullable: existing rows get NULL)."""
        self.defs[table] = self.defs[table].with_column(col)
        for row in self.rows[table].values():
            row[col.name] = None
        self._record("add_column", table, [], col)

    # ---- value makers ---------------------------------------------------------------------------------------------

    def customer(self, cid: int, **values: Any) -> dict[str, Any]:
        rng = self.rng
        created = self.clock - timedelta(days=rng.randint(0, 900), seconds=rng.randint(0, 86399),
                                         milliseconds=rng.randint(0, 999))
        first, last = rng.choice(_FIRST), rng.choice(_LAST)
        row: dict[str, Any] = {
            "id": cid,
            "name": f"{first} {last}",
            "email": f"{first.lower()}.{cid}@example.org",
            "balance": Decimal(rng.randint(-500_000, 50_000_000)).scaleb(-2),
            "created_at": created,
            "updated_at": self.clock.replace(tzinfo=UTC),
            "birth_date": date(1950, 1, 1) + timedelta(days=rng.randint(0, 20_000)),
            "score": rng.choice(_SCORES),
            "avatar": bytes(rng.randrange(128) for _ in range(rng.randint(1, 12))),
        }
        if "points" in {c.name for c in self.defs["customers"].columns}:
            row["points"] = None
        row.update(values)
        return row

    def order(self, order_id: int, line_no: int, customer_id: int, **values: Any) -> dict[str, Any]:
        rng = self.rng
        row: dict[str, Any] = {
            "order_id": order_id,
            "line_no": line_no,
            "customer_id": customer_id,
            "amount": Decimal(rng.randint(1, 9_999_999)).scaleb(-3),
            "note": rng.choice((None, *_NOTES)),
            "shipped_on": rng.choice((None, date(2024, 2, 1) + timedelta(days=rng.randint(0, 60)))),
        }
        row.update(values)
        return row

    def money(self) -> Decimal:
        return Decimal(self.rng.randint(-99_999, 9_999_999)).scaleb(-2)

    def now_utc(self) -> datetime:
        return self.clock.replace(tzinfo=UTC)


def relational_stream(seed: int = 7) -> Stream:
    """The relational source's history (see the module docstring); the same for every seed but the values.

    Phase 0 is the initial snapshot, phase 1 streamed changes, phase 2 starts with ``ALTER TABLE customers ADD
    COLUMN points int NULL`` and continues with changes that use it. Every special case is scripted so each run
    has all of them; the seed only varies values.
    """
    sim = _Sim(seed)
    # Phase 0: the snapshot. Edge values: a pre-1970 date, an empty binary, the largest decimal(10,2), negative
    # and zero amounts, unicode, quotes, backslashes and newlines in text.
    sim.begin()
    sim.write("snapshot", "customers",
              sim.customer(1, birth_date=date(1965, 7, 14), avatar=b"\x00\x7f\x10jg", balance=Decimal("-12.50")),
              sim.customer(2, name="José Müller", email=None, balance=Decimal("0.00")),
              sim.customer(3, name="华为云huaweicloud", score=12510357.0))
    sim.write("snapshot", "customers",
              sim.customer(4, avatar=b"", balance=Decimal("99999999.99")),
              sim.customer(5, name='O\'Brien "the \\ quoted"', updated_at=None, score=None),
              sim.customer(6, name="Zoë 🎉", birth_date=None))
    sim.write("snapshot", "orders",
              sim.order(10001, 1, 1), sim.order(10001, 2, 1, note="call on arrival\nring twice"),
              sim.order(10002, 1, 2, amount=Decimal("0.001")))
    sim.write("snapshot", "orders",
              sim.order(10003, 1, 3, amount=Decimal("123456789.125")), sim.order(10004, 1, 4, note=None))

    sim.phase = 1
    sim.begin()
    sim.write("insert", "customers", sim.customer(7))
    sim.begin()
    sim.write("insert", "orders", sim.order(10005, 1, 7), sim.order(10005, 2, 7), sim.order(10005, 3, 7))
    sim.begin()  # only one column changes
    sim.update("customers", ((2,), {"email": "jose.mueller@example.org"}))
    sim.begin()  # a few columns change
    sim.update("customers", ((4,), {"balance": sim.money(), "updated_at": sim.now_utc(), "score": 0.1}))
    sim.begin()  # one statement updating two rows
    sim.update("orders", ((10001, 1), {"amount": Decimal("1.500")}),
               ((10001, 2), {"amount": Decimal("-2.250"), "note": "fragile 🎁"}))
    sim.begin()
    sim.delete("customers", (5,))
    sim.begin()
    sim.delete("orders", (10002, 1))
    sim.begin()  # values become NULL
    sim.update("customers", ((1,), {"birth_date": None, "avatar": None, "updated_at": sim.now_utc()}))

    sim.phase = 2
    sim.begin()
    sim.add_column("customers", POINTS)
    sim.begin()
    sim.update("customers", ((2,), {"name": "Łukasz Żółć", "points": 120, "updated_at": sim.now_utc()}))
    sim.begin()  # the key deleted in phase 1 comes back
    sim.write("insert", "customers", sim.customer(5, name="Olga Nguyen", points=None))
    sim.begin()  # primary-key change 3 -> 103
    sim.update("customers", ((3,), {"id": 103, "name": "Chen Tanaka", "updated_at": sim.now_utc()}))
    sim.begin()  # delete and re-insert of the same key in one transaction
    sim.delete("orders", (10003, 1))
    sim.write("insert", "orders", sim.order(10003, 1, 103, amount=Decimal("77.700"), note="re-inserted"))
    sim.begin()  # one statement deleting two rows
    sim.delete("orders", (10001, 1), (10001, 2))
    sim.begin()
    sim.write("insert", "customers", sim.customer(8, points=5))
    sim.begin()  # the row under its new key changes again
    sim.update("customers", ((103,), {"email": "chen.103@example.org", "points": 42}))
    sim.begin()  # only the new column changes
    sim.update("customers", ((6,), {"points": 7}))
    return Stream((CUSTOMERS, ORDERS), tuple(sim.events))


# ---- the MongoDB-like source --------------------------------------------------------------------------------------


class ObjectId(str):
    """A MongoDB ObjectId (its 24 hex digits); written as ``ObjectId("…")`` in mongo-shell JSON."""


@dataclass(frozen=True)
class MongoEvent:
    """One operation on a collection.

    Attributes:
        kind: ``insert``, ``replace`` (whole document), ``update`` (``$set``/``$unset`` of top-level fields) or
            ``delete``.
        oid: The document's ``_id``.
        doc: The inserted or replacing document (with ``_id``).
        set: Fields ``$set`` sets (update only).
        unset: Fields ``$unset`` removes (update only).
        phase: 0, 1 or 2.
        at: Commit time (naive UTC).
        inc: Order within the second (``clusterTime`` increment).
    """

    kind: str
    oid: ObjectId
    doc: dict[str, Any] | None = None
    set: dict[str, Any] = field(default_factory=dict)
    unset: tuple[str, ...] = ()
    phase: int = 0
    at: datetime = START
    inc: int = 1


def mongo_stream(seed: int = 11) -> list[MongoEvent]:
    """Operations on one collection: inserts, a replace that drops fields, ``$set``/``$unset`` patches, deletes,
    and a delete then re-insert of the same ``_id``."""
    rng = random.Random(seed)
    oids = [ObjectId("%024x" % rng.getrandbits(96)) for _ in range(7)]
    owner = ObjectId("%024x" % rng.getrandbits(96))
    clock = START
    events: list[MongoEvent] = []

    def emit(kind: str, oid: ObjectId, phase: int, **kw: Any) -> None:
        nonlocal clock
        clock += timedelta(seconds=rng.randint(0, 2), milliseconds=rng.randint(1, 999))
        inc = sum(1 for e in events if int((e.at - EPOCH).total_seconds()) == int((clock - EPOCH).total_seconds()))
        events.append(MongoEvent(kind, oid, phase=phase, at=clock, inc=inc + 1, **kw))

    def doc(i: int, **extra: Any) -> dict[str, Any]:
        base: dict[str, Any] = {
            "_id": oids[i],
            "sku": f"SKU-{rng.randint(1000, 9999)}",
            "qty": rng.randint(0, 500),
            "price": rng.choice((9.99, 0.5, 1250.0, 3.25)),
            "tags": rng.sample(["mongodb", "database", "NoSQL", "华为", "café"], k=rng.randint(0, 3)),
            "dims": {"w": rng.randint(1, 90), "h": rng.randint(1, 90), "unit": "cm"},
            "owner": owner,
            "active": rng.choice((True, False)),
            "comment": rng.choice((None, "plain", 'quote " and \\ slash', "línea\nnueva")),
        }
        base.update(extra)
        return base

    for i in range(5):
        emit("insert", oids[i], 0, doc=doc(i))
    emit("replace", oids[1], 1, doc={"_id": oids[1], "sku": "SKU-REPLACED", "qty": 1})
    emit("update", oids[2], 1, set={"qty": 7, "status": "sold"})
    emit("update", oids[0], 1, set={"comment": "ünïcødé"}, unset=("tags",))
    emit("delete", oids[3], 1)
    emit("insert", oids[3], 2, doc=doc(3, sku="SKU-BACK-AGAIN"))
    emit("update", oids[4], 2, set={"dims": {"w": 1, "h": 2, "unit": "mm"}, "owner": oids[0]}, unset=("active",))
    emit("replace", oids[2], 2, doc=doc(2, qty=0))
    emit("delete", oids[0], 2)
    emit("insert", oids[5], 2, doc=doc(5))
    emit("update", oids[5], 2, set={"qty": 99}, unset=("comment", "tags"))
    emit("insert", oids[6], 2, doc=doc(6, tags=[]))
    return events


# ---- the oracle ---------------------------------------------------------------------------------------------------


def _render(col: Col, value: Any) -> Any:
    """A logical value as ``cdclake dump`` prints a column of that type."""
    if value is None:
        return None
    if col.kind in ("int", "bigint"):
        return int(value)
    if col.kind == "decimal":
        return format(Decimal(value).quantize(Decimal(1).scaleb(-col.scale)), "f")
    if col.kind in ("varchar", "text"):
        return str(value)
    if col.kind == "datetime":
        return value.isoformat(timespec="microseconds")
    if col.kind == "timestamp":
        return value.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"
    if col.kind == "date":
        return value.isoformat()
    if col.kind == "double":
        return float(value)
    if col.kind == "varbinary":
        return base64.b64encode(value).decode("ascii")
    raise ValueError(f"column {col.name}: unknown kind {col.kind!r}")


def mysql_text(col: Col, value: Any) -> str | None:
    """A value as MySQL's text protocol (and so canal/CKafka) writes it; timestamps in UTC."""
    if value is None:
        return None
    if col.kind == "decimal":
        return format(Decimal(value).quantize(Decimal(1).scaleb(-col.scale)), "f")
    if col.kind == "datetime":
        return value.strftime("%Y-%m-%d %H:%M:%S.") + f"{value.microsecond // 1000:03d}"
    if col.kind == "timestamp":
        return mysql_text(replace(col, kind="datetime"), value.astimezone(UTC).replace(tzinfo=None))
    if col.kind == "date":
        return value.isoformat()
    if col.kind == "double":
        return java_double(value)  # canal and CKafka are Java: String.valueOf(double)
    if col.kind == "varbinary":
        return json.dumps(list(value))  # DRS's byte list: "[106, 103]" (canal: canal_text)
    return str(value)


def canal_text(col: Col, value: Any) -> str | None:
    """A value as canal writes it: as MySQL's text protocol, but a binary value as its bytes read as ISO-8859-1
    (canal's ``new String(bytes, ISO_8859_1)``; the byte list is DRS's)."""
    if col.kind == "varbinary" and value is not None:
        return bytes(value).decode("latin-1")
    return mysql_text(col, value)


def _sort_key(row: dict[str, Any], key: tuple[str, ...]) -> tuple[Any, ...]:
    return tuple((0, "") if row[k] is None else (1, row[k]) for k in key)


def expected_tables(stream: Stream, namespace: str, *, strings: bool = False) -> dict[str, list[dict[str, Any]]]:
    """Replay the logical operations and render the final tables as ``cdclake dump`` prints them.

    Snapshot rows and inserts set a row, updates replace it (an update whose before and after keys differ moves
    it to the new key), deletes remove it; an added column is NULL in every row that was not written since.

    Args:
        stream: The source's history.
        namespace: The lake namespace of the source's tables.
        strings: Every column is a string holding MySQL's text form (a format that carries no types).

    Returns:
        ``{"<namespace>.<table>": rows}``, rows sorted by primary key.
    """
    state: dict[str, dict[tuple[Any, ...], dict[str, Any]]] = {t.name: {} for t in stream.tables}
    for event, table in stream.walk():
        rows = state[event.table]
        for change in event.changes:
            if change.before is not None:
                rows.pop(tuple(change.before[k] for k in table.key), None)
            if change.after is not None:
                rows[tuple(change.after[k] for k in table.key)] = change.after
    out = {}
    for name, table in stream.final_tables().items():
        render: Callable[[Col, Any], Any] = mysql_text if strings else _render
        rendered = [{c.name: render(c, row.get(c.name)) for c in table.columns} for row in state[name].values()]
        out[f"{namespace}.{name}"] = sorted(rendered, key=lambda r: _sort_key(r, table.key))
    return out


def _plain(value: Any) -> Any:
    """A mongo value with ObjectIds as their hex strings."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, ObjectId):
        return str(value)
    return value


def expected_documents(events: list[MongoEvent], table_id: str) -> dict[str, list[dict[str, Any]]]:
    """Replay collection operations; rows are ``{"_id": hex, "document": parsed JSON}`` sorted by ``_id``.

    ``document`` is the parsed document (compare it with ``json.loads`` of the dumped text).
    """
    docs: dict[str, dict[str, Any]] = {}
    for e in events:
        if e.kind in ("insert", "replace"):
            assert e.doc is not None
            docs[e.oid] = dict(e.doc)
        elif e.kind == "update":
            current = docs[e.oid]
            current.update(e.set)
            for name in e.unset:
                current.pop(name, None)
        elif e.kind == "delete":
            docs.pop(e.oid, None)
    return {table_id: [{"_id": str(oid), "document": _plain(docs[oid])} for oid in sorted(docs)]}


# ---- shared encoding helpers --------------------------------------------------------------------------------------


def _ms(at: datetime) -> int:
    return (at - EPOCH) // timedelta(milliseconds=1)


def _dumps(value: Any) -> str:
    """Compact JSON, UTF-8 text (as Kafka's JsonConverter, kcat and the Java producers write it)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def java_double(x: float) -> str:
    """Java's ``Double.toString``: plain in [1e-3, 1e7), else ``d.dddE±n`` (DRS writes doubles this way)."""
    if x == 0:
        return "0.0"
    if 1e-3 <= abs(x) < 1e7:
        return repr(float(x))
    sign, digits, exponent = Decimal(repr(float(x))).normalize().as_tuple()
    text = "".join(map(str, digits))
    power = len(text) - 1 + int(exponent)
    return ("-" if sign else "") + f"{text[0]}.{text[1:] or '0'}E{power}"


def _split_phases(phases: list[list[str]], files: int) -> list[list[str]]:
    """Phase line lists -> ``files`` batch files (3: one per phase; 2: snapshot + phase 1, then phase 2)."""
    if files == PHASES:
        return phases
    if files == 2:
        return [phases[0] + phases[1], phases[2]]
    if files == 1:
        return [phases[0] + phases[1] + phases[2]]
    raise ValueError(f"files must be 1, 2 or 3, not {files}")


# ---- MySQL dialect pieces -----------------------------------------------------------------------------------------

_JDBC = {"int": 4, "bigint": -5, "decimal": 3, "varchar": 12, "text": 2005, "datetime": 93, "timestamp": 93,
         "date": 91, "double": 8, "varbinary": -3}


def mysql_column_type(col: Col, *, bare: bool = False) -> str:
    """MySQL type of a column: canal's ``mysqlType`` form (``int(11)``, ``decimal(10,2)``), or the bare type name
    DRS writes (``int``, ``decimal``)."""
    if bare:
        return col.kind
    return {
        "int": "int(11)",
        "bigint": "bigint(20)",
        "decimal": f"decimal({col.precision},{col.scale})",
        "varchar": f"varchar({col.length})",
        "text": "text",
        "datetime": "datetime(3)",
        "timestamp": "timestamp(3)",
        "date": "date",
        "double": "double",
        "varbinary": f"varbinary({col.length})",
    }[col.kind]


def _mysql_ddl_type(col: Col) -> str:
    return {"int": "int", "bigint": "bigint"}.get(col.kind) or mysql_column_type(col)


def mysql_create_table(table: TableDef) -> str:
    """``SHOW CREATE TABLE`` text (MySQL 8)."""
    lines = []
    for c in table.columns:
        null = "NOT NULL" if not c.nullable else "DEFAULT NULL"
        charset = " CHARACTER SET utf8mb4" if c.kind in ("varchar", "text") else ""
        lines.append(f"  `{c.name}` {_mysql_ddl_type(c)}{charset} {null}")
    lines.append(f"  PRIMARY KEY ({', '.join(f'`{k}`' for k in table.key)})")
    body = ",\n".join(lines)
    return f"CREATE TABLE `{table.name}` (\n{body}\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"


def mysql_add_column(table: str, col: Col) -> str:
    return f"ALTER TABLE `{table}` ADD COLUMN `{col.name}` {_mysql_ddl_type(col)} NULL"


def _old_image(table: TableDef, change: Change, text: Callable[[Col, Any], Any]) -> dict[str, Any]:
    """canal's ``old``: previous values of the columns the update changed (key columns included when changed)."""
    assert change.before is not None and change.after is not None
    return {c.name: text(c, change.before.get(c.name)) for c in table.columns
            if change.before.get(c.name) != change.after.get(c.name)}


# ---- canal --------------------------------------------------------------------------------------------------------


def encode_canal(stream: Stream, *, database: str = "canal_shop") -> list[list[str]]:
    """canal flat messages (one per statement; values as strings; ``old`` = changed columns' previous values).

    canal numbers messages by its batch: the messages of one transaction share an ``id`` here, so ties are
    broken by the order in the file and the row index.
    """
    phases: list[list[str]] = [[] for _ in range(PHASES)]
    for event, table in stream.walk():
        es = _ms(event.at)
        common = {"database": database, "es": es, "id": 100 + event.txn, "table": table.name, "ts": es + 41}
        if event.kind == "add_column":
            assert event.column is not None
            msg = {"data": None, **common, "isDdl": True, "mysqlType": None, "old": None, "pkNames": None,
                   "sql": mysql_add_column(table.name, event.column), "sqlType": None, "type": "ALTER"}
        else:
            def row(image: dict[str, Any] | None) -> dict[str, Any]:
                assert image is not None
                return {c.name: canal_text(c, image.get(c.name)) for c in table.columns}

            if event.kind == "delete":
                data, old = [row(c.before) for c in event.changes], None
            elif event.kind == "update":
                data = [row(c.after) for c in event.changes]
                old = [_old_image(table, c, canal_text) for c in event.changes]
            else:
                data, old = [row(c.after) for c in event.changes], None
            msg = {
                "data": data, **common, "isDdl": False,
                "mysqlType": {c.name: mysql_column_type(c) for c in table.columns},
                "old": old, "pkNames": list(table.key), "sql": "",
                "sqlType": {c.name: _JDBC[c.kind] for c in table.columns},
                "type": {"snapshot": "INSERT", "insert": "INSERT", "update": "UPDATE", "delete": "DELETE"}[event.kind],
            }
        phases[event.phase].append(_dumps(msg))
    return phases


# ---- Huawei DRS ---------------------------------------------------------------------------------------------------


def _drs_mysql_text(col: Col, value: Any) -> str | None:
    """DRS MySQL values: as canal, but ``timestamp`` as epoch seconds with millis (the document's
    ``"c5":"1624614713.201"``; doubles as Java prints them, ``"c8":"1.2510357E7"``, as canal does)."""
    if value is None:
        return None
    if col.kind == "timestamp":
        ms = _ms(value.astimezone(UTC).replace(tzinfo=None))
        return f"{ms // 1000}.{ms % 1000:03d}"
    return mysql_text(col, value)


def encode_drs_mysql(stream: Stream, *, database: str = "DRS-Shop") -> list[list[str]]:
    """DRS MySQL JSON: ``INIT_DDL`` + ``INIT`` for the full sync, then ``INSERT``/``UPDATE``/``DELETE`` (full
    ``old`` rows; a delete's rows in ``old``) and ``DDL``. ``mysqlType`` holds bare type names as in the
    document, so decimal scales come from the ``CREATE TABLE``. The orders table's name carries a trailing space,
    as the document's example ``"table":"test "`` does."""
    phases: list[list[str]] = [[] for _ in range(PHASES)]
    counter = iter(range(27_000, 10**9))
    names = {"customers": "customers", "orders": "orders "}

    def message(event: Event, table: TableDef, **fields: Any) -> str:
        es = _ms(event.at)
        return _dumps({"mysqlType": None, "id": next(counter), "es": es, "ts": es + 377, "database": database,
                       "table": names[table.name], "type": None, "isDdl": False, "sql": "", "sqlType": None,
                       "data": None, "old": None, "pkNames": None, **fields})

    for t in stream.tables:
        phases[0].append(message(Event("ddl", t.name, at=START - timedelta(seconds=5)), t,
                                 type="INIT_DDL", isDdl=True, sql=mysql_create_table(t)))
    for event, table in stream.walk():
        if event.kind == "add_column":
            assert event.column is not None
            phases[event.phase].append(message(event, table, type="DDL", isDdl=True,
                                               sql=mysql_add_column(table.name, event.column)))
            continue

        def row(image: dict[str, Any] | None) -> dict[str, Any]:
            assert image is not None
            return {c.name: _drs_mysql_text(c, image.get(c.name)) for c in table.columns}

        data = None if event.kind == "delete" else [row(c.after) for c in event.changes]
        old = [row(c.before) for c in event.changes] if event.kind in ("update", "delete") else None
        kind = {"snapshot": "INIT", "insert": "INSERT", "update": "UPDATE", "delete": "DELETE"}[event.kind]
        phases[event.phase].append(message(
            event, table, type=kind, data=data, old=old, pkNames=list(table.key),
            mysqlType={c.name: mysql_column_type(c, bare=True) for c in table.columns},
            sqlType={c.name: _JDBC[c.kind] for c in table.columns}))
    return phases


_PG_TYPES = {"int": "integer", "bigint": "bigint", "varchar": "character varying", "text": "text",
             "datetime": "timestamp without time zone", "timestamp": "timestamp with time zone", "date": "date",
             "double": "double precision", "varbinary": "bytea"}
_PG_SQLTYPE = {"int": 4, "bigint": -5, "decimal": 2, "varchar": 12, "text": 12, "datetime": 93, "timestamp": 2014,
               "date": 91, "double": 8, "varbinary": -2}
_PLUS8 = timezone(timedelta(hours=8))


def pg_type(col: Col) -> str:
    """PostgreSQL/GaussDB ``format_type`` of a column."""
    if col.kind == "decimal":
        return f"numeric({col.precision},{col.scale})"
    if col.kind == "varchar":
        return f"character varying({col.length})"
    return _PG_TYPES[col.kind]


def _pg_fraction(value: datetime) -> str:
    return f".{value.microsecond:06d}".rstrip("0").rstrip(".")


def pg_text(col: Col, value: Any) -> str | None:
    """A value as PostgreSQL's text output writes it (DRS GaussDB document: ``"2021-12-16 12:31:49.344365"``,
    bytea as hex ``"62797465615f64617461"``); ``timestamptz`` in the session zone +08."""
    if value is None:
        return None
    if col.kind == "datetime":
        return value.strftime("%Y-%m-%d %H:%M:%S") + _pg_fraction(value)
    if col.kind == "timestamp":
        local = value.astimezone(_PLUS8)
        return local.strftime("%Y-%m-%d %H:%M:%S") + _pg_fraction(local) + "+08"
    if col.kind == "double":
        text = repr(float(value))
        return text[:-2] if text.endswith(".0") else text
    if col.kind == "varbinary":
        return value.hex()
    return mysql_text(col, value)


def pg_create_table(schema: str, table: TableDef) -> str:
    cols = [f"    {c.name} {pg_type(c)}{'' if c.nullable else ' NOT NULL'}" for c in table.columns]
    cols.append(f"    CONSTRAINT {table.name}_pkey PRIMARY KEY ({', '.join(table.key)})")
    return f"CREATE TABLE {schema}.{table.name} (\n" + ",\n".join(cols) + "\n)"


def encode_drs_relational(stream: Stream, *, database: str = "drs_pg", schema: str = "sales",
                          no_pk_names: tuple[str, ...] = ("orders",)) -> list[list[str]]:
    """DRS GaussDB JSON (``columnType``, ``dbType``, ``schema``, ``opType``; full ``old`` rows).

    Tables in ``no_pk_names`` carry ``"pkNames": null`` (as the document's example does); their key comes from a
    ``CREATE TABLE`` DDL message at the start of the stream.
    """
    phases: list[list[str]] = [[] for _ in range(PHASES)]
    counter = iter(range(330, 10**9))

    def message(event: Event, table: TableDef, op: str, **fields: Any) -> str:
        es = _ms(event.at)
        return _dumps({"columnType": None, "dbType": "GaussDB Primary/Standby", "schema": schema, "opType": op,
                       "id": next(counter), "es": es, "ts": es + 2915, "database": database, "table": table.name,
                       "type": op, "isDdl": False, "sql": "", "sqlType": None, "data": None, "old": None,
                       "pkNames": None, **fields})

    for t in stream.tables:
        if t.name in no_pk_names:
            phases[0].append(message(Event("ddl", t.name, at=START - timedelta(seconds=5)), t, "DDL", isDdl=True,
                                     sql=pg_create_table(schema, t)))
    for event, table in stream.walk():
        if event.kind == "add_column":
            assert event.column is not None
            sql = f"ALTER TABLE {schema}.{table.name} ADD COLUMN {event.column.name} {pg_type(event.column)}"
            phases[event.phase].append(message(event, table, "DDL", isDdl=True, sql=sql))
            continue

        def row(image: dict[str, Any] | None) -> dict[str, Any]:
            assert image is not None
            return {c.name: pg_text(c, image.get(c.name)) for c in table.columns}

        op = {"snapshot": "INSERT", "insert": "INSERT", "update": "UPDATE", "delete": "DELETE"}[event.kind]
        phases[event.phase].append(message(
            event, table, op,
            columnType={c.name: pg_type(c) for c in table.columns},
            sqlType={c.name: _PG_SQLTYPE[c.kind] for c in table.columns},
            data=None if event.kind == "delete" else [row(c.after) for c in event.changes],
            old=[row(c.before) for c in event.changes] if event.kind in ("update", "delete") else None,
            pkNames=None if table.name in no_pk_names else list(table.key)))
    return phases


def mongo_shell(value: Any) -> str:
    """Mongo-shell JSON as DRS writes ``value``/``where``: JSON with ``ObjectId("…")`` (``", "``/``": "`` spacing,
    as in the document)."""
    if isinstance(value, ObjectId):
        return f'ObjectId("{value}")'
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k, ensure_ascii=False)}: {mongo_shell(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(mongo_shell(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def encode_drs_mongo(events: list[MongoEvent], *, db: str = "drs_mongo", coll: str = "inventory") -> list[list[str]]:
    """DRS MongoDB JSON (``op``, ``value``/``where`` in mongo-shell syntax, ``recordType``, ``clusterTime``)."""
    phases: list[list[str]] = [[] for _ in range(PHASES)]
    for number, e in enumerate(events):
        es = _ms(e.at)
        where = None
        if e.kind == "insert":
            op, record, value = "INSERT", "insert", mongo_shell(e.doc)
        elif e.kind == "replace":
            op, record, value = "UPDATE", "replace", mongo_shell(e.doc)
            where = mongo_shell({"_id": e.oid})
        elif e.kind == "update":
            patch: dict[str, Any] = {}
            if e.unset:
                patch["$unset"] = {name: True for name in e.unset}
            if e.set:
                patch["$set"] = e.set
            op, record, value = "UPDATE", "update", mongo_shell(patch)
            where = mongo_shell({"_id": e.oid})
        else:
            op, record, value = "DELETE", "doc", mongo_shell({"_id": e.oid})
        phases[e.phase].append(_dumps({
            "id": 256 + number * 3, "op": op, "dbType": "MongoDB", "db": db, "coll": coll, "value": value,
            "where": where, "recordType": record, "extra": record, "es": es, "ts": es + 137,
            "clusterTime": f"{es // 1000}:{e.inc}",
        }))
    return phases


# ---- Tencent CKafka "Official Format I" ---------------------------------------------------------------------------


def encode_ckafka(stream: Stream, *, database: str = "ck_shop", ddl: bool = True) -> list[list[str]]:
    """CKafka Format I DML (all values strings, full ``OLD_VALUES``, one row per message), with the DDL in canal
    format when ``ddl`` (``CREATE DATABASE`` as ``QUERY``, ``CREATE``, ``ALTER``).

    The binlog rotates from ``mysql-bin.000003`` to ``mysql-bin.000004`` before phase 2, so positions restart
    lower: order is the file's sequence number, then ``BINLOG_POS``. The first streamed insert's ``TYPE`` is the
    lower-case ``l`` the document lists for inserts.
    """
    phases: list[list[str]] = [[] for _ in range(PHASES)]
    rng = random.Random(4)
    pos = {"mysql-bin.000003": 154, "mysql-bin.000004": 4}
    lowercase_l_done = False

    def ddl_message(event_at: datetime, table: str, kind: str, sql: str) -> str:
        secs = _ms(event_at) // 1000
        return _dumps({"data": None, "database": database, "es": secs, "id": 0, "isDdl": True, "mysqlType": None,
                       "old": None, "pkNames": None, "sql": sql, "sqlType": None, "table": table, "ts": secs,
                       "type": kind})

    if ddl:
        at = START - timedelta(seconds=10)
        phases[0].append(ddl_message(at, "", "QUERY",
                                     f"CREATE DATABASE `{database}` CHARSET utf8mb4 COLLATE utf8mb4_0900_ai_ci"))
        for t in stream.tables:
            phases[0].append(ddl_message(at, t.name, "CREATE", mysql_create_table(t)))
    for event, table in stream.walk():
        binlog = "mysql-bin.000004" if event.phase == 2 else "mysql-bin.000003"
        if event.kind == "add_column":
            assert event.column is not None
            pos[binlog] += rng.randint(150, 400)
            if ddl:
                phases[event.phase].append(ddl_message(event.at, table.name, "ALTER",
                                                       mysql_add_column(table.name, event.column)))
            continue

        def values(image: dict[str, Any] | None) -> dict[str, Any] | None:
            return None if image is None else {c.name: mysql_text(c, image.get(c.name)) for c in table.columns}

        for change in event.changes:
            pos[binlog] += rng.randint(150, 800)
            kind = {"snapshot": "I", "insert": "I", "update": "U", "delete": "D"}[event.kind]
            if event.kind == "insert" and not lowercase_l_done:
                kind, lowercase_l_done = "l", True
            phases[event.phase].append(_dumps({
                "BINLOG_NAME": binlog, "BINLOG_POS": pos[binlog], "DATABASE": database, "EVENT_SERVER_ID": None,
                "GLOBAL_ID": None, "GROUP_ID": None, "NEW_VALUES": values(change.after),
                "OLD_VALUES": values(change.before), "TABLE": table.name,
                "TIME": event.at.strftime("%Y%m%d%H%M%S"), "TYPE": kind,
            }))
    return phases


# ---- Kafka Connect (Debezium MySQL / SQL Server, dtle) --------------------------------------------------------------


def connect_decimal(value: Decimal, scale: int) -> str:
    """Connect's ``Decimal``: base64 of the unscaled value's big-endian two's complement (minimal bytes)."""
    scaled = Decimal(value).scaleb(scale)
    assert scaled == scaled.to_integral_value(), (value, scale)
    unscaled = int(scaled)
    bits = (unscaled if unscaled >= 0 else -unscaled - 1).bit_length()
    return base64.b64encode(unscaled.to_bytes(bits // 8 + 1, "big", signed=True)).decode("ascii")


def java_iso_instant(value: datetime) -> str:
    """Java ``ISO_OFFSET_DATE_TIME`` (Debezium's ``ZonedTimestamp``): fraction trimmed, ``Z`` for UTC."""
    text = value.strftime("%Y-%m-%dT%H:%M:%S") + _pg_fraction(value)
    offset = value.utcoffset()
    if not offset:
        return text + "Z"
    minutes = int(offset.total_seconds()) // 60
    sign = "+" if minutes >= 0 else "-"
    return f"{text}{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


@dataclass(frozen=True)
class ConnectDialect:
    """How one connector maps column kinds to Kafka Connect schemas and values."""

    datetime_logical: str = "io.debezium.time.Timestamp"
    zone: timezone = UTC

    def field(self, col: Col) -> dict[str, Any]:
        """A column's schema inside a struct's ``fields``."""
        spec: dict[str, Any]
        if col.kind == "int":
            spec = {"type": "int32"}
        elif col.kind == "bigint":
            spec = {"type": "int64"}
        elif col.kind == "decimal":
            spec = {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "version": 1,
                    "parameters": {"scale": str(col.scale), "connect.decimal.precision": str(col.precision)}}
        elif col.kind in ("varchar", "text"):
            spec = {"type": "string"}
        elif col.kind == "datetime":
            spec = {"type": "int64", "name": self.datetime_logical, "version": 1}
        elif col.kind == "timestamp":
            spec = {"type": "string", "name": "io.debezium.time.ZonedTimestamp", "version": 1}
        elif col.kind == "date":
            spec = {"type": "int32", "name": "io.debezium.time.Date", "version": 1}
        elif col.kind == "double":
            spec = {"type": "double"}
        elif col.kind == "varbinary":
            spec = {"type": "bytes"}
        else:
            raise ValueError(col.kind)
        return {**spec, "optional": col.nullable, "field": col.name}

    def value(self, col: Col, value: Any) -> Any:
        """A value in the JSON converter's physical form."""
        if value is None:
            return None
        if col.kind == "decimal":
            return connect_decimal(value, col.scale)
        if col.kind == "datetime":
            if self.datetime_logical == "io.debezium.time.MicroTimestamp":
                return (value - EPOCH) // timedelta(microseconds=1)
            return _ms(value)
        if col.kind == "timestamp":
            return java_iso_instant(value.astimezone(self.zone))
        if col.kind == "date":
            return (value - EPOCH_DATE).days
        if col.kind == "varbinary":
            return base64.b64encode(value).decode("ascii")
        return value

    def row(self, table: TableDef, image: dict[str, Any] | None) -> dict[str, Any] | None:
        return None if image is None else {c.name: self.value(c, image.get(c.name)) for c in table.columns}

    def key(self, table: TableDef, image: dict[str, Any]) -> dict[str, Any]:
        return {k: self.value(table.col(k), image[k]) for k in table.key}

    def key_schema(self, table: TableDef, topic: str) -> dict[str, Any]:
        return {"type": "struct", "fields": [self.field(table.col(k)) for k in table.key], "optional": False,
                "name": f"{topic}.Key"}

    def value_schema(self, table: TableDef, topic: str, source: dict[str, Any], *,
                     transaction: bool) -> dict[str, Any]:
        row = {"type": "struct", "fields": [self.field(c) for c in table.columns], "optional": True,
               "name": f"{topic}.Value"}
        fields = [{**row, "field": "before"}, {**row, "field": "after"}, source,
                  {"type": "string", "optional": False, "field": "op"},
                  {"type": "int64", "optional": True, "field": "ts_ms"}]
        if transaction:
            fields.append({"type": "struct", "fields": [
                {"type": "string", "optional": False, "field": "id"},
                {"type": "int64", "optional": False, "field": "total_order"},
                {"type": "int64", "optional": False, "field": "data_collection_order"}],
                "optional": True, "name": "event.block", "version": 1, "field": "transaction"})
        return {"type": "struct", "fields": fields, "optional": False, "name": f"{topic}.Envelope", "version": 1}


def _src_field(column: str, ftype: str, optional: bool, **extra: Any) -> dict[str, Any]:
    return {"type": ftype, "optional": optional, **extra, "field": column}


_MYSQL_SOURCE_SCHEMA = {
    "type": "struct",
    "fields": [
        _src_field("version", "string", False), _src_field("connector", "string", False),
        _src_field("name", "string", False), _src_field("ts_ms", "int64", False),
        _src_field("snapshot", "string", True, name="io.debezium.data.Enum", version=1,
                   parameters={"allowed": "true,last,false,incremental"}, default="false"),
        _src_field("db", "string", False), _src_field("sequence", "string", True),
        _src_field("table", "string", True), _src_field("server_id", "int64", False),
        _src_field("gtid", "string", True), _src_field("file", "string", False),
        _src_field("pos", "int64", False), _src_field("row", "int32", False),
        _src_field("thread", "int64", True), _src_field("query", "string", True),
    ],
    "optional": False, "name": "io.debezium.connector.mysql.Source", "field": "source",
}
_DTLE_SOURCE_SCHEMA = {
    "type": "struct",
    "fields": [
        _src_field("version", "string", True), _src_field("name", "string", False),
        _src_field("server_id", "int64", False), _src_field("ts_sec", "int64", False),
        _src_field("gtid", "string", True), _src_field("file", "string", False),
        _src_field("pos", "int64", False), _src_field("row", "int32", False),
        _src_field("snapshot", "boolean", True), _src_field("thread", "int64", True),
        _src_field("db", "string", True), _src_field("table", "string", True),
    ],
    "optional": False, "name": "io.debezium.connector.mysql.Source", "field": "source",
}
_SQLSERVER_SOURCE_SCHEMA = {
    "type": "struct",
    "fields": [
        _src_field("version", "string", False), _src_field("connector", "string", False),
        _src_field("name", "string", False), _src_field("ts_ms", "int64", False),
        _src_field("snapshot", "string", True, name="io.debezium.data.Enum", version=1,
                   parameters={"allowed": "true,last,false,incremental"}, default="false"),
        _src_field("db", "string", False), _src_field("sequence", "string", True),
        _src_field("schema", "string", False), _src_field("table", "string", False),
        _src_field("change_lsn", "string", True), _src_field("commit_lsn", "string", True),
        _src_field("event_serial_no", "int64", True),
    ],
    "optional": False, "name": "io.debezium.connector.sqlserver.Source", "field": "source",
}


class _Kafka:
    """kcat -C -J lines, with per-topic offsets and a never-decreasing CreateTime."""

    def __init__(self) -> None:
        self.offsets: dict[str, int] = {}
        self.last_ts = 0

    def line(self, topic: str, key: Any, value: Any, ts: int, headers: list[str] | None = None) -> str:
        offset = self.offsets.get(topic, 0)
        self.offsets[topic] = offset + 1
        self.last_ts = max(self.last_ts, ts)
        return _dumps({"topic": topic, "partition": 0, "offset": offset, "tstype": "create", "ts": self.last_ts,
                       "broker": 1, "headers": headers,
                       "key": None if key is None else _dumps(key),
                       "payload": None if value is None else _dumps(value)})


@dataclass
class _Binlog:
    """A MySQL binlog position that rotates to the next file before phase 2."""

    rng: random.Random
    seq: int = 3
    pos: int = 154

    def file(self) -> str:
        return f"mysql-bin.{self.seq:06d}"

    def advance(self, phase: int) -> None:
        if phase == 2 and self.seq == 3:
            self.seq, self.pos = 4, 4
        self.pos += self.rng.randint(150, 800)


def _mysql_snapshot_markers(n: int) -> list[str]:
    return ["first" if i == 0 else "last" if i == n - 1 else "true" for i in range(n)]


def encode_debezium_mysql(stream: Stream, *, database: str = "dbz_shop", server: str = "dbserver1",
                          dtle: bool = False) -> list[list[str]]:
    """Debezium MySQL connector events as ``kcat -J`` lines (or, with ``dtle``, dtle's Debezium-compatible ones).

    Debezium 2.x: snapshot reads are ``op: r`` with ``snapshot`` first/true/last; a delete is followed by a
    tombstone; a primary-key change is a delete of the old key (header ``__debezium.newkey``), its tombstone and a
    create of the new key (header ``__debezium.oldkey``), all at the update's binlog position.

    dtle: the document's older source block (``ts_sec``, ``snapshot`` boolean); the initial copy is ``op: c`` with
    ``snapshot: true``; no tombstones; table DDL on the SchemaChangeTopic (key null): each table's ``CREATE TABLE``
    before the copy and the ``ALTER TABLE`` where it happened.

    Rows of one multi-row statement share the binlog position and differ in ``row``.
    """
    phases: list[list[str]] = [[] for _ in range(PHASES)]
    dialect = ConnectDialect()
    kafka = _Kafka()
    binlog = _Binlog(random.Random(5))
    source_schema = _DTLE_SOURCE_SCHEMA if dtle else _MYSQL_SOURCE_SCHEMA
    schema_topic = "dtle-schema-changes"
    gtid_uuid = "acd7d195-06cd-11e9-928f-02000aba3e28"
    snapshot_total = sum(len(e.changes) for e in stream.events if e.kind == "snapshot")
    markers = iter(_mysql_snapshot_markers(snapshot_total))

    def schema_change(at: datetime, sql: str, snapshot: bool, table: TableDef | None) -> str:
        secs = _ms(at) // 1000
        value: dict[str, Any] = {
            "source": {"server": server},
            "position": {"ts_sec": secs, "file": binlog.file(), "pos": binlog.pos,
                         "gtids": f"{gtid_uuid}:1-{170 + binlog.pos % 97}", "snapshot": snapshot},
            "databaseName": database,
            "ddl": sql,
            "tableChanges": [],
        }
        if table is not None:
            value["tableChanges"] = [{
                "type": "CREATE", "id": f'"{database}"."{table.name}"',
                "table": {"defaultCharsetName": "utf8mb4", "primaryKeyColumnNames": list(table.key),
                          "columns": [{"name": c.name, "jdbcType": _JDBC[c.kind], "typeName": c.kind.upper(),
                                       "typeExpression": c.kind.upper(), "charsetName": None, "length": None,
                                       "position": i + 1, "optional": c.nullable, "autoIncremented": False,
                                       "generated": False} for i, c in enumerate(table.columns)]},
            }]
        return kafka.line(schema_topic, None, value, _ms(at) + 5)

    if dtle:
        for t in stream.tables:
            phases[0].append(schema_change(START - timedelta(seconds=3), mysql_create_table(t), True, t))
    snapshot_pos = binlog.pos
    for event, table in stream.walk():
        if event.kind == "add_column":
            binlog.advance(event.phase)
            assert event.column is not None
            if dtle:
                phases[event.phase].append(
                    schema_change(event.at, mysql_add_column(table.name, event.column), False, None))
            continue
        topic = f"{server}.{database}.{table.name}"
        if event.kind != "snapshot":
            binlog.advance(event.phase)
        commit_ms = _ms(event.at)
        for row_number, change in enumerate(event.changes):
            processed = commit_ms + 150 + row_number

            def source(snapshot: Any) -> dict[str, Any]:
                common = {"file": binlog.file(), "pos": snapshot_pos if event.kind == "snapshot" else binlog.pos,
                          "row": 0 if event.kind == "snapshot" else row_number}
                gtid = None if event.kind == "snapshot" else f"{gtid_uuid}:{200 + event.txn}"
                if dtle:
                    return {"version": "0.8.3.Final", "name": server, "server_id": 1,
                            "ts_sec": 0 if event.kind == "snapshot" else commit_ms // 1000, "gtid": gtid,
                            **common, "snapshot": snapshot, "thread": None if event.kind == "snapshot" else 7,
                            "db": database, "table": table.name}
                return {"version": "2.5.0.Final", "connector": "mysql", "name": server, "ts_ms": commit_ms,
                        "snapshot": snapshot, "db": database, "sequence": None, "table": table.name,
                        "server_id": 0 if event.kind == "snapshot" else 223344, "gtid": gtid, **common,
                        "thread": None if event.kind == "snapshot" else 7, "query": None}

            def envelope(op: str, before: dict[str, Any] | None, after: dict[str, Any] | None,
                         snapshot: Any) -> dict[str, Any]:
                payload: dict[str, Any] = {"before": dialect.row(table, before), "after": dialect.row(table, after),
                                           "source": source(snapshot), "op": op, "ts_ms": processed}
                if not dtle:
                    payload["transaction"] = None
                return {"schema": dialect.value_schema(table, topic, source_schema, transaction=not dtle),
                        "payload": payload}

            def key(image: dict[str, Any]) -> dict[str, Any]:
                return {"schema": dialect.key_schema(table, topic), "payload": dialect.key(table, image)}

            out = phases[event.phase]
            streamed: Any = False if dtle else "false"
            if event.kind == "snapshot":
                if dtle:
                    out.append(kafka.line(topic, key(change.after), envelope("c", None, change.after, True),
                                          processed))
                else:
                    out.append(kafka.line(topic, key(change.after), envelope("r", None, change.after, next(markers)),
                                          processed))
            elif event.kind == "insert":
                out.append(kafka.line(topic, key(change.after), envelope("c", None, change.after, streamed),
                                      processed))
            elif event.kind == "delete":
                out.append(kafka.line(topic, key(change.before), envelope("d", change.before, None, streamed),
                                      processed))
                if not dtle:
                    out.append(kafka.line(topic, key(change.before), None, processed))
            else:
                assert change.before is not None and change.after is not None
                old_key, new_key = key(change.before), key(change.after)
                if old_key["payload"] == new_key["payload"]:
                    out.append(kafka.line(topic, new_key, envelope("u", change.before, change.after, streamed),
                                          processed))
                else:
                    out.append(kafka.line(topic, old_key, envelope("d", change.before, None, streamed), processed,
                                          ["__debezium.newkey", _dumps(new_key)]))
                    if not dtle:
                        out.append(kafka.line(topic, old_key, None, processed))
                    out.append(kafka.line(topic, new_key, envelope("c", None, change.after, streamed), processed,
                                          ["__debezium.oldkey", _dumps(old_key)]))
    return phases


def encode_dtle(stream: Stream, *, database: str = "dtle_shop") -> list[list[str]]:
    """dtle's Kafka output (see :func:`encode_debezium_mysql`)."""
    return encode_debezium_mysql(stream, database=database, server="dtle_server", dtle=True)


def _lsn(a: int, b: int, c: int) -> str:
    return f"{a:08x}:{b:08x}:{c:04x}"


def encode_debezium_sqlserver(stream: Stream, *, database: str = "testDB", schema: str = "dbo",
                              server: str = "server1") -> list[list[str]]:
    """Debezium SQL Server connector events as ``kcat -J`` lines.

    ``datetime2(6)`` columns are ``MicroTimestamp``, ``datetimeoffset`` ``ZonedTimestamp`` written at +01:00.
    Snapshot reads: ``op: r``, ``commit_lsn`` of the snapshot, no ``change_lsn``. Streamed: one ``commit_lsn`` per
    transaction, one ``change_lsn`` per row; ``event_serial_no`` 1, or 2 for updates (the document); a
    primary-key change is a delete (serial 1) and a create (serial 2) at the same LSNs.
    """
    phases: list[list[str]] = [[] for _ in range(PHASES)]
    dialect = ConnectDialect(datetime_logical="io.debezium.time.MicroTimestamp", zone=timezone(timedelta(hours=1)))
    kafka = _Kafka()
    snapshot_lsn = _lsn(0x27, 0x758, 0x3)
    snapshot_total = sum(len(e.changes) for e in stream.events if e.kind == "snapshot")
    snapshot_seen = 0
    block, change_no, current_txn = 0x800, 0, -1
    for event, table in stream.walk():
        if event.kind == "add_column":
            continue  # SQL Server's change events simply carry the new column from then on
        topic = f"{server}.{database}.{schema}.{table.name}"
        commit_ms = _ms(event.at)
        for row_change in event.changes:
            processed = commit_ms + 310

            def source(snapshot: str, change_lsn: str | None, commit_lsn: str, serial: int | None) -> dict[str, Any]:
                return {"version": "2.5.0.Final", "connector": "sqlserver", "name": server, "ts_ms": commit_ms,
                        "snapshot": snapshot, "db": database, "sequence": None, "schema": schema,
                        "table": table.name, "change_lsn": change_lsn, "commit_lsn": commit_lsn,
                        "event_serial_no": serial}

            def envelope(op: str, before: dict[str, Any] | None, after: dict[str, Any] | None,
                         src: dict[str, Any]) -> dict[str, Any]:
                return {"schema": dialect.value_schema(table, topic, _SQLSERVER_SOURCE_SCHEMA, transaction=True),
                        "payload": {"before": dialect.row(table, before), "after": dialect.row(table, after),
                                    "source": src, "op": op, "ts_ms": processed, "transaction": None}}

            def key(image: dict[str, Any]) -> dict[str, Any]:
                return {"schema": dialect.key_schema(table, topic), "payload": dialect.key(table, image)}

            out = phases[event.phase]
            if event.kind == "snapshot":
                snapshot_seen += 1
                marker = "last" if snapshot_seen == snapshot_total else "true"
                src = source(marker, None, snapshot_lsn, None)
                out.append(kafka.line(topic, key(row_change.after), envelope("r", None, row_change.after, src),
                                      processed))
                continue
            if event.txn != current_txn:  # a new transaction: later commit LSN, change LSNs below it
                block, change_no, current_txn = block + 0x100, 0, event.txn
            change_no += 1
            change_lsn = _lsn(0x27, block + change_no, 0x3)
            commit_lsn = _lsn(0x27, block + 0xF0, 0x5)
            if event.kind == "insert":
                out.append(kafka.line(topic, key(row_change.after),
                                      envelope("c", None, row_change.after, source("false", change_lsn, commit_lsn, 1)),
                                      processed))
            elif event.kind == "delete":
                out.append(kafka.line(topic, key(row_change.before),
                                      envelope("d", row_change.before, None,
                                               source("false", change_lsn, commit_lsn, 1)), processed))
                out.append(kafka.line(topic, key(row_change.before), None, processed))
            else:
                assert row_change.before is not None and row_change.after is not None
                old_key, new_key = key(row_change.before), key(row_change.after)
                if old_key["payload"] == new_key["payload"]:
                    out.append(kafka.line(topic, new_key,
                                          envelope("u", row_change.before, row_change.after,
                                                   source("false", change_lsn, commit_lsn, 2)), processed))
                else:
                    out.append(kafka.line(topic, old_key,
                                          envelope("d", row_change.before, None,
                                                   source("false", change_lsn, commit_lsn, 1)), processed))
                    out.append(kafka.line(topic, old_key, None, processed))
                    out.append(kafka.line(topic, new_key,
                                          envelope("c", None, row_change.after,
                                                   source("false", change_lsn, commit_lsn, 2)), processed))
    return phases


# ---- variants -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Variant:
    """One format variant: how to encode the source and what the lake must hold afterwards.

    Attributes:
        name: Test id.
        fmt: ``cdclake apply --format``.
        encode: -> per-phase message lines.
        expected: -> ``{table id: rows}`` (the oracle).
        keys: ``--key`` declarations the stream needs.
        documents: Tables of ``(_id, document)`` rows whose ``document`` is JSON text to compare parsed.
    """

    name: str
    fmt: str
    encode: Callable[[], list[list[str]]]
    expected: Callable[[], dict[str, list[dict[str, Any]]]]
    keys: tuple[str, ...] = ()
    documents: bool = False

    def write(self, directory: Path, *, files: int = 2) -> list[Path]:
        """Write the variant's micro-batch files (``<name>-<n>.jsonl``) and return them in order."""
        directory.mkdir(parents=True, exist_ok=True)
        paths = []
        for number, lines in enumerate(_split_phases(self.encode(), files), start=1):
            path = directory / f"{self.name}-{number}.jsonl"
            path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
            paths.append(path)
        return paths


def _variants() -> dict[str, Variant]:
    stream = relational_stream()
    no_binary = stream.without_columns({"avatar"})
    mongo = mongo_stream()
    variants = [
        Variant("canal", "canal", lambda: encode_canal(stream, database="canal_shop"),
                lambda: expected_tables(stream, "canal_shop")),
        Variant("drs_mysql", "drs", lambda: encode_drs_mysql(stream, database="DRS-Shop"),
                lambda: expected_tables(stream, "drs_shop")),
        Variant("drs_gaussdb", "drs", lambda: encode_drs_relational(stream, database="drs_pg", schema="sales"),
                lambda: expected_tables(stream, "sales")),
        Variant("drs_mongo", "drs", lambda: encode_drs_mongo(mongo, db="drs_mongo", coll="inventory"),
                lambda: expected_documents(mongo, "drs_mongo.inventory"), documents=True),
        # CKafka's document does not say how binary values are written, so its streams have no binary column.
        Variant("ckafka_ddl", "ckafka", lambda: encode_ckafka(no_binary, database="ck_shop", ddl=True),
                lambda: expected_tables(no_binary, "ck_shop")),
        Variant("ckafka_nokey", "ckafka", lambda: encode_ckafka(no_binary, database="ck_raw", ddl=False),
                lambda: expected_tables(no_binary, "ck_raw", strings=True),
                keys=("ck_raw.customers=id", "ck_raw.orders=order_id,line_no")),
        Variant("dtle", "dtle", lambda: encode_dtle(stream, database="dtle_shop"),
                lambda: expected_tables(stream, "dtle_shop")),
        Variant("debezium_mysql", "debezium", lambda: encode_debezium_mysql(stream, database="dbz_shop"),
                lambda: expected_tables(stream, "dbz_shop")),
        Variant("debezium_sqlserver", "debezium", lambda: encode_debezium_sqlserver(stream, schema="dbo"),
                lambda: expected_tables(stream, "dbo")),
    ]
    return {v.name: v for v in variants}


VARIANTS: dict[str, Variant] = _variants()
"""Every format variant by test id. Their table ids are disjoint, so several can share one lake."""
