"""DDL statements found in change streams, parsed into plain events (no Spark).

CDC tools forward schema changes as SQL text: canal and Huawei DRS put it in the ``sql`` field, Tencent CKafka's
canal format in its DDL messages (raw newlines and all), dtle and Debezium in the ``ddl`` field of their
schema-change topic. The normalizers read that text to learn a table's columns and primary key (a
``CREATE TABLE`` is often the only place a keyless format names the key) and to notice drops, renames and
truncates.

Parsing is done by sqlglot, a real SQL parser, in the source's dialect (see :func:`dialect_for`). Where sqlglot
gives up on a statement that is still plain DDL, a narrow token-level fallback takes over; each one is named in
the docstring of the function that does it:

- MySQL ``RENAME TABLE a TO b, c TO d`` and Oracle ``RENAME a TO b`` (sqlglot keeps these as an opaque command).
- ``CREATE TABLE`` whose trailing table options sqlglot does not know (MySQL ``PARTITION BY HASH(..)
  PARTITIONS n``, Oracle ``SEGMENT CREATION .. TABLESPACE ..``): the statement is re-parsed up to the end of its
  column list, since options after it cannot change columns or keys. Oracle's constraint states
  (``NOT NULL ENABLE``, ``USING INDEX .. ENABLE``, as ``DBMS_METADATA`` prints them) and supplemental logging
  elements (``SUPPLEMENTAL LOG DATA (ALL) COLUMNS``, in every CREATE TABLE Debezium's Oracle connector reports)
  are dropped first.
- MySQL spatial column types (``point``, ``polygon``.., with ``SRID n``), which sqlglot mostly does not read, are
  read as ``longblob`` before parsing, and MySQL's type synonyms it does not know (``SERIAL``, ``MIDDLEINT``,
  ``LONG VARCHAR``, ``NATIONAL CHAR``, ``NCHAR VARYING``, ``FLOAT UNSIGNED``, ``SERIAL DEFAULT VALUE``, repeated
  ``UNSIGNED``/``ZEROFILL``), and OceanBase's index options (``BLOCK_SIZE n LOCAL``), as what they stand for
  (:func:`_mysql_readable`).
- SQL Server's ``CLUSTERED``/``NONCLUSTERED`` after an inline or unnamed ``PRIMARY KEY`` (:func:`_tsql_readable`),
  PostgreSQL's and Oracle's identity sequence options (``AS IDENTITY (SEQUENCE NAME s .. NO MAXVALUE CACHE 1)``,
  :func:`_without_identity_options`), which sqlglot does not read.
- ``ALTER TABLE`` actions sqlglot does not know: MySQL ``ADD [COLUMN] (a int, b int)``, Oracle
  ``MODIFY (c NUMBER(12))`` / ``MODIFY c NUMBER(12)`` / ``DROP (c, d)``, ``DROP UNUSED COLUMNS``, PostgreSQL's
  identity changes (``ALTER COLUMN c ADD GENERATED ALWAYS AS IDENTITY``), MySQL ``RENAME AS u``. Column
  definitions inside them are still parsed by sqlglot. An action that could touch columns or keys and is still
  not understood raises :class:`DdlError` rather than being skipped.
- PostgreSQL ``ALTER TABLE t RENAME a TO b`` (a column rename), which sqlglot reads as a table rename, is
  corrected (:func:`_alter_actions`).

Column types are reported as written in the statement (``numeric(12,4)`` stays ``numeric``, not sqlglot's
``DECIMAL``), lower-cased, with MySQL 8's own normalization of integer display widths (see :class:`DdlColumn`).
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import re
from dataclasses import dataclass, field, replace
from typing import Iterator, Sequence

import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ParseError, SqlglotError, TokenError
from sqlglot.tokens import Token, TokenType

from cdclake.exceptions import CdclakeError

__all__ = ["DIALECTS", "KINDS", "DdlColumn", "DdlError", "DdlEvent", "DdlUnsupported", "dialect_for",
           "parse_ddl"]

DIALECTS = ("mysql", "postgres", "tsql", "oracle")
"""The sqlglot dialects :func:`parse_ddl` accepts."""

KINDS = (
    "create_table",
    "alter_table",
    "drop_table",
    "rename_table",
    "truncate",
    "create_database",
    "drop_database",
    "create_index",
    "drop_index",
    "temporary_table",
    "other",
)
"""Every value of :attr:`DdlEvent.kind`. ``temporary_table``: a CREATE or DROP of a temporary table (MySQL writes
``DROP /*!40005 TEMPORARY */ TABLE`` to its binlog when a session ends); its name may be a real table's, which the
statement does not touch."""

_SNIPPET_CHARS = 80
# MySQL's executable comments around TEMPORARY (``DROP /*!40005 TEMPORARY */ TABLE``, as its binlog writes it) and
# IF [NOT] EXISTS (mysqldump's ``CREATE TABLE /*!32312 IF NOT EXISTS*/ t``): the server runs their text. Matched
# outside quoted strings and names: a quote's text is matched whole (group 1) and kept. Other executable comments
# stay comments (``/*!80023 INVISIBLE */``, ``/*!50100 PARTITION BY ..*/``: nothing cdclake reads).
_EXECUTED_COMMENT = re.compile(
    r"""('(?:[^'\\]|\\.|'')*'|"(?:[^"\\]|\\.|"")*"|`(?:[^`]|``)*`)"""
    r"""|/\*M?!(?:\d{5,6})?\s*(TEMPORARY|IF\s+NOT\s+EXISTS|IF\s+EXISTS)\s*\*/""",
    re.S | re.I)
# MySQL index statements' ALGORITHM, LOCK and COMMENT options (``DROP INDEX ix ON t ALGORITHM=INPLACE LOCK=NONE``),
# which sqlglot does not read; an index statement changes no column, so they are dropped before parsing.
_INDEX_STATEMENT = re.compile(r"\s*(?:DROP\s+|CREATE\s+(?:(?:UNIQUE|FULLTEXT|SPATIAL)\s+)?)INDEX\b", re.I)
_INDEX_OPTION = re.compile(r"\b(?:(?:ALGORITHM|LOCK)\b\s*(?:=\s*)?\w+|COMMENT\s*(?:=\s*)?'(?:[^'\\]|\\.|'')*')", re.I)
_DISPLAY_WIDTH = re.compile(r"^(tinyint|smallint|mediumint|int|integer|bigint)\(\d+\)")
_SYNTHETIC_TABLE = "_cdclake_ddl_columns"
_PARTITION_WORDS = frozenset({"PARTITION", "PARTITIONS", "SUBPARTITION", "SUBPARTITIONS"})
# SQL Server's TRUNCATE TABLE t WITH (PARTITIONS (2, 4 TO 6)): those partitions only.
_PARTITIONS_OPTION = re.compile(r"\bWITH\s*\(\s*PARTITIONS\b", re.I)

# Statements that are DDL (or forwarded with it) but describe nothing this module tracks: reported as "other".
_OTHER_VERBS = frozenset({"CREATE", "ALTER", "DROP", "GRANT", "REVOKE", "COMMENT", "RENAME", "TRUNCATE"})
# Words after a type name that still belong to the type (``int unsigned``, ``timestamp with time zone``).
_TYPE_SUFFIX_WORDS = frozenset({"UNSIGNED", "SIGNED", "ZEROFILL", "VARYING", "PRECISION"})
_TYPE_SUFFIX_PHRASES = (("WITH", "LOCAL", "TIME", "ZONE"), ("WITH", "TIME", "ZONE"), ("WITHOUT", "TIME", "ZONE"))
_INTERVAL_WORDS = frozenset({"YEAR", "MONTH", "DAY", "HOUR", "MINUTE", "SECOND", "TO"})
# ALTER TABLE actions that begin with one of these may change columns or keys; the rest (ENGINE=, ALGORITHM=,
# CONVERT TO ..) cannot, so an unknown one of them is skipped instead of failing the statement.
_COLUMN_VERBS = frozenset({"ADD", "DROP", "MODIFY", "CHANGE", "ALTER", "RENAME"})
_ALTER_VERBS = _COLUMN_VERBS | {"SET", "ENABLE", "DISABLE", "REBUILD", "SWITCH", "WITH", "CHECK", "NOCHECK"}
# ... unless the verb is followed by one of these: partitions, indexes, non-key constraints, and Oracle's supplemental
# logging (`ADD SUPPLEMENTAL LOG DATA (ALL) COLUMNS`, which Debezium's Oracle connector asks for on every table).
_NON_COLUMN_OBJECTS = frozenset(
    {"PARTITION", "PARTITIONING", "INDEX", "KEY", "UNIQUE", "FULLTEXT", "SPATIAL", "FOREIGN", "CHECK", "CONSTRAINT",
     "SUPPLEMENTAL"}
)
_ORACLE_STATES = frozenset({"ENABLE", "DISABLE", "VALIDATE", "NOVALIDATE", "RELY", "NORELY"})
# Words that change an Oracle column without a type: ``MODIFY c NULL``, ``MODIFY (c INVISIBLE)``.
_ORACLE_COLUMN_STATES = frozenset({"NULL", "VISIBLE", "INVISIBLE", "ENCRYPT", "DECRYPT"})


class DdlError(CdclakeError):
    """A statement is not DDL, or not DDL this module can parse."""


class DdlUnsupported(DdlError):
    """A statement understood, whose effect cdclake cannot follow: an ``ALTER TABLE`` that removes, swaps or loads
    rows of a table's partitions (or tablespace) without row events. The message is the whole reason."""


@dataclass(frozen=True)
class DdlColumn:
    """One column definition.

    Attributes:
        name: Column name without quotes, case as written.
        type_text: The SQL type as written, lower-cased, whitespace removed around parentheses and commas:
            ``varchar(255)``, ``decimal(10,2)``, ``bigint unsigned``, ``timestamp with time zone``,
            ``number(10,2)``, ``enum('a','b')`` (enum/set values keep their case). Integer display widths are
            dropped as MySQL 8 does (``int(11) unsigned`` -> ``int unsigned``) except ``tinyint(1)``, the MySQL
            boolean, and ``zerofill`` columns. Empty when the statement gives no type.
        nullable: False when the definition says ``NOT NULL`` or makes the column part of the primary key.
        default: A constant ``DEFAULT`` as the value's text (``0``, ``-1.50``, ``a'b``, ``true``);
            :data:`DEFAULT_NOW` for the statement's time (``CURRENT_TIMESTAMP``, ``NOW()``, ``GETDATE()``); for a
            MySQL ``NOT NULL`` column ``ALTER TABLE .. ADD`` adds without one, its type's implicit default
            (:func:`_mysql_implicit_default`);
            None for no default, ``NULL``, or an expression, and for a nullable column SQL Server's ``ALTER TABLE ..
            ADD`` adds without ``WITH VALUES`` (SQL Server leaves the existing rows NULL; the default is for new
            rows, whose row events carry their values).
    """

    name: str
    type_text: str
    nullable: bool = True
    default: str | None = None


@dataclass(frozen=True)
class DdlEvent:
    """What one DDL statement (or one table of a multi-table statement) does.

    Attributes:
        kind: One of :data:`KINDS`. ``ALTER TABLE t RENAME TO u`` with no other action is a ``rename_table``;
            with other actions it is an ``alter_table`` that also sets ``new_table``.
        database: The qualifier written before the table (MySQL database, PostgreSQL/SQL Server/Oracle schema;
            of a three-part name, the middle part), or None. For ``create_database``/``drop_database`` the
            database itself.
        table: The table name, or None (database statements, some ``other`` statements).
        columns: ``create_table``: every column, in order; none for ``CREATE TABLE .. AS SELECT``, whose columns
            are the query's (their types are not in the text).
        primary_key: ``create_table``: the key columns (inline ``PRIMARY KEY`` or a table constraint);
            ``alter_table``: the columns of an added primary key.
        added: ``alter_table``: columns added.
        dropped: ``alter_table``: names of columns dropped.
        renamed: ``alter_table``: ``(old, new)`` column names (``RENAME COLUMN``, MySQL ``CHANGE``).
        modified: ``alter_table``: columns whose definition changed (``MODIFY``, ``ALTER COLUMN .. TYPE``,
            ``CHANGE``, under their new name).
        new_database: ``rename_table`` (and renaming ``alter_table``): the target's qualifier, or None.
        new_table: ``rename_table`` (and renaming ``alter_table``): the target table name.
        like: ``create_table`` copying another table (``CREATE TABLE t LIKE s``, PostgreSQL's ``(LIKE s ..)``
            and ``PARTITION OF s``): ``(qualifier or None, table)`` of ``s``; its columns come first, then
            ``columns``.
        like_key: Whether the copy takes ``s``'s primary key (MySQL's ``LIKE`` copies its indexes; PostgreSQL's
            only with ``INCLUDING INDEXES`` or ``INCLUDING ALL``; a partition always has its parent's).
        if_not_exists: ``create_table``: written ``CREATE TABLE IF NOT EXISTS``, which does nothing where the
            table exists (the database still logs it: an application's start-up schema script writes it again
            and again, with the columns of its first version).
        sql: The statement text this event came from.
    """

    kind: str
    database: str | None
    table: str | None
    columns: tuple[DdlColumn, ...] = ()
    primary_key: tuple[str, ...] = ()
    added: tuple[DdlColumn, ...] = ()
    dropped: tuple[str, ...] = ()
    renamed: tuple[tuple[str, str], ...] = ()
    modified: tuple[DdlColumn, ...] = ()
    new_database: str | None = None
    new_table: str | None = None
    like: tuple[str | None, str] | None = None
    like_key: bool = False
    if_not_exists: bool = False
    sql: str = ""


def dialect_for(db_type: str | None) -> str:
    """The sqlglot dialect for a CDC tool's source database type.

    Args:
        db_type: The type as the tool names it (DRS ``"MySQL"``, ``"GaussDB Primary/Standby"``,
            ``"Microsoft SQL Server"``, ...), case-insensitive; None means MySQL, the default of the
            MySQL-born formats (canal, CKafka, dtle).

    Returns:
        One of :data:`DIALECTS`.

    Raises:
        DdlError: A database type with no SQL dialect here (e.g. MongoDB).
    """
    if db_type is None or not db_type.strip():
        return "mysql"
    lowered = " ".join(db_type.lower().split())
    # MySQL first: "GaussDB(for MySQL)" / "TaurusDB" speak MySQL, the other GaussDB editions PostgreSQL.
    if any(word in lowered for word in ("mysql", "mariadb", "taurus", "tidb")):
        return "mysql"
    if any(word in lowered for word in ("postgres", "gauss")):
        return "postgres"
    if "oracle" in lowered:
        return "oracle"
    if any(word in lowered for word in ("sql server", "sqlserver", "mssql")):
        return "tsql"
    raise DdlError(
        f"database type {db_type!r} has no SQL dialect here (known: MySQL, PostgreSQL/GaussDB, Oracle, SQL Server)"
    )


def parse_ddl(sql: str, dialect: str = "mysql") -> list[DdlEvent]:
    """Parse DDL text into events, one per statement.

    Statements are separated by ``;``. A statement naming several tables (``RENAME TABLE a TO b, c TO d``,
    ``DROP TABLE a, b``, ``TRUNCATE a, b``) gives one event per table.

    Args:
        sql: One or more DDL statements.
        dialect: One of :data:`DIALECTS`; :func:`dialect_for` maps a source database type to it.

    Returns:
        The events, in statement order.

    Raises:
        DdlError: Unknown dialect, empty text, text that does not parse, or a statement that is not DDL
            (a query, DML). The message is one line and quotes the start of the statement.
    """
    if dialect not in DIALECTS:
        raise DdlError(f"DDL dialect {dialect!r} is not supported (expected one of {', '.join(DIALECTS)})")
    if not sql or not sql.strip():
        raise DdlError("DDL text is empty")
    statements = _split_statements(sql, dialect)
    if not statements:
        raise DdlError(f"no SQL statement in DDL text {_snippet(sql)!r}")
    events: list[DdlEvent] = []
    for statement in statements:
        try:
            events.extend(_parse_statement(statement, dialect))
        except DdlError:
            raise
        except Exception as exc:  # noqa: BLE001 - sqlglot on text from a stream: any failure is "not understood"
            raise DdlError(f"cannot parse {dialect} DDL {_snippet(statement)!r} "
                           f"({type(exc).__name__}: {_snippet(str(exc))})") from exc
    return events


# --- sqlglot plumbing ---------------------------------------------------------------------------------------

_QUIET: contextvars.ContextVar[bool] = contextvars.ContextVar("cdclake_ddl_quiet", default=False)


class _QuietWhileParsing(logging.Filter):
    """Drops sqlglot's log records emitted by this module's own calls (and only those).

    sqlglot logs every statement it keeps as an opaque command at WARNING; this module handles those itself,
    so the warnings would only be noise in job logs. Other users of sqlglot in the process keep their logging.
    """

    cdclake_ddl_quiet = True  # found again by _install_log_filter when this module is re-imported

    def filter(self, record: logging.LogRecord) -> bool:
        return not _QUIET.get()


def _install_log_filter() -> None:
    logger = logging.getLogger("sqlglot")
    if not any(getattr(f, "cdclake_ddl_quiet", False) for f in logger.filters):
        logger.addFilter(_QuietWhileParsing())


_install_log_filter()


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    token = _QUIET.set(True)
    try:
        yield
    finally:
        _QUIET.reset(token)


@dataclass(frozen=True)
class _Source:
    """A statement's text with its tokens; tokens carry character offsets into ``text``."""

    text: str
    tokens: tuple[Token, ...]
    by_start: dict[int, int] = field(default_factory=dict)

    @classmethod
    def of(cls, text: str, dialect: str) -> "_Source":
        tokens = tuple(_tokenize(text, dialect))
        return cls(text, tokens, {tok.start: i for i, tok in enumerate(tokens)})

    def span(self, first: int, last: int) -> str:
        """Source text of tokens ``first..last`` (inclusive)."""
        return self.text[self.tokens[first].start : self.tokens[last].end + 1]

    def word(self, index: int) -> str:
        """Upper-cased text of a token, or "" past the end."""
        return self.tokens[index].text.upper() if 0 <= index < len(self.tokens) else ""


def _tokenize(text: str, dialect: str) -> list[Token]:
    try:
        with _quiet():
            return Dialect.get_or_raise(dialect).tokenize(text)
    except TokenError as err:
        reason = str(err).splitlines()[0] if str(err) else "cannot tokenize"
        raise DdlError(f"cannot parse {dialect} DDL: {reason} in {_snippet(text)!r}") from err


def _parse(src: _Source, dialect: str) -> exp.Expr:
    """Parse one statement with sqlglot. Raises ParseError."""
    with _quiet():
        trees = Dialect.get_or_raise(dialect).parser().parse(list(src.tokens), src.text)
    trees = [tree for tree in trees if tree is not None]
    if len(trees) != 1:
        raise ParseError(f"expected one statement, got {len(trees)}")
    return trees[0]


def _try_parse(text: str, dialect: str) -> tuple[exp.Expr, _Source] | None:
    try:
        src = _Source.of(text, dialect)
        return _parse(src, dialect), src
    except (SqlglotError, DdlError):
        return None


def _parse_error_reason(err: ParseError) -> str:
    if err.errors:
        first = err.errors[0]
        return f"{first.get('description', 'syntax error')} at line {first.get('line')}, col {first.get('col')}"
    return str(err).splitlines()[0] if str(err) else "syntax error"


def _snippet(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _SNIPPET_CHARS else flat[:_SNIPPET_CHARS] + "..."


def _split_statements(sql: str, dialect: str) -> list[str]:
    """Statement texts, split at ``;`` tokens (so a ``;`` inside a string or comment does not split)."""
    statements: list[str] = []
    current: list[Token] = []
    for tok in [*_tokenize(sql, dialect), None]:
        if tok is None or tok.token_type == TokenType.SEMICOLON:
            if current:
                statements.append(sql[current[0].start : current[-1].end + 1])
            current = []
        else:
            current.append(tok)
    return statements


# --- statements -----------------------------------------------------------------------------------------------


def _parse_statement(text: str, dialect: str) -> list[DdlEvent]:
    if dialect == "mysql":
        executed = _EXECUTED_COMMENT.sub(lambda m: m.group(1) or f" {m.group(2)} ", text) if "/*" in text else text
        if _INDEX_STATEMENT.match(executed):
            executed = _INDEX_OPTION.sub(" ", executed)
        if executed != text:
            return [replace(event, sql=text) for event in _parse_statement(executed, dialect)]
    src = _Source.of(text, dialect)
    if dialect == "mysql":
        readable, spatial = _mysql_readable(src)
        if readable != text:
            def spelled(columns: tuple[DdlColumn, ...]) -> tuple[DdlColumn, ...]:  # a spatial type by its name
                return tuple(replace(c, type_text=spatial.get(c.name, c.type_text)) for c in columns)
            return [replace(event, sql=text, columns=spelled(event.columns), added=spelled(event.added),
                            modified=spelled(event.modified)) for event in _parse_statement(readable, dialect)]
    if dialect == "tsql":
        readable, with_values = _tsql_readable(src)
        events = _parsed(_Source.of(readable, dialect) if readable != text else src, dialect)
        return [replace(event, sql=text, added=event.added if with_values else tuple(
            replace(c, default=None) if c.nullable else c for c in event.added)) for event in events]
    return _parsed(src, dialect)


def _tsql_readable(src: _Source) -> tuple[str, bool]:
    """A T-SQL statement without ``WITH VALUES`` (``ALTER TABLE .. ADD c int NULL DEFAULT 5 WITH VALUES``: the
    existing rows take the default; sqlglot does not read it), and whether it had one. ``CLUSTERED`` and
    ``NONCLUSTERED`` after ``PRIMARY KEY`` or ``UNIQUE`` go too: sqlglot reads them only in a named table constraint
    (``CONSTRAINT pk PRIMARY KEY CLUSTERED (id)``), not inline (``id int PRIMARY KEY CLUSTERED``) or unnamed
    (``PRIMARY KEY CLUSTERED ([id] ASC)``, as SQL Server's scripts write it), and how an index stores its rows
    changes neither the columns nor the key."""
    tokens = src.tokens
    spans = [(tokens[i].start, tokens[i + 1].end + 1) for i in range(len(tokens) - 1)
             if src.word(i) == "WITH" and src.word(i + 1) == "VALUES"]
    with_values = bool(spans)
    spans += [(tokens[i].start, tokens[i].end + 1) for i in range(1, len(tokens))
              if src.word(i) in ("CLUSTERED", "NONCLUSTERED") and tokens[i].token_type != TokenType.IDENTIFIER
              and (tokens[i - 1].token_type == TokenType.PRIMARY_KEY or src.word(i - 1) == "UNIQUE")
              # a named table constraint (`CONSTRAINT uq UNIQUE NONCLUSTERED (c ASC)`, as SSMS scripts it) sqlglot
              # reads with the word, and `UNIQUE (c ASC)` without it not at all
              and not (i >= 3 and src.word(i - 3) == "CONSTRAINT" and src.word(i + 1) == "(")]
    text = src.text
    for start, end in sorted(spans, reverse=True):
        text = text[:start] + text[end:]
    return text, with_values


def _parsed(src: _Source, dialect: str) -> list[DdlEvent]:
    text = src.text
    try:
        tree = _parse(src, dialect)
    except ParseError as err:
        salvaged = _salvage(src, dialect)
        if salvaged is None:
            raise DdlError(f"cannot parse {dialect} DDL: {_parse_error_reason(err)} in {_snippet(text)!r}") from err
        return salvaged
    return _events(tree, src, dialect)


def _events(tree: exp.Expr, src: _Source, dialect: str) -> list[DdlEvent]:
    if isinstance(tree, exp.Create):
        return [_create_event(tree, src, dialect)]
    if isinstance(tree, exp.Alter):
        return [_alter_event(tree, src, dialect)]
    if isinstance(tree, exp.Drop):
        return _drop_events(tree, src.text)
    if isinstance(tree, exp.TruncateTable):
        if _PARTITIONS_OPTION.search(src.text):
            raise DdlUnsupported(
                f"{_snippet(src.text)!r} removes the rows of those partitions only, at the source without row "
                "events, and cdclake does not track which rows a partition holds: the lake table keeps them; "
                "re-snapshot the table")
        return [_table_event("truncate", table, src.text) for table in tree.expressions]
    if isinstance(tree, exp.Command):
        return _command_events(tree, src, dialect)
    if isinstance(tree, exp.Execute) and tree.this is not None and tree.this.name.lower() == "sp_rename":
        return [_sp_rename_event(tree, src.text)]
    if isinstance(tree, exp.Use):
        database = tree.this.name if tree.this is not None else ""
        return [DdlEvent("other", database or None, None, sql=src.text)]
    if isinstance(tree, exp.Comment) or type(tree).__name__ in ("Grant", "Revoke"):
        return [DdlEvent("other", None, None, sql=src.text)]
    raise DdlError(f"not a DDL statement ({src.word(0) or type(tree).__name__.upper()}): {_snippet(src.text)!r}")


def _qualifier(table: exp.Expr) -> str | None:
    db = table.args.get("db") if isinstance(table, exp.Table) else None
    if isinstance(db, str):  # sqlglot leaves T-SQL's empty schema in `db..table` as a plain string
        return db or None
    return db.name if db is not None and db.name else None


_SP_RENAME_PARAMETERS = ("objname", "newname", "objtype")
_BRACKETED_PART = re.compile(r'\[((?:[^\]]|\]\])*)\]|"((?:[^"]|"")*)"|([^.]+)')


def _sp_rename_event(tree: exp.Execute, sql: str) -> DdlEvent:
    """SQL Server's ``EXEC sp_rename 'dbo.t.c', 'd', 'COLUMN'`` (a column), ``sp_rename 'dbo.t', 'u'`` (a table);
    other object types (an index, statistics) change no column."""
    args: dict[str, str] = {}
    for i, e in enumerate(tree.expressions):
        name = e.this.name.lower() if isinstance(e, exp.EQ) and isinstance(e.this, exp.Parameter) else None
        value = e.expression if isinstance(e, exp.EQ) else e
        key = name if name in _SP_RENAME_PARAMETERS else _SP_RENAME_PARAMETERS[min(i, 2)]
        args[key] = value.name if isinstance(value, (exp.Literal, exp.National, exp.Identifier)) else value.sql()
    parts = [m.group(1) if m.group(1) is not None else m.group(2) if m.group(2) is not None else m.group(3).strip()
             for m in _BRACKETED_PART.finditer(args.get("objname", ""))]
    new, kind = args.get("newname", "").strip().strip("[]"), args.get("objtype", "object").strip().lower()
    if kind == "column" and len(parts) >= 2 and new:
        return DdlEvent("alter_table", parts[-3] if len(parts) > 2 else None, parts[-2],
                        renamed=((parts[-1], new),), sql=sql)
    if kind == "object" and parts and new:
        schema = parts[-2] if len(parts) > 1 else None
        return DdlEvent("rename_table", schema, parts[-1], new_database=schema, new_table=new, sql=sql)
    return DdlEvent("other", None, None, sql=sql)


def _table_event(kind: str, table: exp.Expr, sql: str) -> DdlEvent:
    return DdlEvent(kind, _qualifier(table), table.name or None, sql=sql)


def _database_event(kind: str, target: exp.Expr, sql: str) -> DdlEvent:
    # MySQL's CREATE DATABASE d parses to Table(this=d); PostgreSQL's CREATE SCHEMA s to Table(db=s).
    name = target.name or _qualifier(target)
    return DdlEvent(kind, name, None, sql=sql)


def _create_event(tree: exp.Create, src: _Source, dialect: str) -> DdlEvent:
    event = _create_statement_event(tree, src, dialect)
    if event.kind == "create_table" and tree.args.get("exists"):
        return replace(event, if_not_exists=True)
    return event


def _create_statement_event(tree: exp.Create, src: _Source, dialect: str) -> DdlEvent:
    kind = (tree.args.get("kind") or "").upper()
    target = tree.this
    if kind in ("DATABASE", "SCHEMA"):
        return _database_event("create_database", target, src.text)
    if kind == "INDEX" and isinstance(target, exp.Index):
        table = target.args.get("table")
        if table is None:
            return DdlEvent("create_index", None, None, sql=src.text)
        return _table_event("create_index", table, src.text)
    properties = tree.args.get("properties")
    if kind != "TABLE" or any(isinstance(p, exp.TemporaryProperty) for p in (properties.expressions
                                                                               if properties else ())):
        table = target.this if isinstance(target, exp.Schema) else target
        return DdlEvent("other" if kind != "TABLE" else "temporary_table", _qualifier(table), table.name or None,
                        sql=src.text)
    if not isinstance(target, exp.Schema):  # CREATE TABLE t LIKE s, or .. AS SELECT: no column list to read
        like = next((p for p in (properties.expressions if properties else ()) if isinstance(p, exp.LikeProperty)),
                    None)
        partition_of = next((p for p in (properties.expressions if properties else ())
                             if isinstance(p, exp.PartitionedOfProperty)), None)
        if partition_of is not None:
            return _partition_event(target, partition_of, src.text)
        if like is None:  # CREATE TABLE .. AS SELECT: its columns are the query's, which the text does not type
            return _table_event("create_table", target, src.text)
        return DdlEvent("create_table", _qualifier(target), target.name or None, like=_like_source(like),
                        like_key=True, sql=src.text)
    columns, key = _schema_columns(target, src, dialect)
    like = next((e for e in target.expressions if isinstance(e, exp.LikeProperty)), None)
    return DdlEvent(
        "create_table", _qualifier(target.this), target.this.name, columns=columns, primary_key=key,
        like=_like_source(like) if like is not None else None, like_key=like is not None and _like_copies_key(like),
        sql=src.text,
    )


def _partition_event(target: exp.Expr, partition_of: exp.PartitionedOfProperty, sql: str) -> DdlEvent:
    """PostgreSQL's ``CREATE TABLE p1 PARTITION OF p [(options)] FOR VALUES ..``: a partition has its parent's
    columns, and (PostgreSQL 11 on) its parent's primary key, so it is read as a copy of ``p`` with its key. Its
    parenthesized list can add no column, only options of the parent's (``c DEFAULT 5``, no type) and constraints,
    of which a ``PRIMARY KEY`` is its own key."""
    parent = partition_of.this
    key: list[str] = []
    if isinstance(parent, exp.Schema):
        key = [name for e in parent.expressions for name in _constraint_key(e)] or [
            e.name for e in parent.expressions if isinstance(e, exp.ColumnDef) and _has_inline_primary_key(e)]
        parent = parent.this
    return DdlEvent("create_table", _qualifier(target), target.name or None, primary_key=tuple(dict.fromkeys(key)),
                    like=(_qualifier(parent), parent.name), like_key=True, sql=sql)


def _like_source(like: exp.LikeProperty) -> tuple[str | None, str]:
    return _qualifier(like.this), like.this.name


def _like_copies_key(like: exp.LikeProperty) -> bool:
    """Whether PostgreSQL's ``(LIKE s options)`` copies the primary key: ``INCLUDING ALL`` or ``INDEXES`` (later
    options win, as PostgreSQL reads them in order)."""
    copies = False
    for option in like.expressions:
        action = str(option.this).upper()
        what = option.args["value"].name.upper() if option.args.get("value") is not None else ""
        if what in ("ALL", "INDEXES"):
            copies = action == "INCLUDING"
    return copies


def _schema_columns(schema: exp.Schema, src: _Source, dialect: str) -> tuple[tuple[DdlColumn, ...], tuple[str, ...]]:
    """Columns and primary key of a CREATE TABLE column list; key columns are marked NOT NULL.

    A MySQL table without a PRIMARY KEY has its first UNIQUE index whose columns are all NOT NULL as one (InnoDB's
    clustered index; ``DESC`` shows it as ``PRI``, and canal's ``pkNames`` name it)."""
    columns: list[DdlColumn] = []
    inline_key: list[str] = []
    table_key: list[str] = []
    uniques: list[list[str] | None] = []  # None: a prefix index (``name(10)``), which cannot be the key
    for element in schema.expressions:
        if isinstance(element, exp.ColumnDef):
            columns.append(_column(element, src, dialect))
            if _has_inline_primary_key(element):
                inline_key.append(element.name)
            if any(isinstance(c.args.get("kind"), exp.UniqueColumnConstraint) for c in element.constraints):
                uniques.append([element.name])
        else:
            table_key.extend(_constraint_key(element))
            uniques.extend(_unique_columns(element))
    key = tuple(dict.fromkeys(table_key or inline_key))
    if not key and dialect == "mysql":
        not_null = {c.name for c in columns if not c.nullable}
        key = next((tuple(u) for u in uniques if u and set(u) <= not_null), ())
    columns = [replace(c, nullable=False) if c.name in key else c for c in columns]
    return tuple(columns), key


def _unique_columns(element: exp.Expr) -> list[list[str] | None]:
    """The column lists of a table-level ``UNIQUE [KEY name] (cols)`` (or ``CONSTRAINT c UNIQUE (cols)``)."""
    parts = element.expressions if isinstance(element, exp.Constraint) else [element]
    found: list[list[str] | None] = []
    for part in parts:
        if isinstance(part, exp.UniqueColumnConstraint) and isinstance(part.this, exp.Schema):
            names = part.this.expressions
            found.append(None if any(isinstance(n, exp.ColumnPrefix) for n in names)
                         else [_key_column_name(n) for n in names])
    return found


def _has_inline_primary_key(column: exp.ColumnDef) -> bool:
    return any(isinstance(c.args.get("kind"), exp.PrimaryKeyColumnConstraint) for c in column.constraints)


def _constraint_key(element: exp.Expr) -> list[str]:
    """Key columns of a table-level PRIMARY KEY (named or not, SQL Server CLUSTERED or not), else []."""
    if isinstance(element, exp.PrimaryKey):
        return [_key_column_name(e) for e in element.expressions]
    if isinstance(element, exp.Constraint):
        parts = element.expressions
        if any(isinstance(p, exp.PrimaryKey) for p in parts):
            return [name for p in parts if isinstance(p, exp.PrimaryKey) for name in _constraint_key(p)]
        if any(isinstance(p, exp.PrimaryKeyColumnConstraint) for p in parts):
            # SQL Server: CONSTRAINT pk PRIMARY KEY [NON]CLUSTERED (cols) keeps the columns on the CLUSTERED part.
            clustered = (exp.ClusteredColumnConstraint, exp.NonClusteredColumnConstraint)
            return [_key_column_name(e) for p in parts if isinstance(p, clustered) for e in p.this]
    return []


def _key_column_name(element: exp.Expr) -> str:
    # Ordered (``id DESC``) and ColumnPrefix (MySQL ``name(10)``) wrap the column; Column/Identifier name it.
    if isinstance(element, (exp.Ordered, exp.ColumnPrefix)):
        return _key_column_name(element.this)
    return element.name


_MYSQL_BARE_TYPES = {"bit": "bit(1)", **{f"{name}{sign}": f"decimal(10,0){sign}"
                                         for name in ("decimal", "numeric", "dec", "fixed")
                                         for sign in ("", " unsigned")}}
"""MySQL types written without their size, as MySQL sizes them (``BIT`` is ``BIT(1)``, ``DECIMAL``
``DECIMAL(10,0)``)."""


def _column(column: exp.ColumnDef, src: _Source, dialect: str, *, added: bool = False) -> DdlColumn:
    """One column definition; ``added`` by ALTER TABLE, a MySQL ``NOT NULL`` column without a default of its own
    gets its type's implicit default, which MySQL gives the existing rows."""
    # Constraints other than ColumnConstraint (e.g. InOutColumnConstraint, which sqlglot reads from `... int in`)
    # have no kind (also in _has_inline_primary_key).
    kinds = [c.args.get("kind") for c in column.constraints]
    # An identity column (PostgreSQL's and Oracle's GENERATED .. AS IDENTITY, SQL Server's IDENTITY(1,1)) is NOT
    # NULL without saying so, as the SQL standard has it.
    not_null = any(
        (isinstance(kind, exp.NotNullColumnConstraint) and not kind.args.get("allow_null"))
        or isinstance(kind, exp.PrimaryKeyColumnConstraint)
        or (isinstance(kind, exp.GeneratedAsIdentityColumnConstraint) and kind.args.get("expression") is None)
        for kind in kinds
    )
    default = next((_default_text(k.this) for k in kinds if isinstance(k, exp.DefaultColumnConstraint)), None)
    type_text = _type_text(column.this, column.args.get("kind"), src, dialect)
    if dialect == "mysql":  # a bare type in MySQL DDL has MySQL's default size, not canal's "size unknown"
        type_text = _MYSQL_BARE_TYPES.get(type_text, type_text)
    if added and dialect == "mysql" and not_null and all(isinstance(kind, _PLAIN_KINDS) for kind in kinds):
        default = _mysql_implicit_default(type_text)
    return DdlColumn(column.name, type_text, not not_null, default)


_PLAIN_KINDS = (exp.NotNullColumnConstraint, exp.CommentColumnConstraint, exp.CharacterSetColumnConstraint,
                exp.CollateColumnConstraint)
"""Constraints that leave a MySQL ``NOT NULL`` column without a default of its own (no ``DEFAULT``, key,
``AUTO_INCREMENT`` or generated value)."""

_MYSQL_ZERO_TYPES = re.compile(
    r"^(tinyint|smallint|mediumint|int|integer|bigint|decimal|numeric|dec|fixed|float|double|real|bool|boolean)\b")
_MYSQL_EMPTY_TYPES = re.compile(r"^(char|varchar|nchar|nvarchar|national|tinytext|text|mediumtext|longtext|set)\b")
_MYSQL_FIRST_ENUM = re.compile(r"^enum\('((?:[^']|'')*)'")


def _mysql_implicit_default(type_text: str) -> str | None:
    """The value MySQL gives the existing rows when ``ALTER TABLE .. ADD`` a ``NOT NULL`` column without a
    ``DEFAULT`` (the type's implicit default; no row events say so): 0, the empty string, an enum's first value,
    ``00:00:00``. None where that value is not one the lake keeps (zero dates, empty binary and JSON)."""
    if _MYSQL_ZERO_TYPES.match(type_text):
        return "0"
    if _MYSQL_EMPTY_TYPES.match(type_text):
        return ""
    enum = _MYSQL_FIRST_ENUM.match(type_text)
    if enum:
        return enum.group(1).replace("''", "'")
    return "00:00:00" if re.match(r"^time\b", type_text) else None


DEFAULT_NOW = "\x00now"
""":attr:`DdlColumn.default` of a column whose default is the time the row is written (``CURRENT_TIMESTAMP``)."""


_NOW_FUNCTIONS = frozenset({"NOW", "CURRENT_TIMESTAMP", "LOCALTIMESTAMP", "GETDATE", "GETUTCDATE", "SYSDATETIME",
                            "SYSDATE", "SYSTIMESTAMP"})
"""Functions (as sqlglot leaves them unparsed) whose value is the time the row is written: MySQL's ``NOW()``,
``NOW(3)``, SQL Server's ``GETDATE()``, Oracle's ``SYSDATE``."""


def _default_text(value: exp.Expr | None) -> str | None:
    """A constant default's value as text (see :attr:`DdlColumn.default`).

    Constants come wrapped in several ways: SQL Server's parentheses (``((0))``), a character-set introducer
    (``_UTF8MB4'x'``, TiCDC writes every string default so) or a collation, PostgreSQL's cast to the column's type
    (``'abc'::character varying``); MySQL's bit and hex literals (``b'1'``, ``0x61``) are their number and text.
    """
    while isinstance(value, (exp.Paren, exp.Collate, exp.Cast, exp.Introducer)):
        value = value.expression if isinstance(value, exp.Introducer) else value.this
    if isinstance(value, (exp.Literal, exp.National)):
        return str(value.this)
    if isinstance(value, exp.Neg) and isinstance(value.this, exp.Literal) and not value.this.is_string:
        return f"-{value.this.this}"
    if isinstance(value, exp.Boolean):
        return "true" if value.this else "false"
    if isinstance(value, exp.BitString):
        return str(int(str(value.this) or "0", 2))
    if isinstance(value, exp.HexString):
        try:
            return bytes.fromhex(str(value.this)).decode("utf-8")
        except ValueError:
            return None  # not text: no value to fill
    if isinstance(value, exp.CurrentTimestamp) or (
            isinstance(value, (exp.Anonymous, exp.Column)) and str(value.this).upper() in _NOW_FUNCTIONS):
        return DEFAULT_NOW
    return None


# --- type text ---------------------------------------------------------------------------------------------------


def _type_text(
    name: exp.Expr, dtype: exp.DataType | None, src: _Source, dialect: str, skip: frozenset[str] = frozenset()
) -> str:
    """The column type as written in the statement, normalized (see :class:`DdlColumn`).

    The type's tokens are the ones after the column name (after ``skip`` words such as PostgreSQL's
    ``SET DATA TYPE``). sqlglot's own rendering of the type is the fallback when the written text cannot be
    located or does not re-parse to the type sqlglot parsed.
    """
    if dtype is None:
        return ""
    written = _written_type(name, src, skip)
    if written is not None and _same_type(written, dtype, dialect):
        return _drop_display_width(written)
    with _quiet():
        generated = dtype.sql(dialect=dialect)
    return _drop_display_width(_join_type_tokens(_Source.of(generated, dialect), 0, None))


def _written_type(name: exp.Expr, src: _Source, skip: frozenset[str]) -> str | None:
    start = name.meta.get("start") if name.meta else None
    index = src.by_start.get(start) if start is not None else None
    if index is None:
        return None
    first = index + 1
    while src.word(first) in skip:
        first += 1
    if first >= len(src.tokens):
        return None
    return _join_type_tokens(src, first, _type_end(src, first))


def _type_end(src: _Source, first: int) -> int:
    """Index of the last token of the type starting at ``first``."""
    tokens = src.tokens
    head = src.word(first)
    last = first
    i = first + 1
    while i < len(tokens):
        if tokens[i].token_type in (TokenType.L_PAREN, TokenType.L_BRACKET):
            close = _matching_close(tokens, i)
            if close is None:
                break
            last = i = close
            i += 1
            continue
        word = src.word(i)
        phrase = next(
            (p for p in _TYPE_SUFFIX_PHRASES if tuple(src.word(i + k) for k in range(len(p))) == p), None
        )
        if phrase:
            last = i = i + len(phrase) - 1
        elif word in _TYPE_SUFFIX_WORDS or (head == "INTERVAL" and word in _INTERVAL_WORDS):
            last = i
        else:
            break
        i += 1
    return last


def _matching_close(tokens: Sequence[Token], open_index: int) -> int | None:
    depth = 0
    for i in range(open_index, len(tokens)):
        kind = tokens[i].token_type
        if kind in (TokenType.L_PAREN, TokenType.L_BRACKET):
            depth += 1
        elif kind in (TokenType.R_PAREN, TokenType.R_BRACKET):
            depth -= 1
            if depth == 0:
                return i
    return None


def _join_type_tokens(src: _Source, first: int, last: int | None) -> str:
    """Tokens ``first..last`` joined with single spaces, none around ``( ) [ ] ,``; lower-cased but strings."""
    out = ""
    tight_after = ("(", "[", ",")
    tight_before = {TokenType.L_PAREN, TokenType.R_PAREN, TokenType.L_BRACKET, TokenType.R_BRACKET, TokenType.COMMA}
    end = len(src.tokens) - 1 if last is None else last
    for tok in src.tokens[first : end + 1]:
        piece = src.text[tok.start : tok.end + 1]
        if tok.token_type != TokenType.STRING:
            piece = piece.lower()
        if out and not out.endswith(tight_after) and tok.token_type not in tight_before:
            out += " "
        out += piece
    return out


def _same_type(written: str, dtype: exp.DataType, dialect: str) -> bool:
    try:
        with _quiet():
            return exp.DataType.build(written, dialect=dialect) == dtype
    except (SqlglotError, ValueError):
        return False


def _drop_display_width(type_text: str) -> str:
    """``int(11) unsigned`` -> ``int unsigned``, as MySQL 8 reports it; ``tinyint(1)`` and zerofill keep theirs."""
    match = _DISPLAY_WIDTH.match(type_text)
    if not match or type_text.startswith("tinyint(1)") or "zerofill" in type_text.split():
        return type_text
    return match.group(1) + type_text[match.end() :]


# --- ALTER TABLE ---------------------------------------------------------------------------------------------


@dataclass
class _AlterParts:
    """What the actions of one ALTER TABLE statement do, collected action by action."""

    primary_key: list[str] = field(default_factory=list)
    added: list[DdlColumn] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    renamed: list[tuple[str, str]] = field(default_factory=list)
    modified: list[DdlColumn] = field(default_factory=list)
    new_table: exp.Expr | None = None
    new_schema: str | None = None  # PostgreSQL's SET SCHEMA s: the table moves to s under its name
    other_actions: int = 0
    truncated: bool = False  # MySQL's TRUNCATE PARTITION ALL: every row goes


def _alter_event(tree: exp.Alter, src: _Source, dialect: str) -> DdlEvent:
    table = tree.this
    if (tree.args.get("kind") or "").upper() != "TABLE":
        return DdlEvent("other", _qualifier(table), table.name or None, sql=src.text)
    parts = _AlterParts()
    for action in _alter_actions(tree):
        _apply_action(action, src, dialect, parts)
    return _alter_parts_event(table, parts, src.text)


def _alter_actions(tree: exp.Alter) -> list[exp.Expr]:
    """The actions of a parsed ALTER, with sqlglot's reading of ``RENAME a TO b`` corrected.

    PostgreSQL's column rename without the COLUMN keyword comes out of sqlglot 30 as a *table* rename to ``a``
    plus a ``TO b`` option; it is turned back into the column rename it is.
    """
    actions = list(tree.args.get("actions") or [])
    to = next((o for o in tree.args.get("options") or [] if isinstance(o, exp.ToTableProperty)), None)
    renames = [a for a in actions if isinstance(a, exp.AlterRename)]
    if to is None or len(renames) != 1:
        return actions
    fixed = exp.RenameColumn(this=exp.column(renames[0].this.name), to=exp.column(to.this.name))
    return [fixed if a is renames[0] else a for a in actions]


def _alter_parts_event(table: exp.Expr, parts: _AlterParts, sql: str) -> DdlEvent:
    if parts.truncated:  # a partition action is the statement's only one (MySQL allows no other beside it)
        return _table_event("truncate", table, sql)
    changes = (parts.primary_key, parts.added, parts.dropped, parts.renamed, parts.modified)
    new = parts.new_table
    if new is None and parts.new_schema is not None:
        new = exp.table_(exp.to_identifier(table.name), db=exp.to_identifier(parts.new_schema))
    pure_rename = new is not None and not any(changes) and not parts.other_actions
    return DdlEvent(
        "rename_table" if pure_rename else "alter_table",
        _qualifier(table),
        table.name,
        primary_key=tuple(dict.fromkeys(parts.primary_key)),
        added=tuple(parts.added),
        dropped=tuple(parts.dropped),
        renamed=tuple(parts.renamed),
        modified=tuple(parts.modified),
        new_database=_qualifier(new) if new is not None else None,
        new_table=new.name if new is not None else None,
        sql=sql,
    )


def _apply_action(action: exp.Expr, src: _Source, dialect: str, parts: _AlterParts) -> None:
    """Record one parsed ALTER TABLE action; actions that change no column or key only count as "other"."""
    if isinstance(action, exp.ColumnDef):
        parts.added.append(_column(action, src, dialect, added=True))
        if _has_inline_primary_key(action):
            parts.primary_key.append(action.name)
    elif isinstance(action, exp.Schema):  # Oracle ADD (c NUMBER, d DATE); MySQL ADD COLUMN (c int, PRIMARY KEY (c))
        for element in action.expressions:
            _apply_action(element, src, dialect, parts)
    elif isinstance(action, (exp.PrimaryKey, exp.Constraint)) and _constraint_key(action):
        parts.primary_key.extend(_constraint_key(action))
    elif isinstance(action, exp.ModifyColumn):
        column = _column(action.this, src, dialect)
        parts.modified.append(column)
        if _has_inline_primary_key(action.this):  # MODIFY k int PRIMARY KEY
            parts.primary_key.append(column.name)
        old = action.args.get("rename_from")
        # MySQL CHANGE old new type; `CHANGE c c bigint` only changes the type.
        if old is not None and old.name != column.name:
            parts.renamed.append((old.name, column.name))
    elif isinstance(action, exp.AlterColumn) and action.args.get("dtype") is not None:
        type_text = _type_text(action.this, action.args["dtype"], src, dialect, frozenset({"SET", "DATA", "TYPE"}))
        parts.modified.append(DdlColumn(action.this.name, type_text, action.args.get("allow_null") is not False))
    elif isinstance(action, exp.RenameColumn):
        parts.renamed.append((action.this.name, action.args["to"].name))
    elif isinstance(action, exp.Drop) and (action.args.get("kind") or "").upper() == "COLUMN":
        parts.dropped.extend(column.name for column in action.args.get("tables") or [])
    elif isinstance(action, exp.AddConstraint):
        key = [name for constraint in action.expressions for name in _constraint_key(constraint)]
        if key:
            parts.primary_key.extend(key)
        else:  # an index, unique key, foreign key or check
            parts.other_actions += 1
    elif isinstance(action, exp.AlterRename):
        parts.new_table = action.this
    elif isinstance(action, exp.Command):
        _apply_unparsed_action(_Source.of(f"{action.this} {action.expression}", dialect), dialect, parts, src.text)
    else:  # ALTER COLUMN .. SET DEFAULT, DROP INDEX, RENAME INDEX, DROP PRIMARY KEY, ...
        parts.other_actions += 1


def _apply_unparsed_action(action: _Source, dialect: str, parts: _AlterParts, statement: str) -> None:
    """Token-level fallback for one ALTER TABLE action sqlglot could not parse.

    Understood: ``ADD [COLUMN] (defs)``, ``MODIFY [COLUMN] (defs)``, ``MODIFY [COLUMN] def``, ``DROP (names)``
    and ``RENAME [TO|AS] name``; the column definitions themselves are parsed by sqlglot. Also Oracle's ``SET UNUSED``
    (a drop), ``DROP UNUSED COLUMNS``, PostgreSQL's ``SET SCHEMA`` and its changes of a column's identity, which
    change no column (:func:`_changes_identity`).

    Raises:
        DdlError: The action may change columns or keys but is none of the above.
    """
    verb, i = action.word(0), 1
    target = (action.word(1).split() or [""])[0]
    if verb == "TRUNCATE" and target == "PARTITION" and action.word(2) == "ALL" and len(action.tokens) == 3:
        parts.truncated = True
        return
    if verb in ("TRUNCATE", "DROP", "EXCHANGE") and target in _PARTITION_WORDS or verb == "SWITCH":
        # MySQL and Oracle remove the partitions' rows (EXCHANGE: swap in another table's; SQL Server's SWITCH
        # [PARTITION n] TO t2: move them out) with no row events; Oracle's TRUNCATE|DROP PARTITIONS p1, p2 too
        raise DdlUnsupported(
            f"ALTER TABLE action {_snippet(action.text)!r} removes or replaces rows of partitions at the source "
            "without row events, and cdclake does not track which rows a partition holds: the lake table keeps "
            "them; re-snapshot the table")
    if verb == "IMPORT" and "TABLESPACE" in action.text.upper().split():
        raise DdlUnsupported(
            f"ALTER TABLE action {_snippet(action.text)!r} loads rows from a tablespace file at the source without "
            "row events: the lake table does not get them; re-snapshot the table")
    key_at = next((j for j in range(1, len(action.tokens) - 1) if action.tokens[j].token_type == TokenType.PRIMARY_KEY
                   and action.tokens[j + 1].token_type == TokenType.L_PAREN), None)
    if verb == "ADD" and key_at is not None and (key_at == 1 or (action.word(1) == "CONSTRAINT" and key_at == 3)):
        # Oracle's `ADD CONSTRAINT pk PRIMARY KEY (a, b) USING INDEX .. ENABLE NOVALIDATE` (DBMS_METADATA's form)
        close = _matching_close(action.tokens, key_at + 1)
        parts.primary_key.extend(_identifier_text(g) for g in _split_top_level(action.tokens[key_at + 2 : close]))
        return
    if verb == "SET" and action.word(1) == "UNUSED":  # Oracle: SET UNUSED (c, d) / SET UNUSED COLUMN c: dropped
        j = 3 if action.word(2) == "COLUMN" else 2
        if j < len(action.tokens) and action.tokens[j].token_type == TokenType.L_PAREN:
            groups = _split_top_level(action.tokens[j + 1 : _matching_close(action.tokens, j)])
        else:
            groups = [list(action.tokens[j : j + 1])]
        parts.dropped.extend(_identifier_text(g) for g in groups)
        return
    if dialect == "oracle" and verb == "DROP" and (action.word(1), action.word(2)) in (
            ("UNUSED", "COLUMNS"), ("COLUMNS", "CONTINUE")):
        # Oracle's DROP UNUSED COLUMNS [CHECKPOINT n] (and DROP COLUMNS CONTINUE, which resumes it) frees the space
        # of columns SET UNUSED dropped already (reported as dropped then): no column changes now.
        parts.other_actions += 1
        return
    if verb == "ALTER" and _changes_identity(action, 2 if action.word(1) == "COLUMN" else 1):
        parts.other_actions += 1
        return
    if verb == "SET" and action.word(1) == "SCHEMA" and len(action.tokens) == 3:
        parts.new_schema = _identifier_text(action.tokens[2:])
        return
    # The tokenizer may keep the rest of a RENAME as one string token (`CONSTRAINT a TO b`).
    if verb in ("MODIFY", "RENAME") and (action.word(1).split() or [""])[0] in ("PARTITION", "SUBPARTITION",
                                                                                  "CONSTRAINT"):
        parts.other_actions += 1  # Oracle's MODIFY PARTITION p COMPRESS; RENAME CONSTRAINT a TO b
        return
    if verb in ("ADD", "MODIFY") and action.word(i) == "COLUMN":
        i += 1
    parenthesized = i < len(action.tokens) and action.tokens[i].token_type == TokenType.L_PAREN
    close = _matching_close(action.tokens, i) if parenthesized else None
    if verb in ("ADD", "MODIFY") and close == len(action.tokens) - 1:
        columns, key = _column_defs(action.span(i + 1, close - 1), dialect, added=verb == "ADD")
        (parts.added if verb == "ADD" else parts.modified).extend(columns)
        parts.primary_key.extend(key)
        return
    if verb == "MODIFY" and not parenthesized and i < len(action.tokens):
        columns, key = _column_defs(action.span(i, len(action.tokens) - 1), dialect)
        parts.modified.extend(columns)
        parts.primary_key.extend(key)
        return
    if verb == "DROP" and close == len(action.tokens) - 1:
        names = _split_top_level(action.tokens[i + 1 : close])
        parts.dropped.extend(_identifier_text(group) for group in names)
        return
    if verb == "RENAME" and action.word(i) not in ("COLUMN", "INDEX", "KEY"):
        if action.word(i) in ("TO", "AS"):
            i += 1
        if i >= len(action.tokens):
            raise DdlError(f"cannot parse {dialect} DDL: ALTER TABLE action {_snippet(action.text)!r} names no new "
                           "table name")
        parts.new_table = _table_name(action.span(i, len(action.tokens) - 1), dialect)
        return
    if verb in _COLUMN_VERBS and action.word(1) not in _NON_COLUMN_OBJECTS:
        raise DdlError(
            f"cannot parse {dialect} DDL: ALTER TABLE action {_snippet(action.text)!r} may change columns or keys"
            f" but is not understood, in {_snippet(statement)!r}"
        )
    parts.other_actions += 1


_SEQUENCE_OPTIONS = frozenset({"INCREMENT", "START", "MINVALUE", "MAXVALUE", "NO", "CACHE", "CYCLE", "SEQUENCE",
                               "AS", "OWNED", "LOGGED", "UNLOGGED"})


def _changes_identity(action: _Source, name_at: int) -> bool:
    """Whether ``ALTER [COLUMN] c ..`` (``c`` at ``name_at``) changes only how PostgreSQL generates the column's
    values: ``ADD GENERATED .. AS IDENTITY`` (the column must be NOT NULL already), ``SET GENERATED ..``,
    ``SET INCREMENT BY ..`` and the other sequence options, ``RESTART [WITH n]``, ``DROP IDENTITY [IF EXISTS]``
    (the column keeps its type and its NOT NULL). Such a change may be followed only by more of them."""
    first, second = action.word(name_at + 1), action.word(name_at + 2)
    return (first, second) in (("ADD", "GENERATED"), ("SET", "GENERATED"), ("DROP", "IDENTITY")) or first == "RESTART" \
        or (first == "SET" and second in _SEQUENCE_OPTIONS)


def _column_defs(defs: str, dialect: str, *, added: bool = False) -> tuple[list[DdlColumn], list[str]]:
    """Column definitions (``a int, b varchar(3)``) parsed by sqlglot inside a synthetic CREATE TABLE, and the
    primary key among them (MySQL's ``ADD (k int, PRIMARY KEY (k))``, ``MODIFY k int PRIMARY KEY``)."""
    untyped: list[DdlColumn] = []
    if dialect == "oracle":  # MODIFY (c NULL), (c INVISIBLE): a column's state, not its type
        groups = _split_top_level(_Source.of(defs, dialect).tokens)
        stated = [g for g in groups if len(g) >= 2 and all(t.text.upper() in _ORACLE_COLUMN_STATES for t in g[1:])]
        untyped = [DdlColumn(_identifier_text(g[:1]), "") for g in stated]
        defs = ", ".join(defs[g[0].start : g[-1].end + 1] for g in groups if g not in stated)
        if not defs:
            return untyped, []
    parsed = _try_parse(f"CREATE TABLE {_SYNTHETIC_TABLE} ({defs})", dialect)
    if parsed is None or not isinstance(parsed[0], exp.Create) or not isinstance(parsed[0].this, exp.Schema):
        raise DdlError(f"cannot parse column definitions {_snippet(defs)!r}")
    tree, src = parsed
    elements = tree.this.expressions
    key = [name for e in elements if not isinstance(e, exp.ColumnDef) for name in _constraint_key(e)] or [
        e.name for e in elements if isinstance(e, exp.ColumnDef) and _has_inline_primary_key(e)]
    return untyped + [_column(e, src, dialect, added=added) for e in elements if isinstance(e, exp.ColumnDef)], key


def _identifier_text(group: Sequence[Token]) -> str:
    if len(group) != 1 or group[0].token_type not in (TokenType.VAR, TokenType.IDENTIFIER):
        raise DdlError(f"expected a column name, got {_snippet(' '.join(t.text for t in group))!r}")
    return group[0].text


def _split_top_level(tokens: Sequence[Token]) -> list[list[Token]]:
    """Token groups separated by commas outside parentheses."""
    groups: list[list[Token]] = [[]]
    depth = 0
    for tok in tokens:
        if tok.token_type in (TokenType.L_PAREN, TokenType.L_BRACKET):
            depth += 1
        elif tok.token_type in (TokenType.R_PAREN, TokenType.R_BRACKET):
            depth -= 1
        if tok.token_type == TokenType.COMMA and depth == 0:
            groups.append([])
        else:
            groups[-1].append(tok)
    return [g for g in groups if g]


def _table_name(text: str, dialect: str) -> exp.Table:
    try:
        with _quiet():
            table = sqlglot.parse_one(text, into=exp.Table, read=dialect)
    except SqlglotError as err:
        raise DdlError(f"expected a table name, got {_snippet(text)!r}") from err
    if not isinstance(table, exp.Table) or not table.name:
        raise DdlError(f"expected a table name, got {_snippet(text)!r}")
    return table


# --- DROP and opaque commands -------------------------------------------------------------------------------------


def _drop_events(tree: exp.Drop, sql: str) -> list[DdlEvent]:
    kind = (tree.args.get("kind") or "").upper()
    targets = tree.args.get("tables") or []
    if kind == "TABLE":
        return [_table_event("temporary_table" if tree.args.get("temporary") else "drop_table", t, sql)
                for t in targets]
    if kind in ("DATABASE", "SCHEMA"):
        return [_database_event("drop_database", t, sql) for t in targets]
    if kind == "INDEX":
        on = tree.args.get("cluster")  # MySQL DROP INDEX ix ON db.t
        if isinstance(on, exp.OnProperty) and isinstance(on.this, exp.Table):
            return [_table_event("drop_index", on.this, sql)]
        return [DdlEvent("drop_index", _qualifier(t), None, sql=sql) for t in targets]
    return [DdlEvent("other", _qualifier(t), t.name or None, sql=sql) for t in targets] or [
        DdlEvent("other", None, None, sql=sql)
    ]


def _command_events(tree: exp.Command, src: _Source, dialect: str) -> list[DdlEvent]:
    """Statements sqlglot kept as an opaque command: the fallbacks, else "other" for DDL verbs."""
    verb = str(tree.this).upper()
    if verb == "RENAME":
        return _rename_events(src, dialect)
    salvaged = _salvage(src, dialect)
    if salvaged is not None:
        return salvaged
    if _table_keyword_at(src) is not None and verb in ("CREATE", "ALTER"):
        raise DdlError(f"cannot parse {dialect} DDL: sqlglot does not understand {_snippet(src.text)!r}")
    if verb in _OTHER_VERBS:
        return [DdlEvent("other", None, None, sql=src.text)]
    raise DdlError(f"not a DDL statement ({verb}): {_snippet(src.text)!r}")


def _rename_events(src: _Source, dialect: str) -> list[DdlEvent]:
    """Token-level fallback for MySQL ``RENAME TABLE a TO b[, c TO d]`` and Oracle ``RENAME a TO b``.

    sqlglot 30 keeps both as an opaque command. Each ``old TO new`` pair gives one event; the names
    themselves are parsed by sqlglot.
    """
    # The tokenizer keeps everything after RENAME as one string token; tokenize that text on its own.
    rest = _Source.of(src.text[src.tokens[0].end + 1 :], dialect) if src.tokens else src
    first = 1 if rest.word(0) == "TABLE" else 0
    events = []
    for pair in _split_top_level(rest.tokens[first:]):
        to = next((k for k, tok in enumerate(pair) if tok.text.upper() == "TO" and 0 < k < len(pair) - 1), None)
        if to is None:
            raise DdlError(f"cannot parse RENAME: expected 'old TO new' in {_snippet(src.text)!r}")
        old = _table_name(rest.text[pair[0].start : pair[to - 1].end + 1], dialect)
        new = _table_name(rest.text[pair[to + 1].start : pair[-1].end + 1], dialect)
        events.append(
            DdlEvent("rename_table", _qualifier(old), old.name, new_database=_qualifier(new), new_table=new.name,
                     sql=src.text)
        )
    if not events:
        raise DdlError(f"cannot parse RENAME: no table named in {_snippet(src.text)!r}")
    return events


def _salvage(src: _Source, dialect: str) -> list[DdlEvent] | None:
    """Fallbacks for CREATE TABLE / ALTER TABLE statements sqlglot failed on or kept opaque; None if neither."""
    table_at = _table_keyword_at(src)
    if src.word(0) == "CREATE" and table_at is not None:
        return _salvage_create_table(src, dialect)
    if src.word(0) == "ALTER" and table_at is not None:
        return _salvage_alter_table(src, table_at, dialect)
    if src.word(0) == "RENAME":
        return _rename_events(src, dialect)
    if src.word(0) == "TRUNCATE":  # Oracle's options: TRUNCATE TABLE t DROP STORAGE, .. PRESERVE MATERIALIZED VIEW LOG
        start = 2 if src.word(1) == "TABLE" else 1
        end = start
        while src.word(end + 1) == "." and end + 2 < len(src.tokens):
            end += 2
        parsed = _try_parse(f"TRUNCATE TABLE {src.span(start, end)}", dialect) if start < len(src.tokens) else None
        if parsed is not None and isinstance(parsed[0], exp.TruncateTable):
            return [_table_event("truncate", table, src.text) for table in parsed[0].expressions]
    return None


def _table_keyword_at(src: _Source) -> int | None:
    """Index of TABLE in ``CREATE|ALTER [modifiers] TABLE`` (at most two modifiers), else None."""
    return next((i for i in range(1, 4) if src.word(i) == "TABLE"), None)


def _salvage_create_table(src: _Source, dialect: str) -> list[DdlEvent] | None:
    """Re-parse a CREATE TABLE up to the end of its column list (dropping table options sqlglot does not know).

    For PostgreSQL and Oracle, an identity column's sequence options are removed first as well
    (:func:`_without_identity_options`); for Oracle, also constraint states, ``USING INDEX ..`` clauses and
    supplemental logging elements.
    """
    candidates = [src]
    cleaned = _without_identity_options(src) if dialect in ("postgres", "oracle") else src.text
    if dialect == "oracle":
        cleaned = _without_oracle_clauses(_Source.of(cleaned, dialect))
    if cleaned != src.text:
        candidates.append(_Source.of(cleaned, dialect))
    for candidate in candidates:
        open_at = next((i for i, t in enumerate(candidate.tokens) if t.token_type == TokenType.L_PAREN), None)
        close_at = _matching_close(candidate.tokens, open_at) if open_at is not None else None
        if close_at is None:
            continue
        parsed = _try_parse(candidate.text[: candidate.tokens[close_at].end + 1], dialect)
        if parsed and isinstance(parsed[0], exp.Create) and isinstance(parsed[0].this, exp.Schema):
            event = _create_event(parsed[0], parsed[1], dialect)
            return [replace(event, sql=src.text)]
    return None


_IDENTITY_OPTION_WORDS = frozenset({
    "START", "WITH", "INCREMENT", "BY", "MINVALUE", "MAXVALUE", "NOMINVALUE", "NOMAXVALUE", "NO", "CACHE", "NOCACHE",
    "CYCLE", "NOCYCLE", "ORDER", "NOORDER", "KEEP", "NOKEEP", "SCALE", "NOSCALE", "EXTEND", "NOEXTEND", "SHARD",
    "NOSHARD", "SESSION", "GLOBAL", "LIMIT", "VALUE", "-", "+"})
"""Words of Oracle's identity options written without parentheses, as ``DBMS_METADATA`` prints them
(``AS IDENTITY MINVALUE 1 MAXVALUE 9999 INCREMENT BY 1 START WITH 1 CACHE 20 NOORDER NOCYCLE NOKEEP NOSCALE``)."""


def _without_identity_options(src: _Source) -> str:
    """DDL text with an identity column's sequence options removed: PostgreSQL's ``AS IDENTITY (SEQUENCE NAME s
    START WITH 1 .. NO MAXVALUE CACHE 1)`` (pg_dump's form) and Oracle's, parenthesized or not. sqlglot reads only
    ``START WITH`` and ``INCREMENT BY`` among them; how the values are generated changes no column."""
    keep: list[str] = []
    cursor = 0
    tokens = src.tokens
    for i in range(1, len(tokens)):
        if src.word(i) != "IDENTITY" or src.word(i - 1) != "AS" or tokens[i].token_type == TokenType.IDENTIFIER:
            continue
        last = i
        if i + 1 < len(tokens) and tokens[i + 1].token_type == TokenType.L_PAREN:
            last = _matching_close(tokens, i + 1) or i
        else:
            while last + 1 < len(tokens) and tokens[last + 1].token_type != TokenType.IDENTIFIER and (
                    src.word(last + 1) in _IDENTITY_OPTION_WORDS or tokens[last + 1].token_type == TokenType.NUMBER):
                last += 1
        if last > i:
            keep.append(src.text[cursor : tokens[i].end + 1])
            cursor = tokens[last].end + 1
    keep.append(src.text[cursor:])
    return "".join(keep)


def _without_oracle_clauses(src: _Source) -> str:
    """Oracle DDL text minus ``ENABLE``/``DISABLE``/``VALIDATE``.., ``USING INDEX ..`` up to the next , or ), and
    the table's supplemental logging elements (``, SUPPLEMENTAL LOG DATA (ALL) COLUMNS``, ``, SUPPLEMENTAL LOG
    GROUP ..``): Debezium's Oracle connector needs them, so every CREATE TABLE it reports carries one."""
    keep: list[str] = []
    cursor = 0
    i = 0
    tokens = src.tokens
    while i < len(tokens):
        word = src.word(i)
        skip_to = None
        cut_from = tokens[i].start
        starts_element = i > 0 and tokens[i - 1].token_type in (TokenType.COMMA, TokenType.L_PAREN)
        if word in _ORACLE_STATES and tokens[i].token_type != TokenType.IDENTIFIER and not starts_element:
            skip_to = i  # a state keyword, not a column that happens to be named ENABLE
        elif word == "USING" and src.word(i + 1) == "INDEX":
            skip_to = _element_end(tokens, i + 1)
        elif (word == "SUPPLEMENTAL" and src.word(i + 1) == "LOG" and tokens[i - 1].token_type == TokenType.COMMA
              and tokens[i].token_type != TokenType.IDENTIFIER):
            skip_to = _element_end(tokens, i + 1)
            cut_from = tokens[i - 1].start  # with the comma before it
        if skip_to is not None:
            keep.append(src.text[cursor:cut_from])
            cursor = tokens[skip_to].end + 1
            i = skip_to
        i += 1
    keep.append(src.text[cursor:])
    return "".join(keep)


def _element_end(tokens: Sequence[Token], i: int) -> int:
    """Index of the last token of the column-list element that token ``i`` is in (before its , or ))."""
    depth = 0
    while i + 1 < len(tokens):
        nxt = tokens[i + 1].token_type
        if depth == 0 and nxt in (TokenType.COMMA, TokenType.R_PAREN):
            break
        depth += nxt == TokenType.L_PAREN
        depth -= nxt == TokenType.R_PAREN
        i += 1
    return i


_SPATIAL = frozenset({"GEOMETRY", "POINT", "LINESTRING", "POLYGON", "MULTIPOINT", "MULTILINESTRING", "MULTIPOLYGON",
                      "GEOMETRYCOLLECTION", "GEOMCOLLECTION"})
"""MySQL's spatial types. sqlglot reads few of them; canal sends their values as the bytes they are stored as."""


_MYSQL_TYPE_SPELLINGS = {
    # MySQL's own synonyms sqlglot does not read (https://dev.mysql.com/doc/refman/8.0/en/other-vendor-data-types.html,
    # .../charset-national.html); a word is one token's text, and sqlglot's tokenizer keeps `CHAR VARYING` as one.
    # Longer spellings first: the first that matches is taken.
    ("NATIONAL", "CHAR VARYING"): "VARCHAR",
    ("NATIONAL", "CHARACTER VARYING"): "VARCHAR",
    ("NCHAR", "VARYING"): "VARCHAR",
    ("NCHAR", "VARCHAR"): "VARCHAR",
    ("MIDDLEINT",): "MEDIUMINT",
    ("LONG", "VARCHAR"): "MEDIUMTEXT",
    ("LONG", "VARBINARY"): "MEDIUMBLOB",
    ("NATIONAL", "VARCHAR"): "VARCHAR",
    ("NATIONAL", "CHAR"): "CHAR",
    ("NATIONAL", "CHARACTER"): "CHAR",
    ("SERIAL",): "BIGINT UNSIGNED NOT NULL AUTO_INCREMENT UNIQUE",
}
# A type's sign and zero-fill attributes, which MySQL takes in any number and order (``int unsigned unsigned``,
# ``int zerofill unsigned``) and sqlglot only once each, UNSIGNED before ZEROFILL. MySQL ORs their flags: ZEROFILL
# makes the type UNSIGNED as well, SIGNED adds nothing (its grammar ignores it).
_SIGN_WORDS = frozenset({"SIGNED", "UNSIGNED", "ZEROFILL"})
# OceanBase's index options inside a CREATE TABLE's column list, as its SHOW CREATE TABLE prints every index
# (``KEY `ix` (`c`) BLOCK_SIZE 16384 LOCAL``); sqlglot does not read them, and no option of an index changes a
# column or which columns are the key.
_OCEANBASE_INDEX_SCOPES = frozenset({"LOCAL", "GLOBAL"})


def _mysql_readable(src: _Source) -> tuple[str, dict[str, str]]:
    """MySQL DDL text as sqlglot reads it, with the same meaning for cdclake: a spatial column type (a spatial type
    name right after a column name) as ``LONGBLOB``, without its ``SRID n``; MySQL's type synonyms sqlglot does not
    know (``SERIAL``, ``MIDDLEINT``, ``LONG VARCHAR``, ``NATIONAL CHAR``, ``NCHAR VARYING``) as what they stand for;
    the column attribute ``SERIAL DEFAULT VALUE`` as the ``NOT NULL AUTO_INCREMENT UNIQUE`` it stands for; a run of
    ``SIGNED``/``UNSIGNED``/``ZEROFILL`` as the one ``UNSIGNED [ZEROFILL]`` (or ``SIGNED``) it means, as MySQL
    prints it (``int zerofill`` is ``int unsigned zerofill``); ``FLOAT``/``REAL`` without the ``UNSIGNED`` sqlglot
    refuses (deprecated, still accepted by MySQL 8: it only forbids negatives); and without OceanBase's index
    options ``BLOCK_SIZE n``, ``LOCAL`` and ``GLOBAL``. Also returns the spatial columns' types (column ->
    ``geometry``, ``point``..): how a CDC tool writes their values depends on it (:mod:`cdclake.formats.sqltypes`,
    ``connect.debezium_mysql_field``)."""
    spatial: dict[str, str] = {}
    keep: list[str] = []
    cursor = 0
    tokens = src.tokens
    skip_to = -1

    def words(i: int, n: int) -> tuple[str, ...]:
        return tuple(" ".join(src.word(i + k).split()) for k in range(n))

    for i, tok in enumerate(tokens):
        if i <= skip_to:
            continue
        after_name = i > 0 and tokens[i - 1].token_type in (TokenType.VAR, TokenType.IDENTIFIER)
        # A quoted name or a string literal (`DEFAULT 'zerofill'`, `COMMENT 'local'`) is never one of the words below.
        word = src.word(i) if tok.token_type not in _NOT_WORDS else ""
        spelled = next(((n, t) for n, t in _MYSQL_TYPE_SPELLINGS.items() if words(i, len(n)) == n),
                       None) if after_name else None
        if word in _SPATIAL and after_name:
            keep.append(src.text[cursor : tok.start] + "LONGBLOB")
            cursor = tok.end + 1
            spatial[tokens[i - 1].text.strip("`")] = word.lower()
        elif word and spelled is not None:
            names, standing_for = spelled
            keep.append(src.text[cursor : tok.start] + standing_for)
            skip_to = i + len(names) - 1
            cursor = tokens[skip_to].end + 1
        elif word == "SERIAL" and words(i + 1, 2) == ("DEFAULT", "VALUE") and not after_name:
            keep.append(src.text[cursor : tok.start] + "NOT NULL AUTO_INCREMENT UNIQUE")
            skip_to = i + 2
            cursor = tokens[skip_to].end + 1
        elif word == "SRID" and i + 1 < len(tokens) and tokens[i + 1].token_type == TokenType.NUMBER:
            keep.append(src.text[cursor : tok.start])
            cursor = tokens[i + 1].end + 1
            skip_to = i + 1
        elif word in _SIGN_WORDS and _follows_numeric_type(src, i):
            last = i
            while last + 1 < len(tokens) and tokens[last + 1].token_type not in _NOT_WORDS \
                    and src.word(last + 1) in _SIGN_WORDS:
                last += 1
            run = {src.word(k) for k in range(i, last + 1)}
            unsigned = bool(run & {"UNSIGNED", "ZEROFILL"}) and not _follows_float(src, i)
            meant = " ".join([*(["UNSIGNED"] if unsigned else []), *(["ZEROFILL"] if "ZEROFILL" in run else [])])
            if not meant and not _follows_float(src, i):
                meant = "SIGNED"
            if last > i or meant != word:
                keep.append(src.text[cursor : tok.start] + meant)
                cursor = tokens[last].end + 1
            skip_to = last
        elif word == "BLOCK_SIZE" and i > 0 and tokens[i - 1].token_type == TokenType.R_PAREN:
            last = i + 1 if src.word(i + 1) != "=" else i + 2
            if last < len(tokens) and tokens[last].token_type == TokenType.NUMBER:
                keep.append(src.text[cursor : tok.start])
                cursor = tokens[last].end + 1
                skip_to = last
        elif (word in _OCEANBASE_INDEX_SCOPES and i > 0 and (tokens[i - 1].token_type == TokenType.R_PAREN or (
                tokens[i - 1].token_type == TokenType.NUMBER and cursor == tokens[i - 1].end + 1))
              and src.word(i + 1) in (",", ")")):
            keep.append(src.text[cursor : tok.start])
            cursor = tok.end + 1
    keep.append(src.text[cursor:])
    return "".join(keep), spatial


_NOT_WORDS = frozenset({TokenType.IDENTIFIER, TokenType.STRING, TokenType.NATIONAL_STRING, TokenType.RAW_STRING,
                        TokenType.BIT_STRING, TokenType.HEX_STRING, TokenType.BYTE_STRING,
                        TokenType.NATIONAL_RAW_STRING, TokenType.HEREDOC_STRING, TokenType.UNICODE_STRING})
# The numeric types MySQL takes SIGNED/UNSIGNED/ZEROFILL after (YEAR takes them too, deprecated, but sqlglot refuses an
# UNSIGNED after it: `year(4) zerofill` is left as written, which sqlglot reads).
_SIGNED_TYPES = frozenset({"TINYINT", "SMALLINT", "MEDIUMINT", "MIDDLEINT", "INT", "INTEGER", "BIGINT", "INT1", "INT2",
                           "INT3", "INT4", "INT8", "DECIMAL", "DEC", "NUMERIC", "FIXED", "FLOAT", "REAL", "DOUBLE",
                           "PRECISION", "FLOAT4", "FLOAT8"})


def _follows_numeric_type(src: _Source, i: int) -> bool:
    """Whether token ``i`` follows a numeric type name (with or without ``(M[,D])``), or a sign attribute after one,
    so that it is an attribute of the type: not a column named ``signed`` (``CHANGE signed signed bigint``), nor
    ``CAST(a AS UNSIGNED)``."""
    j = i - 1
    while src.word(j) in _SIGN_WORDS and src.tokens[j].token_type not in _NOT_WORDS:
        j -= 1
    if src.word(j) == ")":
        while j > 0 and src.word(j) != "(":
            j -= 1
        j -= 1
    # one token may be two words (`double precision`)
    return j >= 0 and src.tokens[j].token_type not in _NOT_WORDS and src.word(j).split()[-1:] in (
        [t] for t in _SIGNED_TYPES)


def _follows_float(src: _Source, i: int) -> bool:
    """Whether token ``i`` follows a ``FLOAT`` or ``REAL`` type, with or without ``(M,D)``."""
    j = i - 1
    if src.word(j) == ")":
        while j > 0 and src.word(j) != "(":
            j -= 1
        j -= 1
    return src.word(j) in ("FLOAT", "REAL")


def _salvage_alter_table(src: _Source, table_at: int, dialect: str) -> list[DdlEvent] | None:
    """Parse an ALTER TABLE action by action; actions sqlglot rejects go to :func:`_apply_unparsed_action`.
    PostgreSQL's and Oracle's identity options are removed first (:func:`_without_identity_options`)."""
    sql = src.text
    if dialect in ("postgres", "oracle"):  # the tokens do not move: TABLE is still at table_at
        src = _Source.of(_without_identity_options(src), dialect)
    i = table_at + 1
    while src.word(i) in ("IF", "EXISTS", "ONLY"):
        i += 1
    name_end = i
    while src.word(name_end + 1) == "." and name_end + 2 < len(src.tokens):
        name_end += 2
    if i >= len(src.tokens):
        return None
    name_text = src.span(i, name_end)
    table = _table_name(name_text, dialect)
    parts = _AlterParts()
    dropping = ""  # T-SQL's `DROP CONSTRAINT df, COLUMN c, d`: later items go on with the DROP
    for group in _split_top_level(src.tokens[name_end + 1 :]):
        action_text = src.text[group[0].start : group[-1].end + 1]
        first = group[0].text.upper()
        if dialect == "tsql" and dropping and first in ("COLUMN", "CONSTRAINT"):
            action_text = f"DROP {action_text}"
        elif dialect == "tsql" and dropping and first not in _ALTER_VERBS:
            action_text = f"DROP {dropping} {action_text}"
        words = action_text.upper().split()
        dropping = (words[1] if words[1:2] in (["COLUMN"], ["CONSTRAINT"]) else "CONSTRAINT") \
            if words[:1] == ["DROP"] else ""
        parsed = _try_parse(f"ALTER TABLE {name_text} {action_text}", dialect)
        actions = _alter_actions(parsed[0]) if parsed and isinstance(parsed[0], exp.Alter) else None
        if actions and not any(isinstance(a, exp.Command) for a in actions):
            for action in actions:
                _apply_action(action, parsed[1], dialect, parts)
        else:
            _apply_unparsed_action(_Source.of(action_text, dialect), dialect, parts, sql)
    return [_alter_parts_event(table, parts, sql)]
