"""Where the lake lives: catalog, warehouse, raw zone, staging and data-quality results.

The embedded default is one local directory (``./lake``) holding a SQLite Iceberg JDBC catalog, the warehouse,
the raw zone, staging and data-quality output. Every location can be overridden by environment variables, so the
same code runs against a PostgreSQL catalog and an ``s3://`` raw zone by configuration only:

========================  ==========================================================  ============================
variable                  meaning                                                     default
========================  ==========================================================  ============================
``CDCLAKE_LAKE``          lake root directory                                         ``./lake``
``CDCLAKE_CATALOG_URI``   Iceberg JDBC catalog URI (``jdbc:sqlite:…``,                ``jdbc:sqlite:<lake>/catalog.db``
                          ``jdbc:postgresql://host:5432/db``)
``CDCLAKE_CATALOG_USER``  / ``CDCLAKE_CATALOG_PASSWORD``: JDBC credentials            unset
``CDCLAKE_WAREHOUSE``     Iceberg warehouse location                                  ``<lake>/warehouse``
``CDCLAKE_RAW``           raw zone root: a directory or ``s3://bucket/prefix``        ``<lake>/raw``
``CDCLAKE_S3_ENDPOINT``   S3 API endpoint for ``s3://`` locations (MinIO, moto)       AWS default
========================  ==========================================================  ============================
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Mapping
from urllib.parse import quote

from cdclake.exceptions import ConfigError

CATALOG_NAME = "lake"
"""Name of the Iceberg catalog in Spark (``lake.<namespace>.<table>``) and in pyiceberg; both must agree because
the JDBC catalog stores it with every table."""

META_NAMESPACE = "cdclake_meta"
"""Namespace of cdclake's own tables (quarantine, validation results); never a source table's namespace."""


@dataclass(frozen=True)
class LakeSettings:
    """Resolved locations of one lake.

    Attributes:
        root: Local lake directory; holds staging and, by default, everything else.
        catalog_uri: JDBC URI of the Iceberg catalog.
        warehouse: Iceberg warehouse location (a directory path or URI).
        raw_root: Raw zone root, a directory path or ``s3://bucket/prefix``.
        s3_endpoint: Custom S3 API endpoint, or None for AWS.
        catalog_user: JDBC user, when the catalog needs one.
        catalog_password: JDBC password, when the catalog needs one.
    """

    root: Path
    catalog_uri: str
    warehouse: str
    raw_root: str
    s3_endpoint: str | None = None
    catalog_user: str | None = field(default=None, repr=False)
    catalog_password: str | None = field(default=None, repr=False)

    @classmethod
    def from_env(cls, lake: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None) -> "LakeSettings":
        """Resolve settings from an explicit lake directory and/or ``CDCLAKE_*`` environment variables.

        Args:
            lake: Lake root; overrides ``CDCLAKE_LAKE``.
            env: Environment to read (default ``os.environ``).

        Returns:
            The resolved settings; nothing is created on disk.

        Raises:
            ConfigError: A catalog URI that is not a supported JDBC URI.
        """
        env = os.environ if env is None else env
        root = Path(lake if lake is not None else env.get("CDCLAKE_LAKE", "lake")).expanduser().resolve()
        catalog_uri = env.get("CDCLAKE_CATALOG_URI") or f"jdbc:sqlite:{root / 'catalog.db'}"
        if not (catalog_uri.startswith("jdbc:sqlite:") or catalog_uri.startswith("jdbc:postgresql:")):
            raise ConfigError(
                f"CDCLAKE_CATALOG_URI={catalog_uri!r}: expected jdbc:sqlite:<file> or jdbc:postgresql://host:port/db"
            )
        return cls(
            root=root,
            catalog_uri=catalog_uri,
            warehouse=env.get("CDCLAKE_WAREHOUSE") or str(root / "warehouse"),
            raw_root=env.get("CDCLAKE_RAW") or str(root / "raw"),
            s3_endpoint=env.get("CDCLAKE_S3_ENDPOINT") or None,
            catalog_user=env.get("CDCLAKE_CATALOG_USER") or None,
            catalog_password=env.get("CDCLAKE_CATALOG_PASSWORD") or None,
        )

    def with_root(self, root: Path) -> "LakeSettings":
        """Return a copy whose default locations live under another root (used by tests)."""
        return replace(self, root=root)

    @property
    def staging_root(self) -> Path:
        """Local directory of normalized canonical change records, ``<root>/staging``."""
        return self.root / "staging"

    @property
    def dq_root(self) -> Path:
        """Local directory of data-quality results and Data Docs, ``<root>/dq``."""
        return self.root / "dq"

    @property
    def warehouse_uri(self) -> str:
        """The warehouse as a URI Spark and pyiceberg both accept."""
        if "://" in self.warehouse:
            return self.warehouse
        return Path(self.warehouse).resolve().as_uri()

    @property
    def sqlalchemy_uri(self) -> str:
        """The catalog URI in the form pyiceberg's ``SqlCatalog`` (SQLAlchemy) expects."""
        return sqlalchemy_uri(self.catalog_uri, self.catalog_user, self.catalog_password)

    def ensure_local_dirs(self) -> None:
        """Create the local lake directories (root, and the warehouse/raw zone when they are local paths)."""
        self.root.mkdir(parents=True, exist_ok=True)
        for location in (self.warehouse, self.raw_root):
            if "://" not in location:
                Path(location).mkdir(parents=True, exist_ok=True)
        if self.catalog_uri.startswith("jdbc:sqlite:"):
            Path(self.catalog_uri[len("jdbc:sqlite:"):]).parent.mkdir(parents=True, exist_ok=True)


def sqlalchemy_uri(catalog_uri: str, user: str | None = None, password: str | None = None) -> str:
    """A JDBC catalog URI (``jdbc:sqlite:…``, ``jdbc:postgresql://…``) in the form SQLAlchemy expects."""
    if catalog_uri.startswith("jdbc:sqlite:"):
        # An absolute path /a/b.db becomes sqlite:////a/b.db (three slashes, then the path's own).
        return "sqlite:///" + catalog_uri[len("jdbc:sqlite:"):]
    rest = catalog_uri[len("jdbc:postgresql://"):]
    credentials = ""
    if user:
        credentials = quote(user, safe="")
        if password:
            credentials += ":" + quote(password, safe="")
        credentials += "@"
    return f"postgresql+psycopg2://{credentials}{rest}"
