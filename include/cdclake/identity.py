"""Iceberg identifiers of source tables, derived in exactly one place.

A source table is named by the change stream as (database, schema, table); the lake names it
``<namespace>.<table>`` in the ``lake`` catalog, where the namespace is the source schema when the source has
schemas (PostgreSQL, SQL Server, GaussDB, Oracle) and the database otherwise (MySQL, MongoDB). Both parts are
lower-cased and every character outside ``[a-z0-9_]`` becomes ``_``, so identifiers are valid and stable everywhere
(Spark SQL, pyiceberg, file paths).
"""

from __future__ import annotations

import re

from cdclake.settings import CATALOG_NAME, META_NAMESPACE

_INVALID = re.compile(r"[^a-z0-9_]")

MAX_TABLE_ID_LENGTH = 250
"""The longest ``namespace.table`` the lake takes. A batch's staging directory for the table is named by it (one
file-name component: 255 bytes), and its changelog and history tables are ``<namespace>__<table>`` in a catalog
whose name columns hold 255 characters. Longer ids come from a corrupt message, or from two names both near SQL
Server's or Oracle's 128-character maximum; their messages are quarantined with that reason."""


def sanitize(part: str) -> str:
    """Lower-case a name and replace characters that are not ``[a-z0-9_]`` with ``_`` (surrounding spaces dropped)."""
    cleaned = _INVALID.sub("_", part.strip().lower())
    return cleaned or "_"


def table_id(database: str | None, schema: str | None, table: str) -> str:
    """The lake's ``namespace.table`` identifier for a source table.

    Args:
        database: Source database, or None.
        schema: Source schema, or None/empty for sources without schemas.
        table: Source table or collection name.

    Returns:
        ``namespace.table``, e.g. ``public.customers`` or ``inventory.customers``.
    """
    namespace = schema if schema else (database or "default")
    return f"{sanitize(namespace)}.{sanitize(table)}"


def spark_table_name(tid: str) -> str:
    """The Spark SQL name of a lake table, ``lake.<namespace>.<table>`` (each part quoted)."""
    namespace, table = split_table_id(tid)
    return f"{CATALOG_NAME}.`{namespace}`.`{table}`"


def split_table_id(tid: str) -> tuple[str, str]:
    """Split ``namespace.table`` into its two parts."""
    namespace, _, table = tid.partition(".")
    if not table:
        raise ValueError(f"table id {tid!r} is not of the form namespace.table")
    return namespace, table


def meta_table(name: str) -> str:
    """``namespace.table`` of one of cdclake's own tables (quarantine, validation results)."""
    return f"{META_NAMESPACE}.{name}"


def asset_uri(tid: str) -> str:
    """The Airflow Asset URI of a lake table, ``iceberg://lake/<namespace>.<table>``; DAGs that consume a table
    schedule on ``Asset(asset_uri("public.orders"))``."""
    namespace, table = split_table_id(tid)
    return f"iceberg://{CATALOG_NAME}/{namespace}.{table}"
