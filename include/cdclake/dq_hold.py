"""The ``quarantine`` data-quality policy: hold a batch's changes to a table back, and release them after a fix.

When a table with the ``quarantine`` policy fails validation, :func:`hold` takes the changes of the validated
batches back out of the table and keeps them: it rolls the table back past the commits those batches made
(``CALL lake.system.rollback_to_snapshot``; a table whose every commit is theirs is emptied), moves each batch's
staged changes of the table to ``staging/<source>/<batch>/_held/<table>/`` and writes ``_held/<table>.json``
saying why. :func:`release` (``cdclake dq release``, through :func:`cdclake.dq_gate.release`, which validates
again) moves them back and applies them like any batch: positions decide, so changes newer batches made in the
meantime are never overwritten.

Which snapshots to undo is read off the table itself: every apply commit records ``cdclake.source`` and
``cdclake.batch-id`` in its snapshot summary (:mod:`cdclake.apply`), so the commits to undo are the newest run of
the table's current ancestry made by the held batches. That holds for one batch (``cdclake apply``, the
``cdclake_ingest`` DAG) and for the several batches of a per-source DAG run, across task retries and partial
applies, and it never undoes another cdclake batch's commit: when one lies on top of the held batches' commits,
holding fails and says so instead of discarding it. Commits cdclake did not make (a compaction, a manual edit)
that lie on top of them are undone with them, with a warning.

Tombstones and truncate watermarks the held changes recorded are kept: they are positions of real source events,
so they only make older changes stale, which they are. Changelog rows (``cdclake_changelog``) are kept too.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from cdclake.exceptions import ConfigError
from cdclake.settings import LakeSettings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from cdclake.apply_options import ApplyOptions
    from cdclake.pipeline import TableCounts

log = logging.getLogger(__name__)

HELD_DIR = "_held"


@dataclass(frozen=True)
class HeldTable:
    """A table's changes of one batch, held back by the quarantine policy.

    Attributes:
        source: Source name.
        batch_id: The batch.
        table_id: ``namespace.table``.
        run_id: The validation run that held them.
        reason: The failed expectations, one line.
        held_at: When (ISO 8601, UTC).
    """

    source: str
    batch_id: str
    table_id: str
    run_id: str
    reason: str
    held_at: str

    def to_dict(self) -> dict[str, str]:
        """JSON-ready."""
        return dict(self.__dict__)


def _batch_dir(settings: LakeSettings, source: str, batch_id: str) -> Path:
    # Same as cdclake.normalize.staging_dir, without importing Spark (list_held serves the webserver).
    return settings.staging_root / source / batch_id


def _commits_to_undo(spark: "SparkSession", table_id: str, *, source: str,
                     batch_ids: Sequence[str]) -> tuple[list[tuple[int, dict[str, str]]], int | None]:
    """The snapshots to undo to take the batches' commits out of the table, newest first, and the snapshot to go
    back to (None when nothing is left below them: the table is then emptied). Nothing to undo when the batches
    made no commit.

    Undone are the batches' commits at the top of the table's current ancestry and any commit cdclake did not
    make among them (compaction, a manual edit); another cdclake batch's commit is never undone.

    Raises:
        ConfigError: Another cdclake batch committed on top of some of the batches' commits, or the snapshot to
            go back to has expired.
    """
    from cdclake.identity import spark_table_name

    name = spark_table_name(table_id)
    refs = spark.sql(f"SELECT snapshot_id FROM {name}.refs WHERE name = 'main'").collect()
    snaps = {r["snapshot_id"]: (r["parent_id"], {**(r["summary"] or {}), "operation": r["operation"]})
             for r in spark.sql(f"SELECT snapshot_id, parent_id, operation, summary FROM {name}.snapshots").collect()}
    wanted = set(batch_ids)
    ancestry: list[tuple[int, dict[str, str]]] = []
    current = refs[0]["snapshot_id"] if refs else None
    while current is not None and current in snaps:
        ancestry.append((current, snaps[current][1]))
        current = snaps[current][0]
    expired = current  # an ancestor whose metadata is gone, or None at the root

    def ours(summary: dict[str, str]) -> bool:
        return summary.get("cdclake.source") == source and summary.get("cdclake.batch-id") in wanted

    deepest = -1
    for i, (snapshot_id, summary) in enumerate(ancestry):
        if ours(summary):
            deepest = i
        elif "cdclake.batch-id" in summary:  # another batch's commit: everything below it stays
            buried = [s for s, m in ancestry[i + 1:] if ours(m)]
            if buried:
                raise ConfigError(
                    f"cannot take the changes of batch(es) {', '.join(batch_ids)} of {source!r} back out of "
                    f"{table_id}: snapshot {snapshot_id} (source {summary.get('cdclake.source')!r}, batch "
                    f"{summary['cdclake.batch-id']!r}) was committed on top of their snapshot {buried[0]}; "
                    "rolling back would discard it")
            break
    undone = ancestry[:deepest + 1]
    if not undone:
        return [], None
    if deepest + 1 < len(ancestry):
        return undone, ancestry[deepest + 1][0]
    if expired is not None:
        raise ConfigError(f"cannot take the changes of batch(es) {', '.join(batch_ids)} of {source!r} back out of "
                          f"{table_id}: snapshot {expired} from before them has expired")
    return undone, None


def hold(spark: "SparkSession", settings: LakeSettings, *, source: str, batch_ids: Sequence[str], table_id: str,
         run_id: str, reason: str) -> list[HeldTable]:
    """Take batches' changes back out of a table and keep them for :func:`release` (see the module docstring).

    Args:
        spark: The session.
        settings: The lake.
        source: Source name.
        batch_ids: The batches whose changes to hold (one, or every batch of a per-source DAG run).
        table_id: ``namespace.table``.
        run_id: The validation run that failed.
        reason: The failed expectations, one line.

    Returns:
        One record per held batch.

    Raises:
        ConfigError: Another writer committed on top of the batches' commits, or a batch has no staged (or
            already held) changes of the table.
    """
    from cdclake.identity import spark_table_name, split_table_id
    from cdclake.settings import CATALOG_NAME

    undone, before = _commits_to_undo(spark, table_id, source=source, batch_ids=batch_ids)
    batches = ", ".join(batch_ids)
    foreign = [f"{s} ({m.get('operation', '?')})" for s, m in undone if "cdclake.batch-id" not in m]
    if foreign:
        log.warning("quarantine: rolling %s back also undoes snapshot(s) %s, which cdclake did not make", table_id,
                    ", ".join(foreign))
    if not undone:
        log.warning("quarantine: batch(es) %s made no commit to %s; nothing to roll back", batches, table_id)
    elif before is None:
        spark.sql(f"DELETE FROM {spark_table_name(table_id)}")
        log.warning("quarantine: emptied %s, whose every commit came from batch(es) %s", table_id, batches)
    else:
        namespace, table = split_table_id(table_id)
        spark.sql(f"CALL {CATALOG_NAME}.system.rollback_to_snapshot('{namespace}.{table}', {int(before)})")
        log.warning("quarantine: rolled %s back to snapshot %s, undoing %d commit(s) of batch(es) %s", table_id,
                    before, len(undone), batches)
    held_at = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    records = []
    for batch_id in batch_ids:
        batch_dir = _batch_dir(settings, source, batch_id)
        staged = batch_dir / table_id
        held_dir = batch_dir / HELD_DIR
        held_dir.mkdir(parents=True, exist_ok=True)
        if staged.exists():
            target = held_dir / table_id
            if target.exists():
                shutil.rmtree(target)
            os.replace(staged, target)
        elif not (held_dir / table_id).exists():
            raise ConfigError(f"cannot hold {table_id} of batch {batch_id} of {source!r}: no staged changes at "
                              f"{staged}")
        record = HeldTable(source, batch_id, table_id, run_id, reason, held_at)
        (held_dir / f"{table_id}.json").write_text(json.dumps(record.to_dict(), indent=2, sort_keys=True))
        log.warning("quarantine: changes of batch %s to %s held at %s; after a fix release them with "
                    "`cdclake dq release --lake %s --source %s --batch %s --table %s`", batch_id, table_id,
                    held_dir / table_id, settings.root, source, batch_id, table_id)
        records.append(record)
    return records


def list_held(settings: LakeSettings, *, source: str | None = None) -> list[HeldTable]:
    """Every held (source, batch, table), oldest batch first."""
    out = []
    root = settings.staging_root
    if not root.exists():
        return []
    for record in sorted(root.glob(f"*/*/{HELD_DIR}/*.json")):
        data: dict[str, Any] = json.loads(record.read_text())
        if source is None or data["source"] == source:
            out.append(HeldTable(**data))
    return out


def release(spark: "SparkSession", settings: LakeSettings, *, source: str, batch_id: str, table_id: str,
            options: "ApplyOptions | None" = None) -> "TableCounts":
    """Apply held changes of a batch to their table and forget the hold. Validating them again is the caller's
    (:func:`cdclake.dq_gate.release`).

    Args:
        spark: The session.
        settings: The lake.
        source: Source name.
        batch_id: The held batch.
        table_id: ``namespace.table``.
        options: The table's apply options (its source config's); default cdclake's.

    Raises:
        ConfigError: Nothing is held for that (source, batch, table).
    """
    from cdclake.apply import apply_table
    from cdclake.apply_options import ApplyOptions
    from cdclake.normalize import read_staged, staged_tables

    batch_dir = _batch_dir(settings, source, batch_id)
    held = batch_dir / HELD_DIR / table_id
    record = batch_dir / HELD_DIR / f"{table_id}.json"
    if not held.exists() or not record.exists():
        raise ConfigError(f"nothing held for table {table_id} of batch {batch_id} of source {source!r} "
                          f"(see `cdclake dq held --lake {settings.root}`)")
    info = staged_tables(settings, source, batch_id).get(table_id)
    if info is None:
        raise ConfigError(f"batch {batch_id} of {source!r} has no staging entry for {table_id}")
    staged = batch_dir / table_id
    os.replace(held, staged)
    counts = apply_table(spark, read_staged(spark, staged), tid=table_id, key=info["key"],
                         options=options or ApplyOptions(), source=source, batch_id=batch_id,
                         source_table=info.get("source_table"), connect_types=info.get("connect_types", {}))
    record.unlink()
    log.info("released batch %s of %s into %s: %s", batch_id, source, table_id, counts.to_dict())
    return counts
