"""Which column type changes an Iceberg table can take (schema evolution rules, pure).

Iceberg widens in place only ``int -> long``, ``float -> double`` and a decimal's precision (same scale). A change
arriving with a narrower type than the table's fits: it is cast on write. That is an ``int`` into a ``long`` column,
or a decimal with no more integer digits and no more fraction digits than the column's (``decimal(12,2)`` into
``decimal(38,10)``: DRS types a bare ``decimal`` so until a DDL says more, and a full sync landed after incremental
batches says ``decimal(12,2)``). A text column takes integers and decimals as their text (``int`` into
``string``: a PostgreSQL ``numeric`` without precision, kept as text, whose ``ALTER .. TYPE numeric(12,2)`` makes
later changes decimals; one batch with both types makes the column ``string`` the same way). A decimal arriving
with more fraction digits than the column's (``decimal(15,4)`` into ``decimal(10,2)``: a MySQL ``MODIFY COLUMN``;
Iceberg cannot change a scale) keeps the column's scale (:func:`decimal_target`): each value is taken only if it has
no more fraction digits than the column's, else that change is quarantined. So does an integer arriving for a
decimal column (a Debezium Oracle ``NUMBER(9,0)`` is ``int32`` in the change events, but ``decimal(9,0)`` in the
CREATE TABLE the table was made from; MySQL's ``BIGINT UNSIGNED``, ``decimal(20,0)`` by its DDL, is ``int64`` by
Debezium's default). Any other difference (``string`` into ``int``, ``timestamp`` vs ``timestamp_ntz``) is
incompatible: the affected changes are quarantined with that reason instead of being cast with loss.
"""

from __future__ import annotations

from pyspark.sql.types import (
    ByteType, DataType, DecimalType, DoubleType, FloatType, IntegerType, LongType, ShortType, StringType,
)

_INTEGRAL = (ByteType, ShortType, IntegerType, LongType)


def widening(table: DataType, incoming: DataType) -> bool:
    """Whether the table's column type must be widened in place to take ``incoming`` (and Iceberg can)."""
    if isinstance(table, (ByteType, ShortType, IntegerType)) and isinstance(incoming, LongType):
        return True
    if isinstance(table, FloatType) and isinstance(incoming, DoubleType):
        return True
    return (isinstance(table, DecimalType) and isinstance(incoming, DecimalType)
            and incoming.scale == table.scale and incoming.precision > table.precision)


def fits(table: DataType, incoming: DataType) -> bool:
    """Whether values of ``incoming`` type are written into a ``table`` column without loss (cast on write)."""
    if table == incoming:
        return True
    if isinstance(table, LongType) and isinstance(incoming, _INTEGRAL):
        return True
    if isinstance(table, IntegerType) and isinstance(incoming, (ByteType, ShortType)):
        return True
    if isinstance(table, DoubleType) and isinstance(incoming, (FloatType, ByteType, ShortType, IntegerType)):
        return True
    if isinstance(table, DecimalType) and isinstance(incoming, DecimalType):
        return (incoming.scale <= table.scale
                and incoming.precision - incoming.scale <= table.precision - table.scale)
    return isinstance(table, StringType) and isinstance(incoming, (*_INTEGRAL, DecimalType))


def decimal_target(table: DataType, incoming: DataType) -> DecimalType | None:
    """The column type that values of a decimal ``incoming`` with a larger scale than the ``table`` decimal's are
    written as: the table's scale, and the precision widened (up to 38) if ``incoming`` has more integer digits.
    Integers arriving for a decimal column are written as the column's type (each value only if it fits). None
    when that does not apply (not two decimals, or the scale is not larger)."""
    if isinstance(table, DecimalType) and isinstance(incoming, _INTEGRAL):
        return table
    if not (isinstance(table, DecimalType) and isinstance(incoming, DecimalType)) or incoming.scale <= table.scale:
        return None
    digits = max(table.precision - table.scale, incoming.precision - incoming.scale)
    return DecimalType(min(38, max(table.precision, digits + table.scale)), table.scale)


def incompatibility(column: str, table: DataType, incoming: DataType) -> str | None:
    """Why a change of a column's type cannot be applied, or None when it can (same, fits, or widening)."""
    if fits(table, incoming) or widening(table, incoming):
        return None
    return (f"column {column} arrives as {incoming.simpleString()} but the table has {table.simpleString()}; "
            "Iceberg widens only int->long, float->double and decimal precision (same scale), and a value is "
            "cast into the column only without loss, so these changes "
            "are held back: evolve the table by hand, with the same change to its changelog "
            "(cdclake_changelog.<namespace>__<table>) and history table (cdclake_history.*) if it has them, "
            "or rename the column at the source; then replay them")
