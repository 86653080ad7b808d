"""What cdclake does with the DDL statements CDC tools put in the stream.

DDL records are rare, so they are collected to the driver and parsed with a real SQL parser
(:func:`cdclake.ddl.parse_ddl`). Each one ends in exactly one place:

===========================  ===============================================================================
statement                    effect
===========================  ===============================================================================
CREATE TABLE                 the table's key and column types are learned (used when the row changes carry
                             none, e.g. CKafka Format I); a table that does not exist yet is created
ALTER TABLE ADD/MODIFY       the new columns' types are learned; columns are added when rows carry them
TRUNCATE                     a truncate change (``op = t``) of the table at the statement's position
database / index DDL         skipped with a counted reason (no effect on tables)
DROP TABLE, RENAME TABLE     quarantined as unsupported (replayable once a policy applies them)
unparsable                   quarantined with the parser's reason
===========================  ===============================================================================

The statement's position is the message's when the format gives one (canal/DRS ``id``, dtle/Debezium binlog
position). CKafka's canal-format DDL has none: a truncate then takes the position of the nearest row change in the
same input file (the next one, else the previous one), which places it correctly among the rows of that file.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from typing import Any

from cdclake.ddl import DdlError, parse_ddl
from cdclake.formats.connect import ColumnType
from cdclake.identity import table_id

log = logging.getLogger(__name__)

_SESSION_STATEMENT = re.compile(
    r"^\s*(?:/\*.*?\*/\s*)*(SET|USE|FLUSH|BEGIN|COMMIT|ROLLBACK|XA|SAVEPOINT|ANALYZE|OPTIMIZE|REPAIR|LOCK|UNLOCK)\b",
    re.IGNORECASE | re.DOTALL)
"""Statements schema-change topics carry that do not define tables (Debezium's MySQL history has ``SET ...``)."""

SKIP_CREATE = "DDL CREATE TABLE: key and column types learned"
SKIP_ALTER = "DDL ALTER TABLE: column types learned (columns are added as rows carry them)"


@dataclass
class TableDefinition:
    """What DDL in a batch says about one table."""

    columns: dict[str, ColumnType] = field(default_factory=dict)
    key: tuple[str, ...] = ()
    created: bool = False


@dataclass
class Outcome:
    """The interpretation of a batch's DDL records.

    Attributes:
        tables: Learned definitions per table id.
        records: The DDL records, rewritten: status ``skip``/``quarantine`` with a reason, or ``ok`` truncates
            (``op = t``, ``table_id`` set; ``source_pos`` null when it must be filled from the file).
    """

    tables: dict[str, TableDefinition] = field(default_factory=dict)
    records: list[dict[str, Any]] = field(default_factory=list)


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
        if isinstance(spec, dict) and str(change.get("id", "")).strip('"').split('"."')[-1] == table:
            names = spec.get("primaryKeyColumnNames")
            if isinstance(names, list) and names:
                return tuple(str(n) for n in names)
    return ()


def _columns(dialect: str, specs: Any) -> dict[str, ColumnType]:
    from cdclake.formats.sqltypes import column_type

    return {c.name: column_type(c.name, c.type_text, dialect=dialect) for c in specs}


def interpret(records: list[dict[str, Any]]) -> Outcome:
    """Interpret DDL records (dicts with the parsed-record columns), in stream order.

    Args:
        records: Parsed records with status ``ddl``; ``ddl`` holds the statement, ``row_schema`` a JSON context
            with ``dialect``, ``namespace`` (the message's database/schema) and, for canal, ``table``.
    """
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
            done("skip", f"DDL {session.group(1).upper()}: no effect on tables")
            continue
        try:
            events = parse_ddl(sql, dialect)
        except DdlError as exc:
            done("quarantine", f"DDL not understood: {exc}")
            continue
        if not events:
            done("skip", "DDL: empty statement")
            continue
        # One message is one record: its first statement decides the outcome, later ones only add knowledge.
        results: list[tuple[str, str, dict[str, Any]]] = []
        for event in events:
            tid = table_id(event.database or namespace, None, event.table) if event.table else None
            if event.kind == "create_table" and tid:
                definition = outcome.tables.setdefault(tid, TableDefinition())
                definition.columns = _columns(dialect, event.columns)
                definition.key = tuple(event.primary_key) or _table_changes_key(ctx, event.table or "")
                definition.created = True
                results.append(("skip", SKIP_CREATE, {"table_id": tid}))
            elif event.kind == "alter_table" and tid:
                if event.new_table:
                    results.append(("quarantine", "unsupported DDL: ALTER TABLE ... RENAME TO is not applied "
                                    "(rename the lake table, then replay)", {"table_id": tid}))
                    continue
                definition = outcome.tables.setdefault(tid, TableDefinition())
                definition.columns.update(_columns(dialect, [*event.added, *event.modified]))
                if event.primary_key:
                    definition.key = tuple(event.primary_key)
                results.append(("skip", SKIP_ALTER, {"table_id": tid}))
            elif event.kind == "truncate" and tid:
                results.append(("ok", "", {"table_id": tid, "op": "t"}))
            elif event.kind in ("drop_table", "rename_table"):
                what = "DROP TABLE" if event.kind == "drop_table" else "RENAME TABLE"
                results.append(("quarantine", f"unsupported DDL: {what} is not applied to the lake table",
                                {"table_id": tid}))
            else:
                results.append(("skip", f"DDL {event.kind.replace('_', ' ')}: no effect on tables", {}))
        status, reason, changes = results[0] if results else ("skip", "DDL: no effect on tables", {})
        done(status, reason, **changes)
        if status == "ok":
            outcome.records[-1]["reason"] = None
    log.info("interpreted %d DDL record(s): %s", len(records),
             {t: {"key": d.key, "columns": list(d.columns)} for t, d in outcome.tables.items()})
    return outcome
