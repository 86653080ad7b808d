"""Small helpers over the lake's Iceberg catalog, for Spark (apply, normalize) and pyiceberg (CLI reads)."""

from __future__ import annotations

import json
import logging
import random
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Callable, Iterator, TypeVar

from cdclake.identity import spark_table_name, split_table_id
from cdclake.settings import CATALOG_NAME, META_NAMESPACE, LakeSettings

if TYPE_CHECKING:
    from pyiceberg.catalog.sql import SqlCatalog
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

log = logging.getLogger(__name__)

T = TypeVar("T")

KEY_COLUMNS_PROPERTY = "cdclake.key-columns"
"""Table property holding the primary-key columns, comma-separated, in key order."""

CONNECT_TYPES_PROPERTY = "cdclake.connect-types"
"""Table property holding, as JSON, the Kafka Connect field schema of each column whose values a Connect message
writes encoded (a logical type such as ``io.debezium.time.Timestamp`` in milliseconds, a ``Decimal`` as base64
bytes): payload-only messages (no schema) of the table are decoded by it (:mod:`cdclake.normalize`)."""


def recorded_connect_types(properties: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Column -> Connect field schema, as :data:`CONNECT_TYPES_PROPERTY` records them ({} when none or unreadable)."""
    try:
        recorded = json.loads(properties.get(CONNECT_TYPES_PROPERTY) or "{}")
    except ValueError:
        return {}
    if not isinstance(recorded, dict):
        return {}
    return {k: v for k, v in recorded.items() if isinstance(k, str) and isinstance(v, dict)}


SOURCE_PROPERTY = "cdclake.source"
"""Table property holding the name of the source whose changes a lake table holds. Source positions of two sources
are never compared, so apply refuses another source's changes of the table (:func:`cdclake.apply.apply_table`)."""

SOURCE_TABLE_PROPERTY = "cdclake.source-table"
"""Table property holding the source table a lake table holds, ``namespace.table`` as its stream spells it: the
lake id is that name lower-cased and reduced to ``[a-z0-9_]``, so another source table can map to the same id
(:mod:`cdclake.normalize` keeps its changes out)."""


def qualifies_recorded(source_table: str, recorded: str | None) -> bool:
    """Whether ``source_table`` is the source table ``recorded`` on a lake table by an earlier version, which left
    out the database (DRS relational ``schema.table``, now ``database.schema.table``); an unrecorded table
    qualifies for any name."""
    return recorded is None or source_table.endswith(f".{recorded}")


BOOKKEEPING_PREFIX = "_cdc_"


def sql_literal(text: str) -> str:
    """Text as the inside of a Spark SQL string literal (``'...'``).

    Spark SQL escapes with backslashes: a doubled quote is not an escaped quote but two adjacent literals, which
    Spark concatenates (``'it''s'`` is ``its``).
    """
    return text.replace("\\", "\\\\").replace("'", "\\'")


def table_exists(spark: "SparkSession", tid: str) -> bool:
    """Whether ``namespace.table`` exists in the lake catalog.

    Asks the catalog for the table itself (one lookup, answered from Iceberg's table cache when this session
    loaded it): listing the namespaces and then the namespace's tables cost two catalog queries, about a tenth of
    a second per call, and an apply asks for a dozen tables.
    """
    return bool(spark.catalog.tableExists(spark_table_name(tid)))


def ensure_namespace(spark: "SparkSession", namespace: str) -> None:
    """Create a namespace if missing."""
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG_NAME}.`{namespace}`")


def tables_in(spark: "SparkSession", namespace: str) -> list[str]:
    """The ids of a namespace's lake tables (``namespace.table``), [] when the namespace does not exist or is one
    of cdclake's own."""
    if is_meta_namespace(namespace) or not spark.catalog.databaseExists(f"{CATALOG_NAME}.`{namespace}`"):
        return []
    return sorted(f"{namespace}.{r['tableName']}"
                  for r in spark.sql(f"SHOW TABLES IN {CATALOG_NAME}.`{namespace}`").collect())


def create_table(spark: "SparkSession", tid: str, ddl: str) -> bool:
    """Create a lake table with ``ddl`` (a ``CREATE TABLE IF NOT EXISTS`` of ``tid``), and its namespace, unless
    the table exists; return whether it was missing. The existence check is cheaper than the statement, and most
    calls find the table."""
    if table_exists(spark, tid):
        return False
    ensure_namespace(spark, split_table_id(tid)[0])
    spark.sql(ddl)
    return True


def table_schema(spark: "SparkSession", tid: str) -> "StructType":
    """The Spark schema of a lake table."""
    return spark.table(spark_table_name(tid)).schema


def table_properties(spark: "SparkSession", tid: str) -> dict[str, str]:
    """An Iceberg table's properties."""
    return {r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES {spark_table_name(tid)}").collect()}


def key_columns_of(spark: "SparkSession", tid: str) -> list[str]:
    """Primary-key columns recorded on an existing table, or []."""
    value = table_properties(spark, tid).get(KEY_COLUMNS_PROPERTY, "")
    return [c for c in value.split(",") if c]


def pyiceberg_catalog(settings: LakeSettings) -> "SqlCatalog":
    """pyiceberg's view of the same JDBC catalog Spark uses (same name, same tables)."""
    from pyiceberg.catalog.sql import SqlCatalog

    props: dict[str, Any] = {"uri": settings.sqlalchemy_uri, "warehouse": settings.warehouse_uri}
    if settings.s3_endpoint:
        props["s3.endpoint"] = settings.s3_endpoint
    return SqlCatalog(CATALOG_NAME, **props)


CHANGELOG_NAMESPACE = "cdclake_changelog"
"""Namespace of the tables' changelogs (``<namespace>__<table>``)."""

HISTORY_NAMESPACE = "cdclake_history"
"""Namespace of the tables' SCD type 2 history tables (``<namespace>__<table>``)."""


def is_meta_namespace(namespace: str) -> bool:
    """True for cdclake's own namespaces (bookkeeping, changelogs, histories)."""
    return namespace in (META_NAMESPACE, CHANGELOG_NAMESPACE, HISTORY_NAMESPACE)


@contextmanager
def commit_properties(spark: "SparkSession", properties: dict[str, str]) -> Iterator[None]:
    """Record ``properties`` in the snapshot summary of every Iceberg commit this thread makes inside the block.

    Iceberg's Spark writer reads them from ``org.apache.iceberg.spark.CommitMetadata``'s thread-local (the public
    ``withCommitProperties`` takes a Java ``Callable``); PySpark pins each Python thread to one JVM thread, and a
    query commits on the thread that runs it, so setting that thread-local around ``spark.sql`` works. Write options
    (``snapshot-property.*``) would cover DataFrame writes only, not ``MERGE``/``DELETE``/``UPDATE``.
    """
    jvm = spark._jvm  # type: ignore[attr-defined]
    loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
    field = jvm.java.lang.Class.forName("org.apache.iceberg.spark.CommitMetadata", True, loader) \
        .getDeclaredField("COMMIT_PROPERTIES")
    field.setAccessible(True)
    local = field.get(None)
    values = jvm.java.util.HashMap()
    for k, v in properties.items():
        values.put(k, v)
    local.set(values)
    try:
        yield
    finally:
        local.remove()


_OVERTAKEN_SCAN = "Runtime file filtering is not possible: the table has been concurrently modified"
"""Iceberg's copy-on-write row-level scan fails with this (an ``IllegalStateException``) when another writer in the
same process committed to the table between planning the scan and filtering its files: the same race as a commit
conflict, caught before the commit."""


def _is_commit_conflict(exc: Exception) -> bool:
    """Whether an error is an Iceberg commit conflict (another writer committed first): retrying can succeed."""
    text = str(exc)
    return ("CommitFailedException" in text or "ValidationException" in text and "conflict" in text.lower()
            or _OVERTAKEN_SCAN in text)


def _conflict_line(exc: Exception) -> str:
    """The line of a commit conflict's error that says what conflicted (py4j's first line names only the call)."""
    lines = str(exc).splitlines()
    found = next((ln for ln in lines if "CommitFailedException" in ln or "ValidationException" in ln
                  or _OVERTAKEN_SCAN in ln),
                 lines[0] if lines else "")
    return found.strip(" :")[:300]


def retry_conflicts(action: Callable[[], T], *, what: str, attempts: int, again: str) -> T:
    """Run ``action``, running it again (up to ``attempts`` times in all, with a growing, jittered pause) when it
    fails with an Iceberg commit conflict; any other error, or the last attempt's, is raised.

    Args:
        action: What to do; it must be safe to run again after a conflict (it reads the tables as they are then).
        what: Names the writer in the warning (``table shop.orders``).
        attempts: Attempts in all.
        again: What a retry does, for the warning (``re-classifying``).
    """
    for attempt in range(1, attempts + 1):
        try:
            return action()
        except Exception as exc:  # noqa: BLE001 - only commit conflicts are retried
            if attempt == attempts or not _is_commit_conflict(exc):
                raise
            log.warning("%s: commit conflict (attempt %d of %d), %s: %s", what, attempt, attempts, again,
                        _conflict_line(exc))
            time.sleep(random.uniform(0.25, 0.5) * attempt)
    raise AssertionError("unreachable")
