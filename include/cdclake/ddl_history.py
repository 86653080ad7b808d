"""DDL effects that outlive their batch: column renames and drops, table renames (``cdclake_meta.ddl_history``).

Under the ``evolve`` DDL policy (:mod:`cdclake.schema_changes`) a rename or a drop changes the lake table when
its batch is normalized, before the batch's rows are typed, and is recorded in one Iceberg table. Changes that
still carry the old names, later in the same batch or in an older batch replayed afterwards, then land under the
new names:

- a renamed table: changes naming the old table id are routed to the new one (transitively: ``a -> b -> c``);
  the table's changelog and tombstones move with it;
- a renamed column: an image's old column name is read as the new one; the lake column keeps its values and its
  Iceberg field id (``ALTER TABLE .. RENAME COLUMN``);
- a dropped column: images' values for it are ignored, until an ``ADD COLUMN`` of the same name (a column that
  is re-created starts empty, as in the source; images from before the drop in the same batch do not fill it:
  :attr:`cdclake.normalize.TableTyping.cleared`);
- a table renamed onto a name (``RENAME b TO a``): the name's earlier table is gone at the source (dropped, or
  renamed away), so changes of ``a`` from before the rename go where that table went: to the table ``a`` was
  renamed to, else to ``a__displaced_<hash>`` (:func:`displaced_table_id`), where the lake's earlier table ``a``,
  its changelog and tombstones are moved (a ``DROP TABLE a`` before the rename empties that one, not the renamed
  table);
- a renamed-away table name taken again (``CREATE TABLE a`` after ``RENAME a TO b``): changes of ``a`` from
  before that ``CREATE`` still go to ``b``, newer ones to a new lake table ``a``. A dropped table's name taken
  again (``CREATE TABLE a`` after ``DROP TABLE a``) is the same, with the lake's emptied table ``a`` (its
  changelog and tombstones) moved aside to ``a__displaced_<hash>``: the re-created table starts with its own
  columns and key, not the dropped table's. "Before" is decided by source
  position when the format gives the ``CREATE`` and the change one (a replayed old batch then still lands in
  ``b``); otherwise by landing order: changes landed before the statement in its batch (an earlier file, or
  earlier in its file) and those of an older batch normalized again go to ``b``, later ones to ``a``.
  A column re-created under a renamed-away name is the ``ADD COLUMN`` case above.

Every step is idempotent (a rename whose old column is gone is already done), so a batch can be normalized again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable

from cdclake.catalog import (
    KEY_COLUMNS_PROPERTY,
    SOURCE_TABLE_PROPERTY,
    create_table,
    ensure_namespace,
    key_columns_of,
    sql_literal,
    table_exists,
    table_schema,
)
from cdclake.identity import meta_table, spark_table_name, split_table_id
from cdclake.schema_changes import LakeChange

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

TABLE = meta_table("ddl_history")


@dataclass(frozen=True)
class Mark:
    """Where a DDL statement happened: its source, batch and position (:attr:`LakeChange.position`)."""

    source: str
    batch_id: str
    position: str

    @property
    def is_source_position(self) -> bool:
        """Whether the position is the format's source position (not the landing location used without one)."""
        return bool(self.position) and "#" not in self.position

    def older_than(self, other: "Mark") -> bool:
        """Whether this statement came before ``other`` of the same source: by source position when both have
        one, else by batch (batch ids grow with landing order; the same batch is not older)."""
        if self.source != other.source:
            return False
        if self.is_source_position and other.is_source_position:
            return self.position < other.position
        if self.batch_id != other.batch_id:
            return self.batch_id < other.batch_id
        mine, theirs = self.position.rpartition("#"), other.position.rpartition("#")
        if mine[0] == theirs[0] and mine[2].isdigit() and theirs[2].isdigit():  # one file: its message order
            return int(mine[2]) < int(theirs[2])
        return False


def displaced_table_id(tid: str, mark: Mark) -> str:
    """Where the lake's earlier table ``tid`` goes when another table is renamed onto its name at ``mark``."""
    digest = hashlib.sha1(f"{mark.source}|{mark.batch_id}|{mark.position}".encode()).hexdigest()[:8]
    return f"{tid}__displaced_{digest}"


@dataclass
class History:
    """The folded DDL history of the lake.

    Attributes:
        tables: Old table id -> the table's current id.
        columns: Current table id -> old column name (in lower case) -> current column name.
        dropped: Current table id -> dropped column names (in lower case; not re-added since).
        renamed: Old table id (still routed) -> where its rename happened.
        reused: Table id taken again (a ``CREATE`` after it was renamed away or dropped, or another table renamed
            onto it) -> where that happened and the table its older changes belong to (follow :meth:`route` from
            it: that table may have been renamed since).
        gone: Table id dropped at the source (``DROP TABLE``) and not created again since -> where it was dropped.
    """

    tables: dict[str, str] = field(default_factory=dict)
    columns: dict[str, dict[str, str]] = field(default_factory=dict)
    dropped: dict[str, set[str]] = field(default_factory=dict)
    renamed: dict[str, "Mark"] = field(default_factory=dict)
    reused: dict[str, tuple["Mark", str]] = field(default_factory=dict)
    gone: dict[str, "Mark"] = field(default_factory=dict)

    def route(self, tid: str) -> str:
        """A table's current id."""
        seen = {tid}
        while tid in self.tables:
            tid = self.tables[tid]
            if tid in seen:  # a -> b -> a: the newest rename decides, which fold() already did
                break
            seen.add(tid)
        return tid

    def fold(self, change: LakeChange, *, source: str = "", batch_id: str = "") -> bool:
        """Add one change to the history (in the order they happened); False when it changes nothing."""
        mark = Mark(source, batch_id, change.position)
        if change.kind == "rename_table":
            old, new = self.route(change.old), change.new
            if old == new:
                return False
            # The name's earlier table: renamed away (its older changes follow it), else displaced.
            earlier = self.route(new) if new in self.tables else displaced_table_id(new, mark)
            self.reused[new] = (mark, earlier)
            self.gone.pop(new, None)
            self.tables = {k: (new if v == old else v) for k, v in self.tables.items() if k != new}
            self.tables[old] = new
            self.renamed[old] = mark
            self.renamed.pop(new, None)
            if old in self.columns:
                self.columns[new] = self.columns.pop(old)
            if old in self.dropped:
                self.dropped[new] = self.dropped.pop(old)
            return True
        if change.kind == "drop_table":
            self.gone[change.table_id] = mark
            return True
        if change.kind == "create_table":
            tid = change.table_id
            dropped_at = self.gone.get(tid)
            if dropped_at is not None and tid not in self.tables:
                if mark.older_than(dropped_at):
                    return False  # the table's CREATE from before its drop (a replay)
                earlier = displaced_table_id(tid, mark)  # the dropped table's columns and renames stay with it
                self.reused[tid] = (mark, earlier)
                del self.gone[tid]
                for folded in (self.columns, self.dropped):
                    if tid in folded:
                        folded[earlier] = folded.pop(tid)
                return True
            renamed = self.renamed.get(tid)
            if tid not in self.tables or (renamed is not None and mark.older_than(renamed)):
                return False  # not renamed away, or the table's own CREATE from before its rename (a replay)
            self.reused[tid] = (mark, self.tables.pop(tid))
            self.renamed.pop(tid, None)
            return True
        tid = self.route(change.table_id)
        renames = self.columns.setdefault(tid, {})
        dropped = self.dropped.setdefault(tid, set())
        # Column names are matched ignoring case, as MySQL and the lake (Spark) do: a statement may spell a column
        # otherwise than the table and the images do (`RENAME COLUMN NAME TO title` of a column `name`).
        was, now = change.old.lower(), change.new.lower()
        if change.kind == "rename_column":
            for old, current in list(renames.items()):
                if current.lower() == was:
                    renames[old] = change.new
            renames[was] = change.new
            renames.pop(now, None)
            dropped.discard(now)
        elif change.kind == "drop_column":  # its older names are dropped with it: none of them reads a later column
            dropped.add(was)
            for old in [old for old, current in renames.items() if current.lower() == was]:
                dropped.add(old)
                del renames[old]
        elif change.kind == "add_column":
            dropped.discard(was)
            renames.pop(was, None)
        return True

    def former_ids(self, tid: str) -> list[str]:
        """The ids a table (by its current id) had before renames, including a name taken again since (its older
        changes belong to this table)."""
        return sorted({*(old for old in self.tables if old != tid and self.route(old) == tid),
                       *(name for name, (_, older) in self.reused.items() if name != tid and self.route(older) == tid)})

    def aliases(self, tid: str) -> dict[str, str]:
        """Old column name (in lower case) -> current name, for a table (by its current id)."""
        return dict(self.columns.get(tid, {}))


def load(spark: "SparkSession") -> History:
    """The lake's DDL history (empty when no DDL was ever applied)."""
    history = History()
    if not table_exists(spark, TABLE):
        return history
    for row in spark.table(spark_table_name(TABLE)).orderBy("seq").collect():
        history.fold(LakeChange(row["kind"], row["table_id"], row["old"], row["new"] or "", row["sql"] or "",
                                row["position"] or ""), source=row["source"] or "", batch_id=row["batch_id"] or "")
    return history


def apply(spark: "SparkSession", changes: Iterable[LakeChange], *, source: str,
          batch_id: str) -> tuple[History, dict[str, str]]:
    """Apply a batch's lake changes to the catalog, record them, and return the updated history.

    Returns:
        The history, and problems per (current) table id: changes cdclake refuses (dropping or renaming into a
        key column's place, a rename whose displaced table name is taken); that table's changes are then
        quarantined with the reason.
    """
    history = load(spark)
    changes = list(changes)
    if not changes:
        return history, {}
    problems: dict[str, str] = {}
    recorded: list[LakeChange] = []
    # A statement is known by its source position, so that one landed again is not applied twice. Several can
    # share one (canal's binlog second and batch id: `RENAME COLUMN v TO w`, `w TO v`, `v TO w`): the batch's
    # k-th copy of a statement is one applied already when the history holds k of them.
    done = _recorded(spark, source=source)
    seen: Counter[tuple[str, str, str, str, str]] = Counter()
    for change in changes:
        seen[_identity(change)] += 1
        if seen[_identity(change)] <= done[_identity(change)]:
            continue  # applied when this statement was first normalized, and folded into the history already
        if change.kind == "create_table":  # only the history changes: the new table is created by its rows
            dropped = change.table_id in history.gone
            if history.fold(change, source=source, batch_id=batch_id):
                log.info("table name %s taken again (%s): its newer changes go to a new lake table",
                         change.table_id, change.sql.strip()[:120])
                if dropped:
                    _move_table(spark, change.table_id, history.reused[change.table_id][1])
            # Recorded also when it takes nothing back: normalized again after a later DROP of the name was
            # recorded, it must not take the name back then (the history folds in recorded order).
            recorded.append(change)
            done[_identity(change)] += 1
            continue
        problem = _execute(spark, history, change, Mark(source, batch_id, change.position))
        if problem:
            log.error("DDL not applied: %s", problem)
            problems[history.route(change.table_id)] = problem
            continue
        history.fold(change, source=source, batch_id=batch_id)
        recorded.append(change)
        done[_identity(change)] += 1
    if recorded:
        _record(spark, recorded, source=source, batch_id=batch_id)
    log.info("applied %d DDL change(s) to the lake: %s", len(recorded),
             [f"{c.kind} {c.table_id} {c.old}->{c.new}" for c in recorded])
    return history, problems


def _execute(spark: "SparkSession", history: History, change: LakeChange, mark: Mark) -> str | None:
    """Make one change to the catalog (idempotent); a reason when cdclake refuses it."""
    from cdclake.apply import forget_column

    if change.kind == "rename_table":
        return _rename_table(spark, history.route(change.old), change.new, change.sql,
                             displaced=displaced_table_id(change.new, mark))
    tid = history.route(change.table_id)
    if change.kind in ("add_column", "drop_table") or not table_exists(spark, tid):
        return None  # a dropped table is emptied by its truncate change
    names = {f.name.lower(): f.name for f in table_schema(spark, tid).fields}
    key = key_columns_of(spark, tid)
    old = names.get(change.old.lower())
    name = spark_table_name(tid)
    if change.kind == "drop_column":
        if old is None:
            return None
        if old in key:
            return (f"table {tid}: DDL drops key column {old} ({change.sql.strip()[:120]!r}); cdclake keeps a "
                    "table's key: re-key the lake table, or set ddl_policy ignore for it, then replay")
        spark.sql(f"ALTER TABLE {name} DROP COLUMN `{old}`")
        forget_column(spark, tid, old)
        return None
    if change.kind == "rename_column":
        if old is None:
            return None  # already renamed (a re-run), or never in the lake
        if change.new == old:
            return None
        if change.new.lower() == old.lower():
            return (f"table {tid}: DDL renames column {old} to {change.new}, which differs only in case; Spark's "
                    "column names ignore case, so the lake cannot: set ddl_policy ignore for the table, then replay")
        if change.new.lower() in names:
            return (f"table {tid}: DDL renames column {old} to {change.new}, which the lake table already has")
        spark.sql(f"ALTER TABLE {name} RENAME COLUMN `{old}` TO `{change.new}`")
        forget_column(spark, tid, old, renamed_to=change.new)
        if old in key:
            renamed = ",".join(change.new if k == old else k for k in key)
            spark.sql(f"ALTER TABLE {name} SET TBLPROPERTIES ('{KEY_COLUMNS_PROPERTY}'='{sql_literal(renamed)}')")
        return None
    raise ValueError(f"unknown lake change kind {change.kind!r}")


def _rename_table(spark: "SparkSession", old: str, new: str, sql: str, *, displaced: str) -> str | None:
    """Rename a lake table with its changelog and tombstones. The lake's earlier table of the new name (the source
    dropped it, or the lake never saw it go) and its tombstones move to ``displaced`` first."""
    if old == new or not table_exists(spark, old):
        return None  # already renamed (a re-run), or never in the lake: routing alone is enough
    if table_exists(spark, displaced):
        return (f"table {old}: DDL renames it to {new}, whose earlier lake table was moved to {displaced}, which "
                f"exists already ({sql.strip()[:120]!r}); rename or drop {displaced}, then replay")
    if table_exists(spark, new):
        log.warning("table %s is renamed onto %s, which the lake has: that earlier table is moved to %s", old, new,
                    displaced)
    _move_table(spark, new, displaced)
    _move_table(spark, old, new)
    log.info("renamed lake table %s to %s (with its changelog and tombstones)", old, new)
    return None


def _move_table(spark: "SparkSession", old: str, new: str) -> None:
    """Rename a lake table (if there), its changelog and SCD history (if there) and its tombstones."""
    from cdclake import tombstones
    from cdclake.apply import changelog_table_id, history_table_id

    if table_exists(spark, old):
        ensure_namespace(spark, split_table_id(new)[0])
        _rename(spark, old, new)
        # It holds the source table under its new name now: the next batch records that one.
        spark.sql(f"ALTER TABLE {spark_table_name(new)} UNSET TBLPROPERTIES IF EXISTS ('{SOURCE_TABLE_PROPERTY}')")
    for side in (changelog_table_id, history_table_id):
        old_side, new_side = side(old), side(new)
        if table_exists(spark, old_side) and not table_exists(spark, new_side):
            _rename(spark, old_side, new_side)
    if table_exists(spark, tombstones.TABLE):
        spark.sql(f"UPDATE {spark_table_name(tombstones.TABLE)} SET table_id = '{sql_literal(new)}' "
                  f"WHERE table_id = '{sql_literal(old)}'")


def _identity(change: LakeChange) -> tuple[str, str, str, str, str]:
    return change.kind, change.table_id, change.old, change.new, change.position


def _rename(spark: "SparkSession", old: str, new: str) -> None:
    # The target is named within the catalog (Spark would read `lake.ns.t` as namespace `lake.ns`).
    namespace, table = split_table_id(new)
    spark.sql(f"ALTER TABLE {spark_table_name(old)} RENAME TO `{namespace}`.`{table}`")


def _recorded(spark: "SparkSession", *, source: str) -> Counter[tuple[str, str, str, str, str]]:
    """How often each of the source's changes is recorded: a statement landed again (a re-run, a replay) must not
    be applied again (a column it dropped may have been re-added since)."""
    if not table_exists(spark, TABLE):
        return Counter()
    rows = spark.table(spark_table_name(TABLE)).where(f"source = '{sql_literal(source)}'").collect()
    return Counter((r["kind"], r["table_id"], r["old"], r["new"], r["position"]) for r in rows)


def _record(spark: "SparkSession", changes: list[LakeChange], *, source: str, batch_id: str) -> None:
    """Append changes to the history table, in order."""
    name = spark_table_name(TABLE)
    create_table(spark, TABLE, f"CREATE TABLE IF NOT EXISTS {name} (seq bigint, kind string, table_id string, "
                 "old string, new string, sql string, position string, source string, batch_id string) USING iceberg "
                 "TBLPROPERTIES ('format-version'='2')")
    base = time.time_ns()
    rows = [(base + i, c.kind, c.table_id, c.old, c.new, c.sql, c.position, source, batch_id)
            for i, c in enumerate(changes)]
    spark.createDataFrame(rows, schema=spark.table(name).schema).writeTo(name).append()


def to_json(history: History) -> str:
    """The folded history as JSON (for logs and the staging marker)."""
    return json.dumps({"tables": history.tables, "columns": history.columns,
                       "dropped": {t: sorted(d) for t, d in history.dropped.items() if d},
                       "reused": {t: {"position": m.position, "batch_id": m.batch_id, "older_changes_to": old}
                                  for t, (m, old) in history.reused.items()},
                       "gone": {t: m.position for t, m in history.gone.items()}}, sort_keys=True)
