"""The expected final tables of a demo stream, by replaying its logical changes in plain Python.

This is the independent side of the end-to-end comparison: it knows nothing of Debezium, Spark or Iceberg, only
the row changes the simulated database made. Its table definitions are written out here on purpose rather than
taken from the generator, so a wrong column order or scale on either side shows up as a difference.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime, timezone
from decimal import Decimal
from typing import Any

from cdclake.demo.generator import LogicalChange


@dataclass(frozen=True)
class _Spec:
    table_id: str
    key: tuple[str, ...]
    columns: tuple[str, ...]
    scales: dict[str, int]


_SPECS: dict[str, _Spec] = {
    "customers": _Spec(
        table_id="public.customers",
        key=("id",),
        columns=("id", "first_name", "last_name", "email", "vip", "created_at", "birth_date"),
        scales={},
    ),
    "orders": _Spec(
        table_id="public.orders",
        key=("order_id",),
        columns=("order_id", "customer_id", "amount", "status", "note"),
        scales={"amount": 2},
    ),
}


def expected_tables(changes: Iterable[LogicalChange]) -> dict[str, list[dict[str, Any]]]:
    """Replay row changes and render the final tables as ``cdclake dump`` prints them.

    Snapshot reads and inserts set a row, updates replace it, deletes remove it.

    Args:
        changes: Row changes in source commit order.

    Returns:
        ``{"public.customers": [...], "public.orders": [...]}``: rows sorted by primary key, each a dict in column
        order with JSON-ready values (decimals as strings at the column's scale, dates as ``YYYY-MM-DD``,
        timestamps as ``YYYY-MM-DDTHH:MM:SS.ffffff`` in UTC).

    Raises:
        ValueError: If a change names an unknown table or op, lacks a row where one is needed, or its row
            disagrees with its key.
    """
    state: dict[str, dict[tuple[Any, ...], dict[str, Any]]] = {name: {} for name in _SPECS}
    for number, change in enumerate(changes):
        spec = _SPECS.get(change.table)
        if spec is None:
            raise ValueError(f"change #{number}: unknown table {change.table!r}")
        pk = tuple(change.key[k] for k in spec.key)
        if change.op == "delete":
            state[change.table].pop(pk, None)
        elif change.op in ("snapshot", "insert", "update"):
            if change.row is None:
                raise ValueError(f"change #{number}: {change.op} of {change.table} {change.key} has no row")
            if tuple(change.row[k] for k in spec.key) != pk:
                raise ValueError(f"change #{number}: row {change.row} does not have key {change.key}")
            state[change.table][pk] = dict(change.row)
        else:
            raise ValueError(f"change #{number}: unknown op {change.op!r}")

    return {
        spec.table_id: [
            {c: _render(row[c], spec.scales.get(c)) for c in spec.columns}
            for _, row in sorted(state[name].items(), key=lambda item: item[0])
        ]
        for name, spec in _SPECS.items()
    }


def _render(value: Any, scale: int | None) -> Any:
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, Decimal):
        return format(value.quantize(Decimal(1).scaleb(-(scale or 0))), "f")
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(timezone.utc).replace(tzinfo=None)
        return value.isoformat(timespec="microseconds")
    if isinstance(value, date):
        return value.isoformat()
    raise ValueError(f"cannot render {type(value).__name__} value {value!r}")
