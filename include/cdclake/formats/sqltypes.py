"""Source SQL type text (canal-style ``mysqlType`` / DRS ``columnType``) -> Spark/Iceberg types and JVM decoders.

Canal flat messages, Huawei DRS and Tencent CKafka's canal-compatible output carry every column value as a JSON
*string* (or null), with a per-message map of column -> the source's SQL type text (``"decimal(10,2)"``,
``"timestamp without time zone"``, ``"NUMBER(10,2)"``) and a map of column -> JDBC type code (``sqlType``). This
module maps the type text of one of four dialects (``mysql``; ``postgres``, also GaussDB; ``oracle``; ``tsql``)
onto a Spark type, falling back to the ``java.sql.Types`` code when the text is missing or unknown, and builds
the expression that turns the text value into that type. Decoders are Spark SQL expressions only (no Python per
row) and follow one contract: the result is null exactly when the input is null or does not convert, because the
caller treats "input not null, output null" as a cast failure and quarantines the row. Hence no decoder rounds,
truncates or wraps a value silently, except where noted (digits beyond microseconds; ``bit(64)``).

Type text is matched case-insensitively; lengths and precisions in parentheses, ``unsigned``/``signed``/
``zerofill``, ``character set``/``charset``/``collate`` clauses, MySQL's ``binary`` attribute and SQL Server's
``identity`` are tolerated. An array type (``integer[]``, ``integer array``, PostgreSQL's internal ``_int4``)
is kept as its text (``StringType``) in every dialect.

Choices that go beyond "the obvious type":

- Iceberg has no 8/16-bit integers, so every small integer becomes ``int``; MySQL ``int unsigned`` becomes
  ``long`` and ``bigint unsigned`` ``decimal(20,0)``.
- A ``decimal``/``numeric``/``NUMBER`` without precision becomes ``decimal(38,10)``: DRS and canal strip the
  precision from the type text (the DRS sample sends ``"decimal"`` for a ``decimal(10,0)`` column), so the
  declared type is unknowable; 38 digits with 10 after the point holds every common declaration. A value with
  more than 10 fractional digits is then quarantined rather than rounded. A declared precision above 38 (MySQL
  allows 65, PostgreSQL 1000) cannot be a Spark decimal: the column is ``StringType`` holding the number's exact
  text (validated as a number).
- MySQL ``bit(1)`` is a boolean, ``bit(n)`` a ``long``; so is a bare ``bit``, which MySQL reads as ``bit(1)``
  but TiCDC's canal-json writes for every ``bit(n)`` column (with the number as the value).
- MySQL's zero dates ``0000-00-00`` / ``0000-00-00 00:00:00`` (its "no date", allowed unless ``NO_ZERO_DATE``
  is set; canal and DRS pass them through as text) become null, as Debezium makes them. Dates with only some
  zero parts (``2021-00-00``) have no such meaning and are quarantined.
- Timestamps with more than six fractional digits (Oracle ``TIMESTAMP(9)``, SQL Server ``datetime2(7)``) keep
  microseconds: Iceberg stores no more, and the extra digits are dropped (truncated, not rounded).
- A timestamp *with* time zone whose text has no offset is read in the source's time zone (:func:`source_time_zone`;
  default UTC): canal and TiCDC write MySQL ``TIMESTAMP`` values without one, in their server's zone. A plain
  number is epoch seconds (DRS writes MySQL ``TIMESTAMP`` as ``"1624614713.201"``).
- JDBC codes are not consulted for ``postgres`` when type text is present: DRS's GaussDB/PostgreSQL messages
  carry codes that are *not* ``java.sql.Types`` (``16`` for ``timestamp without time zone``, ``2`` for
  ``smallint``, ``15`` for ``bytea``), and the spec maps every unlisted PostgreSQL type to text anyway.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Iterator, Literal

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    StringType,
    TimestampNTZType,
    TimestampType,
)

from cdclake.config import check_time_zone
from cdclake.exceptions import ConfigError
from cdclake.formats.connect import (
    ColumnType,
    Converter,
    is_variable_scale_decimal,
    variable_scale_decimal,
    variable_scale_decimal_as,
)

Dialect = Literal["mysql", "postgres", "oracle", "tsql"]
DIALECTS: tuple[str, ...] = ("mysql", "postgres", "oracle", "tsql")

MAX_PRECISION = 38
"""Spark's (and Iceberg's) largest decimal precision."""

BARE_DECIMAL = DecimalType(38, 10)
"""The type of a decimal column whose type text carries no precision (see the module docstring)."""

BYTE_LIST_PATTERN = r"^\[\s*(?:-?\d{1,3}(?:\s*,\s*-?\d{1,3})*)?\s*\]$"
"""A byte array written as a JSON list of Java (signed) bytes, e.g. ``[106, 103, -106]``; ``[]`` is empty.

Huawei DRS writes MySQL ``binary``/``varbinary``/``blob`` values (and ``bit``) this way (``Arrays.toString`` of
the ``byte[]``). Each item must lie in -128..255 (checked by :func:`bytes_from_byte_list`)."""

_INTEGER = r"^[+-]?\d+(?:\.0*)?$"
"""An integer, also written with a zero fraction (``"12.0"``, as tools that go through a double print it).
Spark's cast alone would turn ``"12.5"`` into 12."""

_NUMBER = r"^([+-]?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?$"
"""A decimal number, plain or in exponent notation (``1.2510357E7``); groups: sign, integer digits, fraction
digits, exponent. At least one digit is required separately (the pattern alone also matches ``"."``)."""

_HEX_BYTES = r"^(?:\\x|0x|0X)?((?:[0-9a-fA-F]{2})*)$"
r"""Hex bytes: PostgreSQL ``bytea`` (``\x6279`` in hex output mode, plain ``6279`` from DRS), SQL Server
(``0x6279``), Oracle ``RAW`` (``6279``). The prefixes cannot be mistaken for hex digits."""

_DATE = r"\d{4}-\d{2}-\d{2}"
_DATETIME = rf"^({_DATE})(?:[ T:](\d{{2}}:\d{{2}})(:\d{{2}})?(\.\d+)?)?"
"""Date, then optionally hour:minute, :second and a fraction. The date/time separator may be a space, ``T`` (ISO)
or ``:`` (Oracle GoldenGate's ``2021-06-25:17:51:53``)."""
_ZONE = r"\s*(?:Z|[+-]\d{1,2}(?::?\d{2}){0,2}|[A-Za-z][A-Za-z0-9_/+-]*)$"
"""A zone suffix Spark's cast understands: ``Z``, an offset (``+08``, ``+0800``, ``-05:30``) or a zone id
(``UTC``, ``Asia/Shanghai``); PostgreSQL, Oracle and SQL Server (``datetimeoffset``) write one of these."""
_ZERO_DATETIME = r"^0000-00-00(?:[ T]00:00:00(?:\.0*)?)?$"
_MIDNIGHT = r"(?:[ T]00:00(?::00(?:\.0*)?)?)?"
_FULL_DATE = r"^(?!0000-00-00)\d{4}-\d{2}-\d{2}$"
_FULL_DATETIME = r"^(?!0000-00-00)\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?$"
"""The common full forms, which Spark's cast reads as they are (the decoders try them first, with one match):
a date, and a date with seconds and up to six fraction digits. Not the zero date (:func:`is_zero_datetime`)."""
_EPOCH_SECONDS = r"^[+-]?\d+(?:\.\d+)?$"

_LATIN1_ONLY = r"[^\x00-\xFF]"
"""A character ISO-8859-1 cannot hold: canal decodes MySQL binary values with ISO-8859-1, one character per byte,
so such a character means the text is not such a value (``encode`` would silently write ``?``)."""


# --- decoders ----------------------------------------------------------------------------------------------------

def _null(data_type: DataType) -> Column:
    return F.lit(None).cast(data_type)


def is_zero_datetime(text: Column) -> Column:
    """Whether a text is MySQL's zero date or datetime (``0000-00-00[ 00:00:00[.000]]``), its "no date": the
    decoders make it null, and normalize does not count that null as a failed cast."""
    return F.ltrim(text).startswith("0000-00-00") & F.trim(text).rlike(_ZERO_DATETIME)


def integer_from_text(text: Column, data_type: DataType) -> Column:
    """An integer in its text form -> ``int``/``long``; null for a fraction or a value out of range."""
    value = F.trim(text)
    return F.when(value.rlike(_INTEGER), value.cast(data_type)).otherwise(_null(data_type))


def float_from_text(text: Column, data_type: DataType) -> Column:
    """A floating-point number (plain, exponent, ``NaN``, ``Infinity``) -> ``float``/``double``."""
    return F.trim(text).cast(data_type)


def boolean_from_text(text: Column) -> Column:
    """``true``/``false``, ``t``/``f``, ``yes``/``no``, ``y``/``n``, ``1``/``0`` in any case -> boolean.

    Also a one-byte list ``[1]``/``[0]``: DRS writes MySQL ``bit(1)`` as the bit's ``byte[]`` (see
    :data:`BYTE_LIST_PATTERN`); canal writes ``1``/``0``.
    """
    value = F.trim(text)
    return F.when(value.rlike(r"^\[\s*1\s*\]$"), F.lit(True)) \
        .when(value.rlike(r"^\[\s*0\s*\]$"), F.lit(False)) \
        .otherwise(value.cast(BooleanType()))


def is_decimal_exact(text: Column, scale: int) -> Column:
    """Whether a number's text (plain or exponent notation) has no non-zero digit beyond ``scale`` decimals.

    Spark's cast to ``decimal(p, s)`` rounds half-up; this check is what makes a decimal decoder refuse
    ``12.345`` for ``decimal(10,2)`` instead. It works on the digits, so it is exact for any length: with all
    digits ``d`` (integer and fraction digits together, trailing zeros removed, ``z`` of them), ``f`` fraction
    digits and exponent ``e``, the value needs ``f - e - z`` decimals. Zero needs none. Null for a text that is
    not a number.
    """
    value = F.trim(text)
    int_digits = F.regexp_extract(value, _NUMBER, 2)
    fraction = F.regexp_extract(value, _NUMBER, 3)
    exponent = F.regexp_extract(value, _NUMBER, 4)
    digits = F.concat(int_digits, fraction)
    significant = F.regexp_replace(digits, "0+$", "")
    trailing_zeros = F.length(digits) - F.length(significant)
    needed = F.length(fraction) - F.when(exponent == "", F.lit(0)).otherwise(exponent.cast("int")) - trailing_zeros
    is_number = value.rlike(_NUMBER) & (F.length(digits) > 0)
    return F.when(is_number, (significant.rlike("^0*$")) | (needed <= scale))


def decimal_from_text(text: Column, precision: int, scale: int) -> Column:
    """A number's text -> ``decimal(precision, scale)``, exactly: null rather than rounded or overflowed.

    The cast itself returns null when the integer part does not fit; :func:`is_decimal_exact` rejects digits
    beyond the scale that are not zero.
    """
    data_type = DecimalType(precision, scale)
    value = F.trim(text)
    exact = F.when(is_decimal_exact(value, scale), value.cast(data_type)).otherwise(_null(data_type))
    if precision == scale:
        return exact
    # The common case first, with one match instead of the digit arithmetic: plain notation, at most
    # precision - scale integer digits and at most scale fraction digits, so the cast neither rounds nor overflows.
    fraction = rf"(?:\.\d{{0,{scale}}})?" if scale else r"\.?"
    plain = rf"^[+-]?\d{{1,{precision - scale}}}{fraction}$"
    return F.when(value.rlike(plain), value.cast(data_type)).otherwise(exact)


def is_number(text: Column) -> Column:
    """Whether a text is a decimal number, plain or in exponent notation (surrounding spaces allowed)."""
    value = F.trim(text)
    return value.rlike(_NUMBER) & value.rlike(r"\d")


def decimal_text(text: Column) -> Column:
    """A number too wide for a Spark decimal (precision > 38), kept as its trimmed text; null if not a number."""
    return F.when(is_number(text), F.trim(text)).otherwise(_null(StringType()))


def money_from_text(text: Column, precision: int, scale: int) -> Column:
    """PostgreSQL ``money`` -> decimal. Its output carries the locale's currency sign and grouping
    (``-$1,234.56`` under ``en_US``); ``$`` and comma thousands separators in their proper places are dropped.
    Other locales' formats (``1.234,56 €``) do not match and are quarantined rather than misread."""
    value = F.trim(text)
    grouped = value.rlike(r"^[+-]?\$?(?:\d{1,3}(?:,\d{3})*|\d*)(?:\.\d+)?$")
    plain = F.regexp_replace(value, r"[$,]", "")
    return F.when(grouped, decimal_from_text(plain, precision, scale)).otherwise(_null(DecimalType(precision, scale)))


def bytes_from_byte_list(text: Column) -> Column:
    """A :data:`BYTE_LIST_PATTERN` list -> binary; items are Java bytes (-128..127, taken modulo 256) or unsigned
    (0..255). Null if the text is not such a list or an item is out of range."""
    value = F.trim(text)
    inner = F.regexp_extract(value, r"^\[\s*(.*?)\s*\]$", 1)
    items = F.split(inner, r"\s*,\s*")
    in_range = F.forall(items, lambda x: x.cast("int").between(-128, 255))
    hexed = F.concat_ws("", F.transform(items, lambda x: F.lpad(F.hex(x.cast("int").bitwiseAND(255)), 2, "0")))
    return F.when(~value.rlike(BYTE_LIST_PATTERN), _null(BinaryType())) \
        .when(inner == "", F.unhex(F.lit(""))) \
        .when(in_range, F.unhex(hexed)) \
        .otherwise(_null(BinaryType()))


def mysql_bytes_from_text(text: Column) -> Column:
    """A MySQL binary value -> binary: a DRS byte list (:data:`BYTE_LIST_PATTERN`) or else canal's ISO-8859-1
    text (``new String(bytes, ISO_8859_1)``, one character per byte). A binary value whose bytes happen to read
    as such a list (``[1]``) is taken as the list: the two encodings cannot be told apart by the text alone."""
    return F.when(text.rlike(BYTE_LIST_PATTERN), bytes_from_byte_list(text)) \
        .when(text.rlike(_LATIN1_ONLY), _null(BinaryType())) \
        .otherwise(F.encode(text, "ISO-8859-1"))


def latin1_bytes_from_text(text: Column) -> Column:
    """A MySQL binary value as canal writes it (``new String(bytes, ISO_8859_1)``, one character per byte; TiCDC's
    canal-json likewise) -> binary, never read as a DRS byte list: a ``blob`` holding the text ``[1, 2]`` or
    ``[]`` keeps those bytes. For ``--format canal``, whose messages are canal's (DRS has ``--format drs``)."""
    return F.when(text.rlike(_LATIN1_ONLY), _null(BinaryType())).otherwise(F.encode(text, "ISO-8859-1"))


def bytes_from_hex(text: Column) -> Column:
    """Hex bytes (see ``_HEX_BYTES``) -> binary; null for an odd number of digits or a non-hex character."""
    value = F.trim(text)
    return F.when(value.rlike(_HEX_BYTES), F.unhex(F.regexp_extract(value, _HEX_BYTES, 1))) \
        .otherwise(_null(BinaryType()))


_UNSIGNED_64 = str(2**64 - 1)


def bits_from_text(text: Column) -> Column:
    """MySQL ``bit(n)``, n > 1 -> ``long``: the decimal value (canal) or the big-endian bytes as a byte list (DRS).

    ``bit(64)`` values with the top bit set become negative: the long keeps the same 64 bits. An empty list or
    one of more than 8 bytes is not a ``bit(n)`` value (null).
    """
    value = F.trim(text)
    as_bytes = bytes_from_byte_list(value)
    from_list = F.when(F.length(as_bytes).between(1, 8), F.conv(F.hex(as_bytes), 16, -10))
    fits = value.rlike(r"^\+?\d{1,20}$") & (value.cast(DecimalType(20, 0)) <= F.lit(_UNSIGNED_64).cast("decimal(20,0)"))
    from_digits = F.when(fits, F.conv(F.regexp_replace(value, r"^\+", ""), 10, -10))
    return F.when(value.rlike(BYTE_LIST_PATTERN), from_list).otherwise(from_digits).cast(LongType())


def _datetime_text(value: Column) -> Column:
    """A matched ``_DATETIME`` (without zone) rewritten as ``yyyy-MM-dd HH:mm:ss[.f]``, which Spark's cast reads
    with or without a zone appended (it refuses ``2021-06-25Z`` and ``2021-06-25 17:51Z``)."""
    pattern = _DATETIME
    hour_minute = F.regexp_extract(value, pattern, 2)
    seconds = F.regexp_extract(value, pattern, 3)
    return F.concat(
        F.regexp_extract(value, pattern, 1), F.lit(" "),
        F.when(hour_minute == "", F.lit("00:00")).otherwise(hour_minute),
        F.when(seconds == "", F.lit(":00")).otherwise(seconds),
        F.regexp_extract(value, pattern, 4),
    )


def date_from_text(text: Column) -> Column:
    """``yyyy-MM-dd`` -> date; null for an impossible date and for MySQL's zero date ``0000-00-00``.

    A datetime at exactly midnight is accepted too: GaussDB in Oracle compatibility mode stores ``date`` as
    ``timestamp(0)`` and writes ``2021-12-16 00:00:00``. A time other than midnight is quarantined, not dropped.
    """
    value = F.trim(text)
    return F.when(value.rlike(_FULL_DATE), value.cast(DateType())) \
        .when(is_zero_datetime(value), _null(DateType())) \
        .when(value.rlike(f"^{_DATE}{_MIDNIGHT}$"), value.substr(1, 10).cast(DateType())) \
        .otherwise(_null(DateType()))


def timestamp_ntz_from_text(text: Column) -> Column:
    """``yyyy-MM-dd[ HH:mm[:ss[.f]]]`` (space, ``T`` or ``:`` before the time) -> ``timestamp_ntz``.

    Null for MySQL's zero datetime ``0000-00-00 00:00:00`` and for a text with a zone (a zone-less column
    never has one; dropping it would shift the value). Digits beyond microseconds are truncated.
    """
    value = F.trim(text)
    return F.when(value.rlike(_FULL_DATETIME), value.cast(TimestampNTZType())) \
        .when(is_zero_datetime(value), _null(TimestampNTZType())) \
        .when(value.rlike(_DATETIME + "$"), _datetime_text(value).cast(TimestampNTZType())) \
        .otherwise(_null(TimestampNTZType()))


def epoch_seconds_to_timestamp(text: Column) -> Column:
    """Epoch seconds with an optional fraction (``1624614713.201``, DRS's MySQL ``TIMESTAMP``) -> timestamp.

    Read as a decimal, so milliseconds and microseconds stay exact (a double would turn ``.201`` into
    ``.200999``); digits beyond microseconds are floored.
    """
    seconds = F.trim(text).cast(DecimalType(30, 9))
    micros = F.floor(seconds * F.lit(1_000_000).cast(DecimalType(7, 0)))
    return F.timestamp_micros(micros.cast(LongType()))


_SOURCE_ZONE: ContextVar[str] = ContextVar("cdclake_source_zone", default="UTC")


@contextmanager
def source_time_zone(zone: str | None) -> Iterator[None]:
    """Within the block, timestamp texts without an offset (:func:`timestamp_from_text`) and CKafka's ``TIME`` are
    read in ``zone`` (None: UTC): the zone of the source server that wrote them as text."""
    token = _SOURCE_ZONE.set(check_time_zone(zone) if zone else "UTC")
    try:
        yield
    finally:
        _SOURCE_ZONE.reset(token)


def source_zone() -> str:
    """The zone :func:`source_time_zone` set (``UTC`` outside one)."""
    return _SOURCE_ZONE.get()


def in_source_zone(wall_clock: Column) -> Column:
    """A timestamp read as UTC wall-clock time -> the instant that wall-clock time is in the source's zone."""
    zone = _SOURCE_ZONE.get()
    return wall_clock if zone == "UTC" else F.to_utc_timestamp(wall_clock, zone)


def _zone_suffix() -> Column:
    zone = _SOURCE_ZONE.get()
    return F.lit("Z" if zone == "UTC" else f" {zone}")


def timestamp_from_text(text: Column) -> Column:
    """A timestamp with time zone -> ``timestamp`` (an instant).

    An explicit zone (``+08``, ``-05:30``, ``Z``, ``UTC``, ``Asia/Shanghai``, also after a space) is honoured;
    a text without one is in the source's zone (:func:`source_time_zone`, default UTC; never the Spark session's);
    a plain number is epoch seconds (:func:`epoch_seconds_to_timestamp`). Null for MySQL's zero datetime.
    """
    value = F.trim(text)
    zone = F.regexp_replace(value, _DATETIME, "")
    return F.when(value.rlike(_FULL_DATETIME), F.concat(value, _zone_suffix()).cast(TimestampType())) \
        .when(is_zero_datetime(value), _null(TimestampType())) \
        .when(value.rlike(_EPOCH_SECONDS), epoch_seconds_to_timestamp(value)) \
        .when(value.rlike(_DATETIME + "$"), F.concat(_datetime_text(value), _zone_suffix()).cast(TimestampType())) \
        .when(value.rlike(_DATETIME + _ZONE), F.concat(_datetime_text(value), zone).cast(TimestampType())) \
        .otherwise(_null(TimestampType()))


def _as_is(text: Column) -> Column:
    return text


_ENUM_INDEX_CODES = frozenset((-6, 5, 4, -5))
"""``sqlType`` codes (TINYINT, SMALLINT, INTEGER, BIGINT) with which canal marks an ``enum`` value sent as its
number: canal reads the binlog's 1-based member index and writes it as is (``"2"`` for ``'b'`` of
``enum('a','b','c')``)."""
_SET_BITS_CODES = frozenset((-7, -5))
"""``sqlType`` codes (BIT, BIGINT) with which canal marks a ``set`` value sent as its member bitmask (``"5"`` for
``'x,z'`` of ``set('x','y','z')``)."""
_LISTED = re.compile(r"\s*(enum|set)\s*\((.*)\)\s*$", re.IGNORECASE | re.DOTALL)


def _numbered_members(type_text: str | None, code: int | None) -> Mapped | None:
    """An ``enum``/``set`` column whose values arrive as numbers (canal: the ``sqlType`` says so) and whose type
    text lists its members: decoded back to the member labels MySQL stores. None otherwise (labels, or a bare
    ``enum`` as TiCDC writes it: the number cannot be mapped and stays as it is)."""
    match = _LISTED.match(str(type_text or ""))
    if match is None or code is None:
        return None
    members = tuple(m.replace("''", "'") for m in re.findall(r"'((?:[^']|'')*)'", match.group(2)))
    if not members:
        return None
    kind = match.group(1).lower()
    if kind == "enum" and code in _ENUM_INDEX_CODES:
        return StringType(), lambda c: enum_from_index(c, members)
    if kind == "set" and code in _SET_BITS_CODES and len(members) <= 64:
        return StringType(), lambda c: set_from_bits(c, members)
    return None


def enum_from_index(text: Column, members: tuple[str, ...]) -> Column:
    """An ``enum`` member's 1-based index -> its label; 0 is MySQL's error value, the empty string. A member's
    own label is kept (a label is never a number canal would send, unless the members themselves are numbers,
    and then canal's number is read as the index: alibaba/canal#5562). Null (quarantined) for another text."""
    value = F.trim(text)
    index = F.when(value.rlike(r"^\d{1,5}$"), value.cast(IntegerType()))
    labels = F.array(*[F.lit(m) for m in ("", *members)])
    return F.when(index.between(0, len(members)), F.element_at(labels, index + 1)) \
        .when(text.isin(*members), text) \
        .otherwise(_null(StringType()))


def set_from_bits(text: Column, members: tuple[str, ...]) -> Column:
    """A ``set`` value's bitmask (bit i for member i) -> its labels, comma-separated in member order, as MySQL
    prints them; a mask with bits beyond the members is null (quarantined). Labels (``x,z``) are kept as they
    are; any other text is null."""
    value = F.trim(text)
    mask = F.when(value.rlike(r"^\d{1,20}$"), value.cast(DecimalType(20, 0)))
    limit = F.lit(str(2 ** len(members) - 1)).cast(DecimalType(20, 0))
    bits = F.conv(value, 10, -10).cast(LongType())  # the same 64 bits (a 64th member's makes it negative)
    labels = F.array_join(F.array(*[F.when(bits.bitwiseAND(F.lit(1 << i if i < 63 else -(1 << 63))) != 0, F.lit(m))
                                    for i, m in enumerate(members)]), ",")
    named = (text == "") | F.forall(F.split(text, ","), lambda label: label.isin(*members))
    return F.when(mask.isNull(), F.when(named, text)) \
        .when(mask <= limit, labels) \
        .otherwise(_null(StringType()))


# --- type text ---------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ParsedType:
    """Type text taken apart: ``base`` words, first parenthesised ``args``, and the modifiers that matter."""

    base: str
    args: tuple[str, ...] = ()
    unsigned: bool = False
    array: bool = False
    zone: str | None = None
    """``"with"``, ``"local"`` (Oracle ``WITH LOCAL TIME ZONE``), ``"without"`` or None when not stated."""


_CLAUSES = re.compile(r"\b(?:character set|charset|collate)\s+\S+|\bidentity\b(?:\s*\([^)]*\))?")
_ZONE_PHRASE = re.compile(r"\b(with local time zone|with time zone|without time zone)\b")
_ARRAY_SUFFIX = re.compile(r"(?:\s*\[\s*\d*\s*\])+$|\s+array$")


def parse_type_text(type_text: str | None) -> ParsedType | None:
    """Take a source type text apart; None when it is missing or blank.

    ``"int(11) unsigned zerofill"`` -> base ``int``, args ``("11",)``, unsigned; ``"timestamp(6) with time zone"``
    -> base ``timestamp``, args ``("6",)``, zone ``with``; ``"enum('a','b')"`` -> base ``enum``;
    ``"integer[]"`` / ``"_int4"`` -> array.
    """
    if type_text is None:
        return None
    text = " ".join(str(type_text).strip().lower().split())
    if not text:
        return None
    for listed in ("enum", "set"):  # their value lists may hold any character, parentheses and commas included
        if re.match(rf"{listed}\s*\(", text):
            return ParsedType(listed)
    array = bool(_ARRAY_SUFFIX.search(text))
    text = _ARRAY_SUFFIX.sub("", text)
    if text.startswith("_") and len(text) > 1:  # PostgreSQL names the array of type t "_t" in pg_type
        array, text = True, text[1:]
    text = _CLAUSES.sub(" ", text)
    zone = None
    phrase = _ZONE_PHRASE.search(text)
    if phrase:
        zone = {"with local time zone": "local", "with time zone": "with", "without time zone": "without"}[
            phrase.group(1)]
        text = _ZONE_PHRASE.sub(" ", text)
    first = re.search(r"\(([^)]*)\)", text)
    args = tuple(a.strip() for a in first.group(1).split(",")) if first else ()
    text = re.sub(r"\([^)]*\)", " ", text)
    words = text.split()
    unsigned = "unsigned" in words
    words = [w for w in words if w not in ("unsigned", "signed", "zerofill")]
    return ParsedType(" ".join(words), args, unsigned, array, zone)


def _int_arg(args: tuple[str, ...], index: int) -> int | None:
    if len(args) > index and re.fullmatch(r"[+-]?\d+", args[index]):
        return int(args[index])
    return None


Mapped = tuple[DataType, Converter]


def _integer(data_type: DataType) -> Mapped:
    return data_type, lambda c: integer_from_text(c, data_type)


def _float(data_type: DataType) -> Mapped:
    return data_type, lambda c: float_from_text(c, data_type)


def _decimal(precision: int | None, scale: int | None) -> Mapped:
    """``decimal(precision, scale)`` for a declaration; bare -> :data:`BARE_DECIMAL`; precision > 38 -> text.

    Oracle allows a negative scale (``NUMBER(5,-2)``: integers rounded to hundreds, up to p - s digits) and a
    scale above the precision (``NUMBER(2,5)``: ``0.000nn``); both are widened to a type Spark accepts.
    """
    # A Debezium VariableScaleDecimal ({"scale": 2, "value": "BNI="}: an event without its schema, its Oracle NUMBER
    # or PostgreSQL numeric into a column that DDL declared) goes in by its digits.
    if precision is None:
        return BARE_DECIMAL, lambda c: F.when(is_variable_scale_decimal(c), variable_scale_decimal_as(
            c, BARE_DECIMAL)).otherwise(decimal_from_text(c, BARE_DECIMAL.precision, BARE_DECIMAL.scale))
    scale = scale or 0
    if scale < 0:
        precision, scale = precision - scale, 0
    precision = max(precision, scale, 1)
    if precision > MAX_PRECISION:
        return StringType(), lambda c: F.when(is_variable_scale_decimal(c), variable_scale_decimal(c)).otherwise(
            decimal_text(c))
    data_type = DecimalType(precision, scale)
    return data_type, lambda c: F.when(is_variable_scale_decimal(c), variable_scale_decimal_as(c, data_type)).otherwise(
        decimal_from_text(c, precision, scale))


def _declared_decimal(args: tuple[str, ...]) -> Mapped:
    """``(p)``, ``(p, s)``, Oracle's ``(*, s)`` (precision 38) or nothing."""
    if args and args[0] == "*":
        return _decimal(MAX_PRECISION, _int_arg(args, 1))
    return _decimal(_int_arg(args, 0), _int_arg(args, 1))


_STRING: Mapped = (StringType(), _as_is)
_BOOLEAN: Mapped = (BooleanType(), boolean_from_text)
_DATE_TYPE: Mapped = (DateType(), date_from_text)
_NTZ: Mapped = (TimestampNTZType(), timestamp_ntz_from_text)
_TZ: Mapped = (TimestampType(), timestamp_from_text)
_INT = _integer(IntegerType())
_LONG = _integer(LongType())
_FLOAT = _float(FloatType())
_DOUBLE = _float(DoubleType())
_MYSQL_BINARY: Mapped = (BinaryType(), mysql_bytes_from_text)
_HEX_BINARY: Mapped = (BinaryType(), bytes_from_hex)


def _float_by_precision(args: tuple[str, ...]) -> Mapped:
    """``float(p)``: single precision up to 24 binary digits, double above (MySQL, PostgreSQL, SQL Server)."""
    bits = _int_arg(args, 0)
    if len(args) == 1 and bits is not None and bits > 24:
        return _DOUBLE
    return _FLOAT


_MULTI_WORD = frozenset((
    "double precision", "national char", "national varchar", "national character", "national character varying",
    "character varying", "long varchar", "long varbinary", "long raw", "bit varying",
))


def _head(base: str) -> str:
    """The type name at the start of ``base``: a known multi-word name, else the first word. Words after it are
    attributes (MySQL's ``varchar binary``), a type's tail (``interval day to second``) or column constraints
    (``not null``) when the text comes from a DDL statement."""
    words = base.split()
    for n in (3, 2):
        if " ".join(words[:n]) in _MULTI_WORD:
            return " ".join(words[:n])
    return words[0] if words else ""


_MYSQL: dict[str, Mapped] = {
    **dict.fromkeys(("tinyint", "smallint", "mediumint", "middleint", "int1", "int2", "int3", "year",
                     "bool", "boolean"), _INT),  # BOOL is TINYINT(1) and may hold -128..127
    **dict.fromkeys(("int", "integer", "int4"), _INT),
    **dict.fromkeys(("bigint", "int8"), _LONG),
    **dict.fromkeys(("double", "double precision", "real", "float8"), _DOUBLE),
    "float4": _FLOAT,
    **dict.fromkeys(("char", "varchar", "nchar", "nvarchar", "national char", "national varchar", "character",
                     "character varying", "national character", "national character varying", "tinytext",
                     "text", "mediumtext", "longtext", "long", "long varchar", "enum", "set", "json", "time"),
                    _STRING),
    **dict.fromkeys(("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob", "long varbinary"),
                    _MYSQL_BINARY),
    # Spatial types: canal sends the bytes MySQL stores (Debezium a {wkb, srid} struct: connect.debezium_mysql_field)
    **dict.fromkeys(("geometry", "point", "linestring", "polygon", "multipoint", "multilinestring", "multipolygon",
                     "geometrycollection", "geomcollection"), _MYSQL_BINARY),
    "date": _DATE_TYPE,
    "datetime": _NTZ,
    "timestamp": _TZ,
}


def _mysql(parsed: ParsedType) -> Mapped | None:
    base, args = _head(parsed.base), parsed.args
    if base in ("int", "integer", "int4") and parsed.unsigned:
        return _LONG
    if base in ("bigint", "int8") and parsed.unsigned:
        return _decimal(20, 0)
    if base in ("decimal", "numeric", "dec", "fixed"):
        return _declared_decimal(args)
    if base == "float":
        return _float_by_precision(args)
    if base == "bit":
        # bit(1) is a flag; a bare `bit` is a long: TiCDC's canal-json drops the width of every bit(n) column.
        return _BOOLEAN if _int_arg(args, 0) == 1 else (LongType(), bits_from_text)
    return _MYSQL.get(base)


_POSTGRES: dict[str, Mapped] = {
    **dict.fromkeys(("smallint", "int2", "integer", "int", "int4", "serial", "serial2", "serial4", "smallserial",
                     "tinyint", "int1"), _INT),  # tinyint/int1: GaussDB
    **dict.fromkeys(("bigint", "int8", "bigserial", "serial8"), _LONG),
    **dict.fromkeys(("real", "float4"), _FLOAT),
    **dict.fromkeys(("double precision", "float8"), _DOUBLE),
    **dict.fromkeys(("boolean", "bool"), _BOOLEAN),
    "bytea": _HEX_BINARY,
    "date": _DATE_TYPE,
    "timestamptz": _TZ,
    "smalldatetime": _NTZ,  # GaussDB
}


def _postgres(parsed: ParsedType) -> Mapped:
    base, args = _head(parsed.base), parsed.args
    if base in ("numeric", "decimal", "number"):  # number: GaussDB's Oracle-compatible alias
        return _declared_decimal(args)
    if base == "money":
        return DecimalType(19, 2), lambda c: money_from_text(c, 19, 2)
    if base == "float":
        return _float_by_precision(args) if args else _DOUBLE
    if base == "timestamp":
        return _TZ if parsed.zone == "with" else _NTZ
    return _POSTGRES.get(base, _STRING)


_ORACLE: dict[str, Mapped] = {
    **dict.fromkeys(("integer", "int", "smallint"), _decimal(MAX_PRECISION, 0)),  # ANSI aliases of NUMBER(38)
    "binary_float": _FLOAT,
    **dict.fromkeys(("binary_double", "float", "double precision", "real"), _DOUBLE),
    "date": _NTZ,  # an Oracle DATE has a time of day
    **dict.fromkeys(("raw", "long raw", "blob"), _HEX_BINARY),
    **dict.fromkeys(("varchar2", "nvarchar2", "varchar", "char", "nchar", "clob", "nclob", "long", "rowid",
                     "urowid", "interval", "xmltype", "json"), _STRING),
}


def _oracle(parsed: ParsedType) -> Mapped | None:
    base = _head(parsed.base)
    if base in ("number", "numeric", "decimal", "dec"):
        return _declared_decimal(parsed.args)
    if base == "timestamp":
        return _TZ if parsed.zone in ("with", "local") else _NTZ
    return _ORACLE.get(base)


_TSQL: dict[str, Mapped] = {
    **dict.fromkeys(("tinyint", "smallint", "int"), _INT),
    "bigint": _LONG,
    "bit": _BOOLEAN,
    "money": _decimal(19, 4),
    "smallmoney": _decimal(10, 4),
    "real": _FLOAT,
    "date": _DATE_TYPE,
    **dict.fromkeys(("datetime", "datetime2", "smalldatetime"), _NTZ),
    "datetimeoffset": _TZ,
    **dict.fromkeys(("binary", "varbinary", "image", "timestamp", "rowversion"), _HEX_BINARY),
    **dict.fromkeys(("char", "varchar", "nchar", "nvarchar", "text", "ntext", "xml", "uniqueidentifier", "time",
                     "sysname", "sql_variant", "hierarchyid", "geometry", "geography"), _STRING),
}


def _tsql(parsed: ParsedType) -> Mapped | None:
    base = _head(parsed.base)
    if base in ("decimal", "numeric"):
        return _declared_decimal(parsed.args)
    if base == "float":  # float = float(53); float(1..24) is real
        return _float_by_precision(parsed.args) if parsed.args else _DOUBLE
    return _TSQL.get(base)


_BY_TEXT = {"mysql": _mysql, "postgres": _postgres, "oracle": _oracle, "tsql": _tsql}


# --- JDBC codes --------------------------------------------------------------------------------------------------

def _jdbc(code: int, dialect: str) -> Mapped | None:
    """``java.sql.Types`` code -> type, for a column without (known) type text.

    ``FLOAT`` (6) is double precision in JDBC (and holds a MySQL ``float`` value's text without loss; DRS sends
    6 for MySQL ``float``); ``REAL`` (7) is single precision. ``DATE`` (91) is a timestamp for Oracle, whose
    DATE has a time of day. Vendor codes: Oracle ``TIMESTAMPTZ`` (-101) / ``TIMESTAMPLTZ`` (-102), SQL Server
    ``DATETIMEOFFSET`` (-155).
    """
    binary = _MYSQL_BINARY if dialect == "mysql" else _HEX_BINARY
    if code == 91:
        return _NTZ if dialect == "oracle" else _DATE_TYPE
    if code in (-101, -102) and dialect == "oracle":
        return _TZ
    if code == -155 and dialect == "tsql":
        return _TZ
    table: dict[int, Mapped] = {
        -7: _BOOLEAN, 16: _BOOLEAN,
        -6: _INT, 5: _INT, 4: _INT,
        -5: _LONG,
        6: _DOUBLE, 7: _FLOAT, 8: _DOUBLE,
        2: _decimal(None, None), 3: _decimal(None, None),
        1: _STRING, 12: _STRING, -1: _STRING, -15: _STRING, -9: _STRING, -16: _STRING, 2005: _STRING,
        2011: _STRING, 92: _STRING, 2013: _STRING,
        93: _NTZ, 2014: _TZ,
        -2: binary, -3: binary, -4: binary, 2004: binary,
    }
    return table.get(code)


def _jdbc_code(jdbc_type: int | str | None) -> int | None:
    """JSON maps in the wild sometimes carry the code as a string (``"12"``)."""
    if isinstance(jdbc_type, bool):
        return None
    if isinstance(jdbc_type, int):
        return jdbc_type
    if isinstance(jdbc_type, str) and re.fullmatch(r"\s*-?\d+\s*", jdbc_type):
        return int(jdbc_type)
    return None


# --- public API --------------------------------------------------------------------------------------------------

def column_type(name: str, type_text: str | None, *, dialect: str = "mysql",
                jdbc_type: int | None = None) -> ColumnType:
    """Map one column of a canal-style message to a Spark type and the decoder of its text values.

    Args:
        name: Column name.
        type_text: The source SQL type (``mysqlType`` / ``columnType`` entry), any case, or None.
        dialect: ``mysql``, ``postgres`` (also GaussDB), ``oracle`` or ``tsql``.
        jdbc_type: The column's ``sqlType`` entry (``java.sql.Types``), used when ``type_text`` is missing or not
            a type this module knows (never for ``postgres`` with type text present; see the module docstring).

    Returns:
        The column's :class:`~cdclake.formats.connect.ColumnType`; ``StringType`` (the text as is) when neither
        the text nor the code says more.

    Raises:
        ConfigError: ``dialect`` is not one of :data:`DIALECTS`.
    """
    mapped = _map(type_text, dialect=dialect, jdbc_type=jdbc_type)
    # An enum's or set's number is read by its member list: messages of one batch written before and after an
    # ALTER of the list decode each by their own (cdclake.normalize._decoded_by_schema tells them by encoding).
    members = (type_text or "").strip()
    listed = dialect == "mysql" and members.lower().startswith(("enum(", "set(")) and members.endswith(")")
    return ColumnType(name, mapped[0], mapped[1], encoding=members if listed else "")


def spark_type(type_text: str | None, *, dialect: str = "mysql", jdbc_type: int | None = None) -> DataType:
    """The Spark type :func:`column_type` gives a column (same arguments, without the name)."""
    return _map(type_text, dialect=dialect, jdbc_type=jdbc_type)[0]


def _map(type_text: str | None, *, dialect: str, jdbc_type: int | str | None) -> Mapped:
    key = str(dialect).strip().lower()
    if key not in _BY_TEXT:
        raise ConfigError(f"unknown SQL dialect {dialect!r} for type {type_text!r}; expected one of "
                          f"{', '.join(DIALECTS)}")
    if key == "mysql":
        numbered = _numbered_members(type_text, _jdbc_code(jdbc_type))
        if numbered is not None:
            return numbered
    parsed = parse_type_text(type_text)
    if parsed is not None:
        if parsed.array:
            return _STRING
        mapped = _BY_TEXT[key](parsed)
        if mapped is not None:
            return mapped
    code = _jdbc_code(jdbc_type)
    if code is not None:
        mapped = _jdbc(code, key)
        if mapped is not None:
            return mapped
    return _STRING
