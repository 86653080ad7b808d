"""Small helpers over the lake's Iceberg catalog, for Spark (apply, normalize) and pyiceberg (CLI reads)."""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterator

from cdclake.identity import spark_table_name, split_table_id
from cdclake.settings import CATALOG_NAME, META_NAMESPACE, LakeSettings

if TYPE_CHECKING:
    from pyiceberg.catalog.sql import SqlCatalog
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

KEY_COLUMNS_PROPERTY = "cdclake.key-columns"
"""Table property holding the primary-key columns, comma-separated, in key order."""

BOOKKEEPING_PREFIX = "_cdc_"


def sql_literal(text: str) -> str:
    """Text as the inside of a Spark SQL string literal (``'...'``).

    Spark SQL escapes with backslashes: a doubled quote is not an escaped quote but two adjacent literals, which
    Spark concatenates (``'it''s'`` is ``its``).
    """
    return text.replace("\\", "\\\\").replace("'", "\\'")


def table_exists(spark: "SparkSession", tid: str) -> bool:
    """Whether ``namespace.table`` exists in the lake catalog."""
    namespace, table = split_table_id(tid)
    rows = spark.sql(f"SHOW TABLES IN {CATALOG_NAME}.`{namespace}` LIKE '{table}'").collect() \
        if namespace_exists(spark, namespace) else []
    return any(r["tableName"] == table for r in rows)


def namespace_exists(spark: "SparkSession", namespace: str) -> bool:
    """Whether a namespace exists in the lake catalog."""
    return any(r[0] == namespace for r in spark.sql(f"SHOW NAMESPACES IN {CATALOG_NAME}").collect())


def ensure_namespace(spark: "SparkSession", namespace: str) -> None:
    """Create a namespace if missing."""
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG_NAME}.`{namespace}`")


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
