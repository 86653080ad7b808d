"""A simulated PostgreSQL table behind Debezium, and a plain-Python reference applier, for the apply property tests.

Nothing here imports cdclake: the product is compared with this model, never with itself.

* :func:`simulate` runs logical operations (insert, update, delete, primary-key change, truncate, re-snapshot,
  a column added) against an in-memory table and records the change events Debezium's PostgreSQL connector would
  emit: one LSN per event, snapshot rows sharing the snapshot's LSN, ``before`` with keys only (REPLICA IDENTITY
  DEFAULT), the unchanged-TOAST placeholder for ``note`` in some updates, a Kafka tombstone after each delete.
  It also returns the table's true final content.
* :func:`encode` renders events as ``kcat -J`` lines with the JSON converter's schema envelope;
  :func:`encode_canal_batch` renders the same stream as canal flat messages (MySQL behind canal), the rows of one
  statement in one message (:func:`canal_messages`).
* :func:`reference_apply` defines cdclake's apply semantics sequentially over micro-batches in arrival order:
  per-key high-water mark by position ``(lsn, batch, index)``, tombstones, truncate and snapshot-end cuts, TOAST
  placeholders keeping the stored value, hard or soft deletes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any, Iterable

PLACEHOLDER = "__debezium_unavailable_value"
COLUMNS = ("name", "qty", "note")
EXTRA = "extra"
SNAPSHOT_END = ("last", "last_in_data_collection")


@dataclass(frozen=True)
class Event:
    """One Debezium change event of the simulated table."""

    lsn: int
    op: str
    key: int | None
    after: dict[str, Any] | None = None
    snapshot: str | None = None
    toast: bool = False
    with_extra: bool = False
    row: int = 0
    """Its index in its canal message's ``data`` (:func:`canal_messages`); 0 starts a message."""

    def to_json(self) -> dict[str, Any]:
        return {"lsn": self.lsn, "op": self.op, "key": self.key, "after": self.after, "snapshot": self.snapshot,
                "toast": self.toast, "with_extra": self.with_extra, "row": self.row}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Event":
        return cls(**data)


@dataclass
class _Db:
    rows: dict[int, dict[str, Any]] = field(default_factory=dict)
    lsn: int = 1000
    has_extra: bool = False
    events: list[Event] = field(default_factory=list)
    counter: int = 0

    def next_lsn(self) -> int:
        self.lsn += 8
        return self.lsn

    def values(self, fresh_note: bool = True, old: dict[str, Any] | None = None) -> dict[str, Any]:
        self.counter += 1
        n = self.counter
        row = {"name": f"n{n}", "qty": n % 7 if n % 5 else None,
               "note": (f"note-{n}" if fresh_note or old is None else old["note"])}
        if self.has_extra:
            row[EXTRA] = n * 1000
        return row

    def emit(self, op: str, key: int | None, after: dict[str, Any] | None, **kw: Any) -> None:
        self.events.append(Event(self.next_lsn(), op, key, after, with_extra=self.has_extra, **kw))


def simulate(actions: Iterable[tuple[Any, ...]]) -> tuple[list[Event], dict[int, dict[str, Any]]]:
    """Run logical operations; return the emitted events (source order) and the table's true final rows.

    Actions: ``("upsert", key)``, ``("update", key, keep_note)``, ``("delete", key)``, ``("rekey", key, new)``,
    ``("truncate",)``, ``("snapshot", style)`` (style 0: first/true/last, 1: with ``*_in_data_collection``),
    ``("add_column",)``. An action that does not apply to the current rows becomes the nearest one that does.
    """
    db = _Db()
    for action in actions:
        kind = action[0]
        if kind in ("upsert", "update"):
            key = action[1]
            if key not in db.rows:
                db.rows[key] = db.values()
                db.emit("c", key, dict(db.rows[key]))
                continue
            keep_note = kind == "update" and action[2]
            db.rows[key] = db.values(fresh_note=not keep_note, old=db.rows[key])
            after = dict(db.rows[key])
            if keep_note:
                after["note"] = PLACEHOLDER
            db.emit("u", key, after, toast=keep_note)
        elif kind == "delete":
            key = action[1]
            if key in db.rows:
                del db.rows[key]
                db.emit("d", key, None)
        elif kind == "rekey":
            key, new = action[1], action[2]
            if key in db.rows and new not in db.rows:
                db.rows[new] = db.rows.pop(key)
                db.emit("d", key, None)
                db.emit("c", new, dict(db.rows[new]))
        elif kind == "truncate":
            db.rows.clear()
            db.emit("t", None, None)
        elif kind == "snapshot":
            if not db.rows:
                continue
            s = db.next_lsn()
            keys = sorted(db.rows)
            for i, key in enumerate(keys):
                marker = "true"
                if i == 0:
                    marker = "first" if action[1] == 0 else "first_in_data_collection"
                if i == len(keys) - 1:
                    marker = "last" if action[1] == 0 else "last_in_data_collection"
                db.events.append(Event(s, "r", key, dict(db.rows[key]), snapshot=marker, with_extra=db.has_extra))
        elif kind == "add_column":
            if not db.has_extra:
                db.has_extra = True
                for row in db.rows.values():
                    row[EXTRA] = None
        else:
            raise ValueError(f"unknown action {action!r}")
    for row in db.rows.values():
        row.setdefault(EXTRA, None)
    return db.events, db.rows


# ---- encoding -------------------------------------------------------------------------------------------------------

def _fields(with_extra: bool) -> list[dict[str, Any]]:
    fields = [{"type": "int32", "optional": False, "field": "id"},
              {"type": "string", "optional": True, "field": "name"},
              {"type": "int32", "optional": True, "field": "qty"},
              {"type": "string", "optional": True, "field": "note"}]
    if with_extra:
        fields.append({"type": "int64", "optional": True, "field": EXTRA})
    return fields


_SOURCE = {"type": "struct", "optional": False, "name": "io.debezium.connector.postgresql.Source", "field": "source",
           "fields": [{"type": "string", "optional": False, "field": "version"},
                      {"type": "string", "optional": False, "field": "connector"},
                      {"type": "string", "optional": False, "field": "name"},
                      {"type": "int64", "optional": False, "field": "ts_ms"},
                      {"type": "string", "optional": True, "field": "snapshot"},
                      {"type": "string", "optional": False, "field": "db"},
                      {"type": "string", "optional": False, "field": "schema"},
                      {"type": "string", "optional": False, "field": "table"},
                      {"type": "int64", "optional": True, "field": "txId"},
                      {"type": "int64", "optional": True, "field": "lsn"}]}


def encode(event: Event, *, schema: str, table: str, offset: int) -> list[str]:
    """The ``kcat -J`` line(s) of one event: the change, plus a tombstone after a delete."""
    topic = f"srv.{schema}.{table}"
    row = {"type": "struct", "optional": True, "name": f"{topic}.Value", "fields": _fields(event.with_extra)}
    envelope = {"type": "struct", "optional": False, "name": f"{topic}.Envelope", "fields": [
        {**row, "field": "before"}, {**row, "field": "after"}, _SOURCE,
        {"type": "string", "optional": False, "field": "op"}, {"type": "int64", "optional": True, "field": "ts_ms"}]}
    ts = 1_700_000_000_000 + event.lsn
    source = {"version": "2.7.0.Final", "connector": "postgresql", "name": "srv", "ts_ms": ts,
              "snapshot": event.snapshot or "false", "db": "shop", "schema": schema, "table": table,
              "txId": event.lsn // 8, "lsn": event.lsn}
    after = None if event.after is None else {"id": event.key, **event.after}
    before = {"id": event.key, "name": None, "qty": None, "note": None} if event.op == "d" else None
    if before is not None and event.with_extra:
        before[EXTRA] = None
    payload = {"before": before, "after": after, "source": source, "op": event.op, "ts_ms": ts + 3}
    key = None
    if event.key is not None:
        key = json.dumps({"schema": {"type": "struct", "optional": False, "name": f"{topic}.Key",
                                     "fields": [{"type": "int32", "optional": False, "field": "id"}]},
                          "payload": {"id": event.key}})
    lines = [json.dumps({"topic": topic, "partition": 0, "offset": offset, "ts": ts, "key": key,
                         "payload": json.dumps({"schema": envelope, "payload": payload})})]
    if event.op == "d":
        lines.append(json.dumps({"topic": topic, "partition": 0, "offset": offset + 1, "ts": ts, "key": key,
                                 "payload": None}))
    return lines


def row_images(events: Iterable[Event]) -> dict[int, dict[str, Any]]:
    """The row each event of a source-ordered stream found (LSN -> values; absent for an insert): what a canal
    UPDATE's ``old`` and a DELETE's ``data`` are made from. An unchanged-TOAST ``note`` is the row's own value."""
    rows: dict[int, dict[str, Any]] = {}
    found: dict[int, dict[str, Any]] = {}
    for e in events:
        if e.op == "t":
            rows.clear()
            continue
        if e.key is None:
            continue
        if e.key in rows:
            found[e.lsn] = dict(rows[e.key])
        if e.op == "d":
            rows.pop(e.key, None)
        elif e.after is not None:
            after = dict(e.after)
            if e.toast:
                after["note"] = rows.get(e.key, {}).get("note")
            rows[e.key] = after
    return found


_CANAL_TYPES = {"id": ("int", 4), "name": ("varchar(20)", 12), "qty": ("int", 4), "note": ("text", 2005),
                EXTRA: ("bigint", -5)}


def encode_canal(message: list[Event], *, database: str, table: str, found: dict[int, dict[str, Any]]) -> str:
    """One canal flat message (a JSON line) of events that share it: the rows of one INSERT or DELETE statement, one
    UPDATE, or a TRUNCATE. Its ``es`` and ``id`` come from the first event's LSN, so its rows are ordered by their
    index in ``data``. An update with the unchanged-TOAST placeholder becomes canal's partial image
    (``binlog_row_image=NOBLOB``): ``note`` is left out of ``data`` and ``mysqlType``. ``found``:
    :func:`row_images` of the whole stream."""
    first = message[0]
    es = 1_700_000_000_000 + first.lsn
    common = {"database": database, "table": table, "es": es, "id": first.lsn, "ts": es + 3}
    if first.op == "t":
        return json.dumps({**common, "data": None, "old": None, "isDdl": True, "type": "TRUNCATE",
                           "sql": f"TRUNCATE TABLE `{table}`", "mysqlType": None, "sqlType": None, "pkNames": None})
    columns = ["id", *COLUMNS, *([EXTRA] if first.with_extra else [])]
    if first.toast:
        columns.remove("note")

    types = {"mysqlType": {c: _CANAL_TYPES[c][0] for c in columns},
             "sqlType": {c: _CANAL_TYPES[c][1] for c in columns}, "pkNames": ["id"]}

    def text(value: Any) -> str | None:
        return None if value is None else str(value)

    if [e.op for e in message] == ["d", "c"]:
        # A primary-key change: canal's `old` holds the old key, the only column the statement changed.
        image = {"id": message[1].key, **(message[1].after or {})}
        return json.dumps({**common, **types, "data": [{c: text(image.get(c)) for c in columns}],
                           "old": [{"id": text(message[0].key)}], "isDdl": False, "type": "UPDATE", "sql": ""})
    data, old = [], []
    for e in message:
        image = {"id": e.key, **(found[e.lsn] if e.op == "d" else (e.after or {}))}
        data.append({c: text(image.get(c)) for c in columns})
        if e.op == "u":
            before = {"id": e.key, **found[e.lsn]}
            old.append({c: text(before.get(c)) for c in columns if before.get(c) != image.get(c)})
    kind = {"c": "INSERT", "u": "UPDATE", "d": "DELETE"}[first.op]
    return json.dumps({**common, **types, "data": data, "old": old or None, "isDdl": False, "type": kind, "sql": ""})


def canal_messages(events: list[Event], most: int = 3) -> list[list[Event]]:
    """Cut a source-ordered stream into canal messages: runs of up to ``most`` inserts or deletes (of one schema)
    share a message, as the rows of one statement do; an update and a truncate have one each. Each event gets its
    ``row`` index in its message."""
    found = row_images(events)
    out: list[list[Event]] = []
    for e in events:
        last = out[-1] if out else None
        if (last is not None and e.op in ("c", "d") and all(x.op == e.op for x in last) and len(last) < most
                and last[0].with_extra == e.with_extra):
            last.append(replace(e, row=len(last)))
        elif last is not None and _moves(last, e, found):
            last.append(replace(e, row=1))
        else:
            out.append([replace(e, row=0)])
    return out


def _moves(message: list[Event], e: Event, found: dict[int, dict[str, Any]]) -> bool:
    """``e`` inserts the row the message's only delete removed, just after it: a primary-key change, which canal
    writes as one UPDATE."""
    d = message[0]
    return (len(message) == 1 and d.op == "d" and e.op == "c" and e.lsn == d.lsn + 8
            and e.with_extra == d.with_extra and e.after is not None
            and all(e.after.get(c) == found[d.lsn].get(c) for c in (*COLUMNS, EXTRA)))


def encode_canal_batch(events: list[Event], *, database: str, table: str, found: dict[int, dict[str, Any]]) -> str:
    """A batch's JSON Lines: its events are whole messages (each starts at ``row`` 0), in delivery order."""
    messages: list[list[Event]] = []
    for e in events:
        if e.row == 0 or not messages:
            messages.append([e])
        else:
            messages[-1].append(e)
    return "".join(encode_canal(m, database=database, table=table, found=found) + "\n" for m in messages)


# ---- reference applier ---------------------------------------------------------------------------------------------

Position = tuple[int, int, int]


@dataclass(frozen=True)
class Version:
    """One SCD type 2 version of a row: its values, and how it ended (None while current)."""

    values: dict[str, Any]
    closed: str | None = None


@dataclass
class StoredRow:
    position: Position
    values: dict[str, Any]
    deleted: bool = False
    op: str = ""
    """The op of the change that wrote the row."""


@dataclass
class Reference:
    """cdclake's apply semantics, one change at a time, over batches in arrival order."""

    soft: bool = False
    rows: dict[int, StoredRow] = field(default_factory=dict)
    tombs: dict[int, Position] = field(default_factory=dict)
    cut: Position | None = None
    versions: dict[int, list[Version]] = field(default_factory=dict)
    """SCD type 2: per key, its row versions in order (opened by an applied insert/update; closed by the key's
    next applied change, its delete, or a cut that removes the row)."""
    changelog: dict[int, list[str]] = field(default_factory=dict)
    """Per key, the action of every applied change in order: ``insert``/``update`` (no live row before / one),
    ``delete``/``noop`` (a live row went / there was none)."""

    def _close(self, key: int, pos: Position, how: str) -> None:
        history = self.versions.get(key)
        if history and history[-1].closed is None:
            history[-1] = replace(history[-1], closed=how)

    def start_history(self) -> None:
        """History turned on now: every live row is one open version; what came before is not kept."""
        self.versions = {k: [Version(dict(r.values))] for k, r in self.rows.items() if not r.deleted}

    def apply_batch(self, seq: int, events: list[Event]) -> None:
        """Apply one micro-batch; ``seq`` is its landing order (the tie-breaker after the LSN)."""
        positioned = [((e.lsn, seq, i), e) for i, e in enumerate(events)]
        cuts = [p for p, e in positioned if e.op == "t"]
        cuts += [(e.lsn, -1, -1) for _, e in positioned if e.snapshot in SNAPSHOT_END]
        cut = max(cuts, default=None)
        if cut is not None and (self.cut is None or cut > self.cut):
            for key, row in list(self.rows.items()):
                if row.position < cut and not row.deleted:
                    self._close(key, cut, "ended")
                    if self.soft:
                        self.rows[key] = StoredRow(cut, row.values, deleted=True)
                    else:
                        del self.rows[key]
            self.cut = cut
        for pos, e in sorted((pe for pe in positioned if pe[1].op != "t"), key=lambda pe: pe[0]):
            self._change(pos, e)

    def _change(self, pos: Position, e: Event) -> None:
        assert e.key is not None
        if self.cut is not None and pos <= self.cut:
            return
        stored = self.rows.get(e.key)
        if stored is None:
            tomb = self.tombs.get(e.key)
            if tomb is not None and (pos <= tomb or (e.op == "d" and pos[0] == tomb[0])):
                return  # older than the key's delete, or that delete delivered again
        elif pos <= stored.position or self._again(stored, pos, e):
            return
        was_live = stored is not None and not stored.deleted
        self.changelog.setdefault(e.key, []).append(
            ("delete" if was_live else "noop") if e.op == "d" else ("update" if was_live else "insert"))
        if e.op == "d":
            self._close(e.key, pos, "ended")
            if self.soft:
                values = stored.values if stored is not None else {c: None for c in (*COLUMNS, EXTRA)}
                self.rows[e.key] = StoredRow(pos, values, deleted=True)
            else:
                self.rows.pop(e.key, None)
                self.tombs[e.key] = max(pos, self.tombs.get(e.key, pos))
            return
        assert e.after is not None
        values = {c: e.after.get(c) for c in (*COLUMNS, EXTRA)}
        if e.toast:
            values["note"] = stored.values.get("note") if stored is not None else None
        self.rows[e.key] = StoredRow(pos, values, op=e.op)
        self._close(e.key, pos, "superseded")
        self.versions.setdefault(e.key, []).append(Version(values))

    @staticmethod
    def _again(stored: StoredRow, pos: Position, e: Event) -> bool:
        """At-least-once delivery: the change that wrote the stored row (its LSN, op and values) delivered again.
        A change with a TOAST placeholder is never taken for one (the stored value is not what it sent)."""
        if pos[0] != stored.position[0] or e.toast:
            return False
        if e.op == "d":
            return stored.deleted
        assert e.after is not None
        sent = {c: e.after.get(c) for c in (*COLUMNS, EXTRA)}
        return not stored.deleted and stored.op == e.op and sent == stored.values

    def live(self) -> dict[int, dict[str, Any]]:
        """Rows a reader sees: key -> values."""
        return {k: dict(r.values) for k, r in self.rows.items() if not r.deleted}

    def all_rows(self) -> dict[int, tuple[dict[str, Any], bool]]:
        """Every stored row (soft mode keeps deleted ones): key -> (values, deleted)."""
        return {k: (dict(r.values), r.deleted) for k, r in self.rows.items()}


def with_events(batches: list[list[Event]]) -> list[list[Event]]:
    """A copy (events are immutable; batches are lists)."""
    return [[replace(e) for e in b] for b in batches]
