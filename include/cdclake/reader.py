"""Reading lake tables without Spark (pyiceberg on the same JDBC catalog): fast for the CLI and the demo.

Rows are rendered JSON-ready: decimals as strings (with the column's scale), dates as ``YYYY-MM-DD``, timestamps
without zone as ``YYYY-MM-DDTHH:MM:SS.ffffff``, timestamps with zone in UTC with a ``Z`` suffix, binary as base64,
``float`` (32-bit) columns as the shortest decimal that is the same float (MySQL FLOAT ``5.17``, not the double
``5.170000076293945`` Python widens it to), and floating-point NaN and infinities as the strings ``"NaN"``,
``"Infinity"`` and ``"-Infinity"`` (as Debezium's JSON writes them; JSON has no such numbers, and a bare ``NaN``
is not JSON that other tools read).
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import math
import struct
from typing import TYPE_CHECKING, Any, Callable

from cdclake.catalog import BOOKKEEPING_PREFIX, KEY_COLUMNS_PROPERTY, is_meta_namespace, pyiceberg_catalog
from cdclake.exceptions import ConfigError
from cdclake.identity import split_table_id
from cdclake.settings import LakeSettings

if TYPE_CHECKING:
    import pyarrow as pa


def list_tables(settings: LakeSettings) -> list[str]:
    """Every source table in the lake as ``namespace.table``, sorted (cdclake's own tables excluded)."""
    if not _catalog_exists(settings):
        return []
    catalog = pyiceberg_catalog(settings)
    out = []
    for ns in catalog.list_namespaces():
        namespace = ".".join(ns)
        if is_meta_namespace(namespace):
            continue
        out.extend(f"{namespace}.{t[-1]}" for t in catalog.list_tables(ns))
    return sorted(out)


def table_rows(settings: LakeSettings, tid: str) -> list[dict[str, Any]]:
    """Every row of a lake table as plain Python values; [] when the lake or the table does not exist yet."""
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

    if not _catalog_exists(settings):
        return []
    try:
        table = pyiceberg_catalog(settings).load_table(tid)
    except (NoSuchTableError, NoSuchNamespaceError):
        return []
    return table.scan().to_arrow().to_pylist()


def _catalog_exists(settings: LakeSettings) -> bool:
    if settings.catalog_uri.startswith("jdbc:sqlite:"):
        from pathlib import Path

        return Path(settings.catalog_uri[len("jdbc:sqlite:"):]).exists()
    return True


def _pylist(table: "pa.Table") -> list[dict[str, Any]]:
    """Rows of an Arrow table as Python values, with dates and microsecond timestamps (also in lists) already
    rendered: Python's dates end at year 9999 and begin at year 1, Iceberg's do not (Debezium's stand-ins for
    PostgreSQL's ``infinity`` are in years 294247 and 5877611; PostgreSQL has BC dates)."""
    renderers: dict[str, Callable[[Any], Any]] = {}
    for i, field in enumerate(table.schema):
        counted = _as_counts(field.type)
        if counted is not None:
            counts_type, renderers[field.name] = counted
            table = table.set_column(i, field.name, table.column(i).cast(counts_type))
    rows = table.to_pylist()
    for row in rows:
        for name, render_counts in renderers.items():
            row[name] = render_counts(row[name])
    return rows


def _as_counts(arrow_type: "pa.DataType") -> "tuple[pa.DataType, Callable[[Any], Any]] | None":
    """For a date or microsecond timestamp type (or a list of one): the integer type its values are cast to (days,
    microseconds), and the function that renders such a value as text; None for other types."""
    import pyarrow as pa

    def nullable(text: Callable[[int], str]) -> Callable[[Any], Any]:
        return lambda value: None if value is None else text(value)

    if pa.types.is_date32(arrow_type):
        return pa.int32(), nullable(_date_text)
    if pa.types.is_timestamp(arrow_type) and arrow_type.unit == "us":
        zoned = arrow_type.tz is not None
        return pa.int64(), nullable(lambda micros: _timestamp_text(micros, zoned=zoned))
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        inner = _as_counts(arrow_type.value_type)
        if inner is not None:
            element_type, render_element = inner
            list_type = pa.list_(element_type) if pa.types.is_list(arrow_type) else pa.large_list(element_type)
            return list_type, nullable(lambda values: [render_element(v) for v in values])
    return None


def _date_text(days: int) -> str:
    """``YYYY-MM-DD`` of any day count since 1970-01-01 (ISO 8601's ``-YYYY`` before year 0)."""
    return _timestamp_text(days * 86_400_000_000, zoned=False)[:-16]


def _timestamp_text(micros: int, *, zoned: bool) -> str:
    """``YYYY-MM-DDTHH:MM:SS.ffffff`` (+ ``Z`` when zoned) of any microsecond count, in the proleptic Gregorian
    calendar (days to civil date: H. Hinnant's algorithm, valid for every year; ISO 8601's ``-YYYY`` for years
    before 0)."""
    days, micro_of_day = divmod(micros, 86_400_000_000)
    z = days + 719_468
    era, doe = divmod(z, 146_097)
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day, month = doy - (153 * mp + 2) // 5 + 1, mp + 3 if mp < 10 else mp - 9
    year = yoe + era * 400 + (month <= 2)
    seconds, fraction = divmod(micro_of_day, 1_000_000)
    clock = f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}.{fraction:06d}"
    return f"{'-' if year < 0 else ''}{abs(year):04d}-{month:02d}-{day:02d}T{clock}{'Z' if zoned else ''}"


def render(value: Any) -> Any:
    """One value in dump form (see the module docstring)."""
    if isinstance(value, decimal.Decimal):
        return format(value, "f")  # plain notation: 0 at scale 10 is 0.0000000000, not 0E-10
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            return value.astimezone(dt.timezone.utc).replace(tzinfo=None).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        return value.strftime("%Y-%m-%dT%H:%M:%S.%f")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, dt.time):
        return value.isoformat()
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, list):
        return [render(v) for v in value]
    if isinstance(value, dict):
        return {k: render(v) for k, v in value.items()}
    return value


def shortest_float32(value: float | None) -> float | None:
    """A 32-bit float as the shortest decimal that reads back as the same 32-bit float (``5.17``, not
    ``5.170000076293945``)."""
    if value is None or not math.isfinite(value):
        return value
    single = struct.unpack("f", struct.pack("f", value))[0]
    for digits in range(1, 10):  # 9 significant digits always round-trip a float32
        shorter = float(f"{single:.{digits}g}")
        if struct.unpack("f", struct.pack("f", shorter))[0] == single:
            return shorter
    return single


def _sort_key(value: Any) -> tuple[int, Any]:
    return (0, "") if value is None else (1, value)


def dump_rows(settings: LakeSettings, table_id: str, *, all_columns: bool = False) -> list[dict[str, Any]]:
    """A table's current rows, sorted by primary key, rendered JSON-ready.

    Args:
        settings: The lake.
        table_id: ``namespace.table``.
        all_columns: Include the ``_cdc_*`` bookkeeping columns.

    Raises:
        ConfigError: No such table.
    """
    from pyiceberg.exceptions import NoSuchTableError
    from pyiceberg.types import FloatType

    split_table_id(table_id)
    if table_id not in list_tables(settings):
        raise ConfigError(f"no table {table_id!r} in the lake at {settings.root}; see `cdclake tables`")
    try:
        table = pyiceberg_catalog(settings).load_table(table_id)
    except NoSuchTableError as exc:
        raise ConfigError(f"no table {table_id!r} in the lake at {settings.root}") from exc
    names = [f.name for f in table.schema().fields if all_columns or not f.name.startswith(BOOKKEEPING_PREFIX)]
    rows = _pylist(table.scan(selected_fields=tuple(names)).to_arrow())
    key = [k for k in table.properties.get(KEY_COLUMNS_PROPERTY, "").split(",") if k] or names[:1]
    rows.sort(key=lambda r: tuple(_sort_key(r[k]) for k in key))
    singles = {f.name for f in table.schema().fields if isinstance(f.field_type, FloatType)}
    return [{n: render(shortest_float32(r[n]) if n in singles else r[n]) for n in names} for r in rows]


def quarantine_rows(settings: LakeSettings, *, source: str | None = None, batch_id: str | None = None,
                    reason: str | None = None) -> list[dict[str, Any]]:
    """The quarantine's messages (oldest batch first), optionally filtered; reasons match case-insensitively."""
    from cdclake.quarantine import TABLE

    rows = table_rows(settings, TABLE)
    wanted = [
        r for r in rows
        if (source is None or r["source"] == source) and (batch_id is None or r["batch_id"] == batch_id)
        and (reason is None or reason.lower() in (r["reason"] or "").lower())
    ]
    wanted.sort(key=lambda r: (r["source"], r["batch_id"], r["input"] or "", _sort_key(r["line"]),
                               _sort_key(r["byte_offset"]), _sort_key(r["kafka_offset"])))
    return [{
        "source": r["source"], "format": r["format"], "batch_id": r["batch_id"], "table_id": r["table_id"],
        "reason": r["reason"], "input_file": r["input"], "line": r["line"], "byte_offset": r["byte_offset"],
        "kafka_offset": r["kafka_offset"], "key": r["raw_key"], "value": r["raw_value"],
        "quarantined_at": render(r["quarantined_at"]),
    } for r in wanted]
