"""Source-format normalizers, one module each, registered by name.

A normalizer turns raw records (see :data:`cdclake.landing.RAW_FIELDS`) into *parsed* records, the text-level
form of the canonical change record (:data:`PARSED_COLUMNS`); :mod:`cdclake.normalize` then types them per table
and stages canonical records. A new format is a new module plus an entry in :data:`REGISTRY`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from cdclake.exceptions import UnknownFormatError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from cdclake.formats.connect import ColumnType

PARSED_COLUMNS = (
    "input", "file_index", "index", "row_index", "line", "byte_offset", "offset", "key", "value",
    "table_id", "op", "source_pos", "source_ts", "snapshot",
    "key_text", "before_text", "after_text", "row_schema", "key_schema",
    "status", "reason",
)
"""Columns of a parsed record. Raw location: ``input``, ``file_index``, ``index`` (message in file),
``row_index`` (row in a multi-row message), ``line``, ``byte_offset``, ``offset``, and the raw ``key``/``value``.
Change: ``table_id``, ``op`` (c/u/d/r/t), ``source_pos`` (fixed-width ordered source position), ``source_ts``
(timestamp), ``snapshot`` (marker or null). Images as JSON object text: ``key_text``, ``before_text``,
``after_text``. Types: ``row_schema``/``key_schema`` (format-specific JSON text the format's ``table_columns``
reads, or null). Outcome: ``status`` = ``ok`` | ``skip`` | ``quarantine`` with a ``reason``."""


class Normalizer(Protocol):
    """What a format module provides."""

    name: str

    def parse(self, raw: "DataFrame") -> "DataFrame":
        """Raw records -> parsed records (:data:`PARSED_COLUMNS`); pure, JVM expressions only."""

    def table_columns(self, row_schema: dict[str, Any]) -> "list[ColumnType]":
        """Columns of a table from one of its ``row_schema`` values (parsed JSON)."""

    def key_columns(self, key_schema: dict[str, Any] | None, key_sample: dict[str, Any] | None) -> list[str]:
        """Primary-key column names from the message key's schema or a sample key, or [] when unknown."""


def get_normalizer(name: str) -> Normalizer:
    """The normalizer registered under a format name.

    Raises:
        UnknownFormatError: No normalizer has that name.
    """
    from cdclake.formats import debezium

    registry: dict[str, Normalizer] = {"debezium": debezium.NORMALIZER}
    try:
        return registry[name]
    except KeyError:
        raise UnknownFormatError(
            f"unknown format {name!r}; supported: {', '.join(sorted(registry))}"
        ) from None


FORMATS = ("debezium",)
