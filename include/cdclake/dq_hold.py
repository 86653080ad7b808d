"""The ``quarantine`` data-quality policy: hold a batch's changes to a table back, and release them after a fix.

Apply records each staged table's current Iceberg snapshot before it writes (:func:`remember_snapshots`, in
``staging/<source>/<batch>/_dq_snapshots.json``). When a table with the ``quarantine`` policy fails validation,
:func:`hold` rolls the table back to that snapshot (``CALL lake.system.rollback_to_snapshot``; a table the batch
created is emptied), moves the batch's staged changes of the table to ``staging/<source>/<batch>/_held/<table>/``
and writes ``_held/<table>.json`` saying why. :func:`release` (``cdclake dq release``) moves them back and applies
them like any batch: positions decide, so changes newer batches made in the meantime are never overwritten.

Tombstones and truncate watermarks the held changes recorded are kept: they are positions of real source events,
so they only make older changes stale, which they are.
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

    from cdclake.pipeline import TableCounts

log = logging.getLogger(__name__)

SNAPSHOTS_FILE = "_dq_snapshots.json"
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


def remember_snapshots(settings: LakeSettings, *, source: str, batch_id: str, table_ids: Sequence[str]) -> None:
    """Record each table's current snapshot id (None: missing or empty table) before a batch is applied.

    Written once per batch: a retried apply must not overwrite the state from before the first attempt.
    """
    path = _batch_dir(settings, source, batch_id) / SNAPSHOTS_FILE
    if path.exists():
        return
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

    from cdclake.catalog import pyiceberg_catalog

    catalog = pyiceberg_catalog(settings)
    snapshots: dict[str, int | None] = {}
    for tid in table_ids:
        try:
            current = catalog.load_table(tid).current_snapshot()
        except (NoSuchTableError, NoSuchNamespaceError):
            current = None
        snapshots[tid] = None if current is None else current.snapshot_id
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(snapshots, indent=2, sort_keys=True))
    os.replace(tmp, path)


def hold(spark: "SparkSession", settings: LakeSettings, *, source: str, batch_id: str, table_id: str, run_id: str,
         reason: str) -> HeldTable:
    """Take a batch's changes to a table back out of the table and keep them for :func:`release`.

    Raises:
        ConfigError: The batch's pre-apply snapshots were not recorded, or its staged changes are missing.
    """
    from cdclake.identity import spark_table_name, split_table_id
    from cdclake.settings import CATALOG_NAME

    batch_dir = _batch_dir(settings, source, batch_id)
    snapshots_file = batch_dir / SNAPSHOTS_FILE
    if not snapshots_file.is_file():
        raise ConfigError(f"cannot hold {table_id} of batch {batch_id}: {snapshots_file} is missing "
                          "(the batch was applied without recording its pre-apply snapshots)")
    before = json.loads(snapshots_file.read_text()).get(table_id)
    namespace, table = split_table_id(table_id)
    if before is None:
        spark.sql(f"DELETE FROM {spark_table_name(table_id)}")
        log.warning("quarantine: emptied %s, which batch %s created", table_id, batch_id)
    else:
        spark.sql(f"CALL {CATALOG_NAME}.system.rollback_to_snapshot('{namespace}.{table}', {int(before)})")
        log.warning("quarantine: rolled %s back to snapshot %s, from before batch %s", table_id, before, batch_id)

    staged = batch_dir / table_id
    held_dir = batch_dir / HELD_DIR
    held_dir.mkdir(parents=True, exist_ok=True)
    if staged.exists():
        target = held_dir / table_id
        if target.exists():
            shutil.rmtree(target)
        os.replace(staged, target)
    elif not (held_dir / table_id).exists():
        raise ConfigError(f"cannot hold {table_id} of batch {batch_id}: no staged changes at {staged}")
    record = HeldTable(source, batch_id, table_id, run_id, reason,
                       datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))
    (held_dir / f"{table_id}.json").write_text(json.dumps(record.to_dict(), indent=2, sort_keys=True))
    log.warning("quarantine: changes of batch %s to %s held at %s; release with "
                "`cdclake dq release --lake %s --source %s --batch %s --table %s`", batch_id, table_id,
                held_dir / table_id, settings.root, source, batch_id, table_id)
    return record


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


def release(spark: "SparkSession", settings: LakeSettings, *, source: str, batch_id: str,
            table_id: str) -> "TableCounts":
    """Apply held changes of a batch to their table (after the cause was fixed) and forget the hold.

    Raises:
        ConfigError: Nothing is held for that (source, batch, table).
    """
    from cdclake.apply import apply_table
    from cdclake.normalize import staged_tables

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
    counts = apply_table(spark, spark.read.parquet(str(staged)), tid=table_id, key=info["key"])
    record.unlink()
    log.info("released batch %s of %s into %s: %s", batch_id, source, table_id, counts.to_dict())
    return counts
