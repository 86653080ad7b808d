"""What cdclake does with the DDL statements CDC tools put in the stream.

DDL records are rare, so they are collected to the driver and parsed with a real SQL parser
(:func:`cdclake.ddl.parse_ddl`). Each one ends in exactly one place:

===========================  ===============================================================================
statement                    effect
===========================  ===============================================================================
CREATE TABLE                 the table's key and column types are learned (used when the row changes carry
                             none, e.g. CKafka Format I); a table that does not exist yet is created
ALTER TABLE ADD/MODIFY       the new columns' types are learned; columns are added when rows carry them, or at
                             once with a constant DEFAULT, which fills the rows written before the statement
ALTER TABLE RENAME COLUMN    the lake column is renamed (its values kept); older images' old name maps to it
ALTER TABLE DROP COLUMN      the lake column is dropped; older images' values for it are ignored
TRUNCATE                     a truncate change (``op = t``) of the table at the statement's position
DROP TABLE                   a truncate change at the statement's position: the table is emptied, but the
                             Iceberg table and its history stay; a later CREATE TABLE of the name moves them
                             aside (``<name>__displaced_<hash>``) and the re-created table starts a new one
RENAME TABLE                 the lake table (with its changelog and tombstones) is renamed; changes that still
                             name the old table are routed to the new one
DROP DATABASE / SCHEMA       a DROP TABLE of each table of it the lake has or the batch's DDL defined
DROP TABLE in a snapshot     skipped with a counted reason: the connector wrote it while recording the schema it
                             read (Debezium MySQL's snapshot writes ``DROP TABLE IF EXISTS`` before each CREATE)
other database, index DDL    skipped with a counted reason (no effect on tables)
unparsable                   quarantined with the parser's reason
===========================  ===============================================================================

That table is the ``evolve`` policy (the default). The DDL policy is per table (:class:`DdlPolicies`, source
config ``ddl_policy``, ``--ddl-policy``):

- ``ignore``: statements that would change a lake table (ALTER, TRUNCATE, DROP, RENAME) are skipped with a
  counted reason; row images still add new columns, as they always do. CREATE TABLE is still learned.
- ``fail``: such a statement stops its table for the batch: the statement and every change of that table in the
  batch are quarantined with a reason that says so, and the batch summary names the table. After review, set the
  policy to ``evolve`` or ``ignore`` and ``cdclake quarantine replay`` them.

The lake-side effects of renames and drops are applied and remembered by :mod:`cdclake.ddl_history`.

The statement's position is the message's when the format gives one (canal/DRS ``id``, dtle/Debezium binlog
position). CKafka's canal-format DDL has none: a truncate then takes the position of its table's nearest row change
in the batch (the next one, else the previous one; :func:`cdclake.normalize._nearest_position`), which places it
correctly among the table's rows.
"""

from __future__ import annotations

import fnmatch
import json
import logging
import re
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable

from cdclake.ddl import DdlError, DdlEvent, DdlUnsupported, parse_ddl
from cdclake.exceptions import ConfigError
from cdclake.formats.connect import ColumnType
from cdclake.identity import sanitize, split_table_id, table_id

log = logging.getLogger(__name__)

_LEADING_COMMENTS = r"^\s*(?:/\*.*?\*/\s*)*"
"""Where a statement's first word is: after leading ``/* .. */`` comments (dtle, DBeaver and others add them)."""


def _statement(verbs: str) -> re.Pattern[str]:
    """A statement whose first word is one of ``verbs`` (a regex alternation, group 1)."""
    return re.compile(rf"{_LEADING_COMMENTS}({verbs})\b", re.IGNORECASE | re.DOTALL)


_SESSION_STATEMENT = _statement("SET|USE|FLUSH|BEGIN|COMMIT|ROLLBACK|XA|SAVEPOINT|ANALYZE|OPTIMIZE|REPAIR|LOCK|UNLOCK")
"""Statements schema-change topics carry that do not define tables (Debezium's MySQL history has ``SET ...``)."""

_STATEMENT_DML = _statement(r"INSERT|UPDATE|DELETE|REPLACE|LOAD\s+DATA")
_CREATE_STATEMENT = _statement("CREATE")
STATEMENT_DML_REASON = (
    "a row change written as its SQL statement ({verb}), not as rows: the source's binlog is statement-based "
    "(binlog_format STATEMENT or MIXED; canal sends such events as type QUERY), so the rows' values are not in the "
    "message. Capture with binlog_format=ROW")
"""Why a DML statement in a DDL record is quarantined (its changes cannot be known from the text)."""

_TABLE_STATEMENTS = frozenset(("create_table", "alter_table", "truncate", "drop_table", "rename_table"))

SKIP_CREATE = "DDL CREATE TABLE: key and column types learned"
SKIP_ALTER = ("DDL ALTER TABLE: column types learned (a new column is added with the first rows that carry it, or "
              "at once when the batch has no rows of the table)")
SKIP_ALTER_NO_COLUMN = ("DDL ALTER TABLE that adds, changes, renames or drops no column (an index, a constraint, a "
                        "column default, a table option)")
SKIP_CREATE_EXISTING = ("DDL CREATE TABLE IF NOT EXISTS of a table the batch created or altered before it (and did "
                        "not drop or rename away since): no effect at the source, nothing learned")
SKIP_CREATE_IN_LAKE = ("DDL CREATE TABLE IF NOT EXISTS of a table the lake holds from earlier batches (not dropped "
                       "or renamed away since): no effect at the source, nothing learned")
SKIP_CREATE_NO_COLUMNS = "DDL CREATE TABLE without column definitions: nothing learned but a key it names"
SKIP_RENAME = "DDL RENAME TABLE: the lake table, if any, is renamed; changes naming the old table go to the new one"
SKIP_SNAPSHOT_DROP = (
    "DDL DROP TABLE (or TRUNCATE) in a snapshot: the connector writes `DROP TABLE IF EXISTS` before each table's "
    "CREATE TABLE when it snapshots the schema (Debezium MySQL, also for schema_only/recovery snapshots); the source "
    "table was not dropped, so the lake table keeps its rows")


POLICIES = ("evolve", "ignore", "fail")
"""DDL policies (see the module docstring)."""


@dataclass(frozen=True)
class DdlPolicies:
    """The DDL policy of each table: per table id or ``fnmatch`` pattern, and a default.

    Attributes:
        default: Policy of tables no entry names.
        per_table: Table id (``namespace.table``, lower case) or pattern -> policy; the first match wins.
    """

    default: str = "evolve"
    per_table: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, policy in [("default", self.default), *self.per_table.items()]:
            if policy not in POLICIES:
                raise ConfigError(f"DDL policy {policy!r} for {name}: expected one of {', '.join(POLICIES)}")

    @classmethod
    def parse(cls, values: Iterable[str] | None) -> "DdlPolicies":
        """Parse ``[TABLE=]POLICY`` declarations (``--ddl-policy``), e.g. ``ignore`` or ``shop.orders=fail``."""
        default = "evolve"
        per_table: dict[str, str] = {}
        for value in values or ():
            table, sep, policy = value.rpartition("=")
            policy = policy.strip().lower()
            if policy not in POLICIES:
                raise ConfigError(f"--ddl-policy {value!r}: expected [TABLE=]{'|'.join(POLICIES)}")
            if sep:
                per_table[table.strip().lower()] = policy
            else:
                default = policy
        return cls(default, per_table)

    def for_table(self, tid: str) -> str:
        """The policy of a table (``namespace.table``)."""
        tid = tid.lower()
        for pattern, policy in self.per_table.items():
            if tid == pattern or fnmatch.fnmatchcase(tid, pattern) or tid.rpartition(".")[2] == pattern:
                return policy
        return self.default

    def to_list(self) -> list[str]:
        """The declarations back in ``--ddl-policy`` form."""
        return [self.default, *(f"{t}={p}" for t, p in self.per_table.items())]


@dataclass(frozen=True)
class LakeChange:
    """A DDL effect ``evolve`` makes on a lake table, applied before the batch's rows (:mod:`cdclake.ddl_history`).

    Attributes:
        kind: ``rename_column``, ``drop_column``, ``add_column`` (undoes an earlier drop of that name),
            ``rename_table``, ``drop_table`` (no catalog effect: its truncate empties the table; a later
            ``CREATE`` of the name starts a new lake table) or ``create_table`` (takes back a renamed-away or
            dropped table name; otherwise no effect).
        table_id: The table, as named when the statement ran.
        old: Old column name (renames), the column (drops, adds), or the old table id (``rename_table``).
        new: New column name, or the new table id; "" for drops and adds.
        sql: The statement.
        position: The statement's source position (its landing location when the format gives none): the same
            statement landed again (a replay) is recognized by it and not applied twice.
    """

    kind: str
    table_id: str
    old: str
    new: str = ""
    sql: str = ""
    position: str = ""


@dataclass(frozen=True)
class ColumnDefault:
    """A column ``ALTER TABLE .. ADD`` gave a constant default: the source filled it into every existing row (no
    row events say so), so the lake fills the rows written before the statement.

    Attributes:
        column: The column.
        text: The default as value text, or :data:`cdclake.ddl.DEFAULT_NOW` (the statement's time).
        record: The statement's parsed record (its position and time).
    """

    column: str
    text: str
    record: dict[str, Any]


@dataclass
class TableDefinition:
    """What DDL in a batch says about one table."""

    columns: dict[str, ColumnType] = field(default_factory=dict)
    key: tuple[str, ...] = ()
    created: bool = False
    defaults: list[ColumnDefault] = field(default_factory=list)
    dropped_at: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Column -> the parsed record of the batch's last ``DROP COLUMN`` of it. Where the batch adds the column
    again, images written before the drop do not fill it (:func:`cdclake.normalize._cleared_columns`)."""
    sql_types: dict[str, tuple[str, str]] = field(default_factory=dict)
    """Column -> (dialect, SQL type text) as the DDL declares it (how a CDC tool encodes its values may depend on
    it: :func:`cdclake.formats.connect.debezium_mysql_field`)."""
    like: str | None = None
    """``CREATE TABLE .. LIKE`` of a table the batch's DDL does not define: its id, whose lake table gives the
    columns (and, with ``like_key``, the key) this definition lacks."""
    like_key: bool = False
    described_key: tuple[str, ...] = ()
    """The key the newest ``ALTER TABLE``'s Debezium ``tableChanges`` describe (the table after the statement): the
    last resort, for a table no other source names a key of (a declared key and the lake table's own key win)."""


@dataclass
class Outcome:
    """The interpretation of a batch's DDL records.

    Attributes:
        tables: Learned definitions per table id.
        records: The DDL records, rewritten: status ``skip``/``quarantine`` with a reason, or ``ok`` truncates
            (``op = t``, ``table_id`` set; ``source_pos`` null when it must be filled from the file).
        changes: Lake-side effects to apply before the rows, in stream order (``evolve`` only).
        stopped: Tables a statement stopped under the ``fail`` policy -> the reason (their changes are held).
        dropped: Tables the batch drops (``evolve``) -> their definition when dropped: a ``CREATE`` of the name
            later in the batch starts a new definition, and the dropped table's changes keep this one.
    """

    tables: dict[str, TableDefinition] = field(default_factory=dict)
    records: list[dict[str, Any]] = field(default_factory=list)
    changes: list[LakeChange] = field(default_factory=list)
    stopped: dict[str, str] = field(default_factory=dict)
    dropped: dict[str, TableDefinition] = field(default_factory=dict)

    def unread_creates(self) -> dict[str, str]:
        """Tables whose CREATE TABLE in the batch was quarantined (not understood) -> its reason."""
        return {r["table_id"]: r["reason"] for r in self.records
                if r.get("status") == "quarantine" and r.get("table_id")
                and _CREATE_STATEMENT.match(str(r.get("ddl") or ""))}


def _context(record: dict[str, Any]) -> dict[str, Any]:
    try:
        ctx = json.loads(record.get("row_schema") or "{}")
    except ValueError:
        ctx = {}
    return ctx if isinstance(ctx, dict) else {}


def _table_changes_key(ctx: dict[str, Any], table: str) -> tuple[str, ...]:
    """Primary key from Debezium's ``tableChanges`` (dtle does not fill it; Debezium does)."""
    try:
        changes = json.loads(ctx.get("table_changes") or "[]")
    except ValueError:
        return ()
    for change in changes if isinstance(changes, list) else []:
        spec = change.get("table") if isinstance(change, dict) else None
        if isinstance(spec, dict) and str(change.get("id", "")).strip('"').split('"."')[-1].lower() == table.lower():
            names = spec.get("primaryKeyColumnNames")
            if isinstance(names, list) and names:
                return tuple(str(n) for n in names)
    return ()


def _columns(dialect: str, specs: Any) -> dict[str, ColumnType]:
    """The typed columns of DDL column definitions. A definition without a type (SQL Server's computed column
    ``total AS (price * qty)``, Oracle's ``MODIFY (c NULL)``) says nothing of the column's type: the rows, or the
    table, type it (it would map to text, and so make a lake column of another type text)."""
    from cdclake.formats.sqltypes import column_type

    return {c.name: column_type(c.name, c.type_text, dialect=dialect) for c in specs if c.type_text}


def _describe(event: DdlEvent) -> str:
    """What a statement does to its table, for reasons (``RENAME COLUMN a TO b, DROP COLUMN c``)."""
    parts = [f"RENAME COLUMN {old} TO {new}" for old, new in event.renamed]
    parts += [f"DROP COLUMN {name}" for name in event.dropped]
    parts += [f"ADD COLUMN {c.name}" for c in event.added]
    parts += [f"MODIFY COLUMN {c.name}" for c in event.modified]
    if event.primary_key and event.kind == "alter_table":
        parts.append(f"ADD PRIMARY KEY ({', '.join(event.primary_key)})")
    if event.new_table:
        parts.append(f"RENAME TO {event.new_table}")
    return ", ".join(parts) or event.kind.replace("_", " ").upper()


def interpret(records: list[dict[str, Any]], policies: DdlPolicies | None = None,
              lake_tables: Callable[[str], list[str]] | None = None,
              lake_holds: Callable[[str], bool] | None = None) -> Outcome:
    """Interpret DDL records (dicts with the parsed-record columns), in stream order.

    Args:
        records: Parsed records with status ``ddl``; ``ddl`` holds the statement, ``row_schema`` a JSON context
            with ``dialect``, ``namespace`` (the message's database/schema) and, for canal, ``table``.
        policies: Each table's DDL policy (default: ``evolve`` everywhere).
        lake_tables: The lake's table ids in a namespace: a ``DROP DATABASE`` (``DROP SCHEMA``) drops each of them
            (and the tables the batch's DDL defined there), as a ``DROP TABLE`` of each. Without it, only those
            the batch's DDL defined.
        lake_holds: Whether the lake holds a table from earlier batches that the source has not dropped since: a
            ``CREATE TABLE IF NOT EXISTS`` of it is skipped under ``evolve`` (unless the batch dropped or renamed
            it before the statement, or a snapshot wrote it). Without it, such a statement is read as a ``CREATE``.
    """
    policies = policies or DdlPolicies()
    outcome = Outcome()
    for record in sorted(records, key=lambda r: (r["file_index"], r["index"], r["row_index"])):
        ctx = _context(record)
        dialect = str(ctx.get("dialect") or "mysql")
        namespace = ctx.get("namespace")
        sql = str(record.get("ddl") or "")

        def done(status: str, reason: str, **changes: Any) -> None:
            outcome.records.append({**record, "status": status, "reason": reason, **changes})

        session = _SESSION_STATEMENT.match(sql)
        if session:
            done("skip", f"{session.group(1).upper()} statement: no effect on tables")
            continue
        dml = _STATEMENT_DML.match(sql)
        if dml:
            done("quarantine", STATEMENT_DML_REASON.format(verb=" ".join(dml.group(1).upper().split())))
            continue
        try:
            events = parse_ddl(sql, dialect)
        except DdlError as exc:
            done("quarantine", f"DDL not {'supported' if isinstance(exc, DdlUnsupported) else 'understood'}: {exc}")
            continue
        if not events:
            done("skip", "DDL: empty statement")
            continue
        events = [e for event in events for e in _dropped_tables(event, outcome, lake_tables)]
        # One message is one record: its first statement decides the outcome, later ones only add knowledge, and
        # truncates of the other tables a statement names.
        results: list[tuple[str, str, dict[str, Any]]] = []
        for event in events:
            if event.table and not (event.database or namespace) and event.kind in _TABLE_STATEMENTS:
                # dtle's SchemaChangeTopic message with an empty databaseName: `default.<table>` would be guessed.
                results.append(("quarantine", (
                    f"DDL {event.kind.replace('_', ' ')} names table {event.table} without its database, and the "
                    "message gives none (its databaseName or database is empty): the table it changes is unknown"),
                    {}))
                continue
            tid = table_id(event.database or namespace, None, event.table) if event.table else None
            where = record.get("source_pos") or (f"{record.get('input')}#{record.get('index')}")
            if event.kind == "create_table" and tid:
                if tid in outcome.dropped and outcome.tables.get(tid) is outcome.dropped[tid]:
                    del outcome.tables[tid]  # created again after its drop: the dropped table keeps its definition
                elif event.if_not_exists and tid in outcome.tables and policies.for_table(tid) == "evolve":
                    # The batch created or altered it (only `evolve` follows its drops and renames away)
                    results.append(("skip", SKIP_CREATE_EXISTING, {"table_id": tid}))
                    continue
                elif (event.if_not_exists and tid not in outcome.tables and policies.for_table(tid) == "evolve"
                      and not record.get("snapshot") and lake_holds is not None
                      and not _dropped_or_renamed(tid, outcome) and lake_holds(tid)):
                    # A snapshot's statement says what the table is now; this one, what it was at first
                    results.append(("skip", SKIP_CREATE_IN_LAKE, {"table_id": tid}))
                    continue
                definition = outcome.tables.setdefault(tid, TableDefinition())
                definition.columns = _columns(dialect, event.columns)
                definition.sql_types = {c.name: (dialect, c.type_text) for c in event.columns if c.type_text}
                definition.key = tuple(event.primary_key) or _table_changes_key(ctx, event.table or "")
                definition.created = True
                if event.like:
                    _copy_like(event, table_id(event.like[0] or namespace, None, event.like[1]), definition, outcome)
                if policies.for_table(tid) == "evolve":  # takes back a renamed-away name (ddl_history)
                    outcome.changes.append(LakeChange("create_table", tid, tid, "", event.sql, str(where)))
                # TiCDC's Debezium protocol writes `CREATE TABLE t` with the columns only in tableChanges.
                results.append(("skip", SKIP_CREATE if event.columns or event.like else SKIP_CREATE_NO_COLUMNS,
                                {"table_id": tid}))
                continue
            if event.kind not in ("alter_table", "truncate", "drop_table", "rename_table") or not tid:
                results.append(("skip", f"DDL {event.kind.replace('_', ' ')}: no effect on tables", {}))
                continue
            if event.kind in ("truncate", "drop_table") and record.get("snapshot"):
                results.append(("skip", SKIP_SNAPSHOT_DROP, {"table_id": tid}))
                continue
            policy = policies.for_table(tid)
            what = _describe(event)
            if event.kind == "alter_table":  # types are knowledge, whatever the policy
                definition = outcome.tables.setdefault(tid, TableDefinition())
                if policy == "evolve":  # a column the statement renames or drops may be added again in it
                    _rename_and_drop_columns(definition, event, record)
                definition.columns.update(_columns(dialect, [*event.added, *event.modified]))
                definition.sql_types.update({c.name: (dialect, c.type_text) for c in [*event.added, *event.modified]
                                             if c.type_text})
                if event.primary_key:
                    definition.key = tuple(event.primary_key)
                definition.described_key = _table_changes_key(ctx, event.table or "") or definition.described_key
            if policy == "fail":
                reason = (f"DDL {what} on {tid} stopped the table (ddl_policy=fail): its changes in this batch are "
                          "held in quarantine; after review set ddl_policy to evolve or ignore and run "
                          "`cdclake quarantine replay`")
                outcome.stopped.setdefault(tid, reason)
                results.append(("quarantine", reason, {"table_id": tid}))
            elif policy == "ignore":
                results.append(("skip", f"DDL {event.kind.replace('_', ' ').upper()} ignored (ddl_policy=ignore)",
                                {"table_id": tid}))
            else:
                if event.kind == "alter_table":  # before _evolve, which moves the definition of a renamed table
                    outcome.tables[tid].defaults += [ColumnDefault(c.name, c.default, record) for c in event.added
                                                     if c.default is not None]
                results.append(_evolve(event, tid, namespace, str(where), outcome))
        status, reason, changes = results[0] if results else ("skip", "DDL: no effect on tables", {})
        done(status, reason, **changes)
        if status == "ok":
            outcome.records[-1]["reason"] = None
        # `DROP TABLE a, b` (PostgreSQL: `TRUNCATE a, b`) empties every table it names: one truncate each.
        for extra_status, _, extra in results[1:]:
            if extra_status == "ok" and extra.get("table_id") != changes.get("table_id"):
                done("ok", "", **extra)
                outcome.records[-1]["reason"] = None
    log.info("interpreted %d DDL record(s): %s; lake changes %s; stopped %s", len(records),
             {t: {"key": d.key, "columns": list(d.columns)} for t, d in outcome.tables.items()},
             outcome.changes or "none", list(outcome.stopped) or "none")
    return outcome


def _dropped_or_renamed(tid: str, outcome: Outcome) -> bool:
    """Whether the batch's statements so far dropped the table, renamed it away or renamed another onto it."""
    return any(c.kind in ("drop_table", "rename_table") and tid in (c.table_id, c.new) for c in outcome.changes)


def _dropped_tables(event: DdlEvent, outcome: Outcome,
                    lake_tables: Callable[[str], list[str]] | None) -> list[DdlEvent]:
    """A ``DROP DATABASE d`` as a ``DROP TABLE`` of each table of ``d`` the lake or the batch's DDL knows (the
    event itself where there is none); any other event as it is."""
    if event.kind != "drop_database" or not event.database:
        return [event]
    namespace = sanitize(event.database)
    tids = sorted({*(lake_tables(namespace) if lake_tables else ()),
                   *(t for t in outcome.tables if split_table_id(t)[0] == namespace)})
    return [DdlEvent("drop_table", namespace, split_table_id(t)[1], sql=event.sql) for t in tids] or [event]


def _copy_like(event: DdlEvent, source: str, definition: TableDefinition, outcome: Outcome) -> None:
    """``CREATE TABLE t LIKE s``: ``t`` starts with ``s``'s columns (and key, where the statement copies it), as
    the batch's DDL knows them; where it does not, :mod:`cdclake.normalize` reads them from the lake table ``s``."""
    known = outcome.tables.get(source)
    if known is None or not known.columns:
        definition.like, definition.like_key = source, event.like_key
        return
    definition.columns = {**known.columns, **definition.columns}
    definition.sql_types = {**known.sql_types, **definition.sql_types}
    if event.like_key and not definition.key:
        definition.key = known.key


def _rename_and_drop_columns(definition: TableDefinition, event: DdlEvent, record: dict[str, Any]) -> None:
    """What an ``ALTER TABLE``'s renames and drops do to the batch's definition of the table, before its added and
    changed columns (``DROP COLUMN c, ADD COLUMN c``, ``RENAME COLUMN c TO d, ADD COLUMN c``, ``CHANGE a b
    bigint``)."""
    def same(d: ColumnDefault, name: str) -> bool:
        return d.column.lower() == name.lower()

    def spelled(name: str) -> str:  # as the table's definition spells it: column names ignore case
        return next((n for n in definition.columns if n.lower() == name.lower()), name)

    for old, new in event.renamed:
        old = spelled(old)
        if old in definition.columns:
            definition.columns[new] = replace(definition.columns.pop(old), name=new)
        if old in definition.sql_types:
            definition.sql_types[new] = definition.sql_types.pop(old)
        definition.key = tuple(new if k.lower() == old.lower() else k for k in definition.key)
        # A DEFAULT the batch added to the column is filled under its new name.
        definition.defaults = [replace(d, column=new) if same(d, old) else d for d in definition.defaults]
    for name in event.dropped:
        name = spelled(name)
        definition.columns.pop(name, None)
        definition.sql_types.pop(name, None)
        definition.dropped_at[name] = record
        # The rows it filled lost the column: a column added again under the name starts without them.
        definition.defaults = [d for d in definition.defaults if not same(d, name)]


def _evolve(event: DdlEvent, tid: str, namespace: str | None, where: str,
            outcome: Outcome) -> tuple[str, str, dict[str, Any]]:
    """The ``evolve`` outcome of a statement that changes a table; renames and drops become lake changes."""
    if event.kind in ("truncate", "drop_table"):
        if event.kind == "drop_table":  # a later CREATE of the name starts a new lake table (ddl_history)
            outcome.changes.append(LakeChange("drop_table", tid, tid, "", event.sql, where))
            if tid in outcome.tables:
                outcome.dropped[tid] = outcome.tables[tid]
        return "ok", "", {"table_id": tid, "op": "t"}
    for old, new in event.renamed:
        outcome.changes.append(LakeChange("rename_column", tid, old, new, event.sql, where))
    for name in event.dropped:
        outcome.changes.append(LakeChange("drop_column", tid, name, "", event.sql, where))
    for column in event.added:
        outcome.changes.append(LakeChange("add_column", tid, column.name, "", event.sql, where))
    if event.new_table:
        new_tid = table_id(event.new_database or event.database or namespace, None, event.new_table)
        outcome.changes.append(LakeChange("rename_table", tid, tid, new_tid, event.sql, where))
        moved = outcome.tables.pop(tid, None)
        if moved is not None:
            outcome.tables[new_tid] = moved
    if event.kind == "rename_table":
        return "skip", SKIP_RENAME, {"table_id": tid}
    if event.renamed or event.dropped or event.new_table:
        return "skip", "DDL ALTER TABLE: applied to the lake table (renamed/dropped columns or table)", {
            "table_id": tid}
    if not (event.added or event.modified or event.primary_key):  # `ALTER TABLE t ADD INDEX ix (c)`
        return "skip", SKIP_ALTER_NO_COLUMN, {"table_id": tid}
    return "skip", SKIP_ALTER, {"table_id": tid}
