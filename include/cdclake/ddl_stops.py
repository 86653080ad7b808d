"""Tables a DDL statement stopped under ``ddl_policy: fail``, held until an operator releases them
(``cdclake_meta.ddl_stops``).

A ``fail`` stop is not about one batch: once a table's DDL statement is held for review, applying the table's
later changes with the old schema would be exactly what the policy forbids. So the stop outlives its batch:

- the batch that carries the statement quarantines the statement and the table's changes (``schema_changes``), and
  :func:`record` appends a ``stop`` event here;
- every later batch whose policy for the table is still ``fail`` quarantines the table's changes too, with a reason
  that names the stop (``ddl_policy=fail``, so one ``cdclake quarantine replay --reason ddl_policy=fail`` selects
  the statement and everything held behind it);
- a batch that processes the table's changes under ``evolve`` or ``ignore`` (the replay with ``--ddl-policy
  evolve``, or the source config changed) appends a ``release`` event: the table is applied again.

Events are appended, never rewritten (a table's state is its newest event), so a re-run of a batch records nothing
twice. The ingestion DAG fails its run while a table of the source is stopped (its other tables are applied).
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cdclake.catalog import create_table, pyiceberg_catalog, sql_literal, table_exists
from cdclake.identity import meta_table, spark_table_name
from cdclake.settings import LakeSettings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

TABLE = meta_table("ddl_stops")
STOP, RELEASE = "stop", "release"


@dataclass(frozen=True)
class Stop:
    """A stopped table: the batch whose DDL statement stopped it, and why."""

    table_id: str
    batch_id: str
    reason: str

    def hold_reason(self) -> str:
        """The quarantine reason of a later change of the table, held behind the stop."""
        return (f"held: {self.table_id} is stopped by a DDL statement of batch {self.batch_id} (ddl_policy=fail); "
                "its later changes are held too. After review run `cdclake quarantine replay --reason "
                "ddl_policy=fail --ddl-policy evolve` (or ignore), which applies the statement and these changes")


def _latest(rows: list[tuple[str, str, str, str, dt.datetime]]) -> dict[str, Stop]:
    newest: dict[str, tuple[dt.datetime, str, str, str]] = {}
    for table_id, event, batch_id, reason, at in rows:
        if table_id not in newest or at >= newest[table_id][0]:
            newest[table_id] = (at, event, batch_id, reason)
    return {t: Stop(t, b, r) for t, (_, event, b, r) in newest.items() if event == STOP}


def stopped(spark: "SparkSession", source: str) -> dict[str, Stop]:
    """The source's tables stopped now (``namespace.table`` -> its stop)."""
    if not table_exists(spark, TABLE):
        return {}
    rows = (spark.table(spark_table_name(TABLE)).where(f"source = '{sql_literal(source)}'")
            .select("table_id", "event", "batch_id", "reason", "at").collect())
    return _latest([tuple(r) for r in rows])


def stopped_tables(settings: LakeSettings, source: str) -> dict[str, Stop]:
    """Like :func:`stopped`, read with pyiceberg (no Spark): for DAG tasks."""
    from pyiceberg.exceptions import NoSuchTableError
    from pyiceberg.expressions import EqualTo

    try:
        table = pyiceberg_catalog(settings).load_table(TABLE)
    except NoSuchTableError:
        return {}
    rows = table.scan(row_filter=EqualTo("source", source),
                      selected_fields=("table_id", "event", "batch_id", "reason", "at")).to_arrow().to_pylist()
    return _latest([(r["table_id"], r["event"], r["batch_id"], r["reason"], r["at"]) for r in rows])


def record(spark: "SparkSession", source: str, *, stops: dict[str, tuple[str, str]],
           releases: list[str]) -> None:
    """Append stop events (``table -> (batch id, reason)``) and release events, in one commit.

    The caller passes only state changes (a stop of a table not stopped, a release of a stopped one).
    """
    if not stops and not releases:
        return
    name = spark_table_name(TABLE)
    create_table(spark, TABLE, f"CREATE TABLE IF NOT EXISTS {name} (source string, table_id string, event string, "
                 "batch_id string, reason string, at timestamp) USING iceberg TBLPROPERTIES ('format-version'='2')")
    now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    rows = [(source, t, STOP, b, r, now) for t, (b, r) in sorted(stops.items())]
    rows += [(source, t, RELEASE, None, None, now) for t in sorted(releases)]
    spark.createDataFrame(rows, schema=spark.table(name).schema).writeTo(name).append()
    for table_id, (batch_id, _) in sorted(stops.items()):
        log.error("source %s: table %s is stopped by a DDL statement of batch %s (ddl_policy=fail): its changes are "
                  "held in quarantine until released", source, table_id, batch_id)
    for table_id in releases:
        log.warning("source %s: table %s is released from its DDL stop (its changes are applied again); messages "
                    "still held in quarantine need `cdclake quarantine replay --reason ddl_policy=fail`",
                    source, table_id)
