"""How changes are applied to one table (a plain dataclass, importable without Spark: DAG files build it)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping, Sequence

from cdclake.exceptions import ConfigError

_KEY_WORD = re.compile(r"(?<![\w`])key(?![\w`])")
_PLURAL = re.compile(r"\b(year|month|day|hour)\(")
"""Iceberg's Spark DDL spells the time transforms years/months/days/hours."""
UNBUCKETABLE_TYPES = frozenset(("float", "double", "boolean"))
"""Spark type names (``simpleString``) that Iceberg's bucket transform does not take."""

SOFT_DELETE_COLUMN = "_cdc_is_deleted"
"""Soft-delete mode's flag column: the row was deleted at the source (it stays, as its own tombstone)."""

DOCUMENT_FIELD_TYPES = ("string", "boolean", "int", "bigint", "double", "float", "date", "timestamp")
"""Types a document field can be exposed as (and ``decimal(P,S)``)."""
_DECIMAL = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$")
_FIELD_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_RESERVED_FIELDS = ("document",)


def document_field_type(name: str, type_name: str) -> str:
    """The normalized Spark SQL type of an exposed document field.

    Raises:
        ConfigError: The name is not a plain column name (letters, digits, underscores, starting with a letter,
            not ``document``) or the type is not one of :data:`DOCUMENT_FIELD_TYPES` / ``decimal(P,S)``.
    """
    if not _FIELD_NAME.match(name) or name in _RESERVED_FIELDS:
        raise ConfigError(f"document field {name!r}: expected a top-level field name of letters, digits and "
                          "underscores starting with a letter (and not 'document')")
    normalized = "bigint" if type_name.strip().lower() == "long" else type_name.strip().lower()
    decimal = _DECIMAL.match(normalized)
    if decimal:
        precision, scale = int(decimal.group(1)), int(decimal.group(2))
        if not 0 < precision <= 38 or scale > precision:
            raise ConfigError(f"document field {name!r}: {type_name!r} needs 0 < precision <= 38 and scale <= "
                              "precision")
        return f"decimal({precision},{scale})"
    if normalized not in DOCUMENT_FIELD_TYPES:
        raise ConfigError(f"document field {name!r}: type {type_name!r} is not one of "
                          f"{', '.join(DOCUMENT_FIELD_TYPES)}, decimal(P,S)")
    return normalized


@dataclass(frozen=True)
class ApplyOptions:
    """How changes are applied to one table.

    Attributes:
        delete_mode: ``hard`` (rows are removed, tombstones kept) or ``soft`` (rows kept, ``_cdc_is_deleted``).
        write_mode: ``merge-on-read`` (default; cheap commits, delete files) or ``copy-on-write``.
        partition: Iceberg partition transforms for a new table, e.g. ``("bucket(16, id)",)``, where ``key``
            stands for the first key column; None: ``bucket(16, key)``; ``()``: unpartitioned.
        reconcile_snapshots: Delete rows a completed snapshot did not see (and nothing changed since it began).
        changelog: Append every non-stale change to the table's changelog table.
        history: Keep an SCD type 2 history table of the table's row versions (``valid_from``/``valid_to`` by
            source position and source timestamp; :func:`cdclake.apply.history_table_id`).
        document_fields: For tables with a JSON ``document`` column (MongoDB collections): top-level fields also
            kept as typed columns, as ``(name, Spark SQL type)`` pairs (:func:`document_field_type`).
    """

    delete_mode: str = "hard"
    write_mode: str = "merge-on-read"
    partition: tuple[str, ...] | None = None
    reconcile_snapshots: bool = True
    changelog: bool = True
    history: bool = False
    document_fields: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if self.delete_mode not in ("hard", "soft"):
            raise ConfigError(f"delete_mode must be 'hard' or 'soft', not {self.delete_mode!r}")
        if self.write_mode not in ("merge-on-read", "copy-on-write"):
            raise ConfigError(f"write_mode must be 'merge-on-read' or 'copy-on-write', not {self.write_mode!r}")
        object.__setattr__(self, "document_fields",
                           tuple((name, document_field_type(name, t)) for name, t in self.document_fields))

    @property
    def soft(self) -> bool:
        return self.delete_mode == "soft"

    def partition_for(self, key: Sequence[str], types: Mapping[str, str] | None = None) -> tuple[str, ...]:
        """The partition transforms of a new table with this key.

        ``key`` in a transform stands for the first key column. In a ``bucket`` transform, given ``types``
        (column -> Spark type name), it stands for the first key column Iceberg can bucket (not a float, double
        or boolean); a transform whose ``key`` stands for no column is left out.
        """
        spec = self.partition if self.partition is not None else ("bucket(16, key)",)
        bucketable = [k for k in key if types is None or types.get(k) not in UNBUCKETABLE_TYPES]
        fields = []
        for f in spec:
            f = _PLURAL.sub(lambda m: m.group(1) + "s(", f)
            if _KEY_WORD.search(f):
                column = (bucketable if f.lstrip().lower().startswith("bucket(") else list(key))[:1]
                if not column:
                    continue
                f = _KEY_WORD.sub("`" + column[0].replace("`", "``") + "`", f)
            fields.append(f)
        return tuple(fields)
