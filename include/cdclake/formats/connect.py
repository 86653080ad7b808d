"""Kafka Connect schemas -> Spark/Iceberg types, and the JVM expressions that decode Connect's JSON encoding.

Debezium's JSON converter writes every value in its Connect *physical* form: decimals as base64 two's-complement
bytes, dates as days since the epoch, timestamps as epoch millis/micros/nanos, bytes as base64. A row image is
parsed with every column as text (Spark keeps a JSON value's text for a string field), and each column is then
decoded by the expression for its Connect type, so no Python runs per row.

Spark has no TIME type: ``io.debezium.time.*Time`` columns become ``HH:mm:ss.SSSSSS`` strings.
Debezium timestamps without zone (``Timestamp``, ``MicroTimestamp``, ``NanoTimestamp``) become ``timestamp_ntz``
(Iceberg ``timestamp``); ``ZonedTimestamp`` becomes ``timestamp`` (Iceberg ``timestamptz``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import uuid
from dataclasses import dataclass
from typing import Any, Callable

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    TimestampNTZType,
    TimestampType,
)

from cdclake.exceptions import SchemaError

Converter = Callable[[Column], Column]

UNAVAILABLE_VALUE = "__debezium_unavailable_value"
"""Debezium's placeholder for a value it did not receive (PostgreSQL unchanged TOAST columns)."""


def _unavailable_texts(placeholder: bytes) -> tuple[str, ...]:
    """The JSON texts of Debezium's placeholder in each column shape (its PostgreSQL connector's
    ``UnchangedToastedPlaceholder``), as Spark's ``from_json`` reads a field into a string (compact JSON)."""
    text = placeholder.decode()
    as_base64 = base64.b64encode(placeholder).decode()
    digest = bytearray(hashlib.md5(placeholder).digest())  # java.util.UUID.nameUUIDFromBytes: MD5, version 3
    digest[6], digest[8] = (digest[6] & 0x0F) | 0x30, (digest[8] & 0x3F) | 0x80
    geometry = "{{\"wkb\":\"{}\",\"srid\":4326}}".format
    return (
        text,  # text, varchar, json, xml, ...
        as_base64,  # bytea
        json.dumps([text]),  # text[]
        json.dumps([as_base64]),  # bytea[]
        json.dumps(list(placeholder), separators=(",", ":")),  # int2/int4/int8/date arrays: the bytes as numbers
        json.dumps([str(uuid.UUID(bytes=bytes(digest)))]),  # uuid[]
        json.dumps({text: text}, separators=(",", ":")),  # hstore (as JSON text, or as a map)
        # PostGIS geometry 'SRID=4326;POINT(-99999999 -99999999)', geography 'SRID=4326;POINT(179.999999 89.999999)'
        geometry(base64.b64encode(bytes.fromhex("0101000020E6100000000000FC83D797C1000000FC83D797C1")).decode()),
        geometry(base64.b64encode(bytes.fromhex("0101000020E61000000C21E7FDFF7F66401842CEFBFF7F5640")).decode()),
    )


UNAVAILABLE_TEXTS = _unavailable_texts(UNAVAILABLE_VALUE.encode())
"""Every form of the unavailable-value placeholder: a column holding one of these was not sent."""


@dataclass(frozen=True)
class ColumnType:
    """One column: its Spark type and how to decode its JSON text into that type."""

    name: str
    data_type: DataType
    convert: Converter
    optional: bool = True
    encoding: str = ""
    """How the message writes a value, where its type alone does not say: a Connect logical type (with a
    Decimal's scale), base64 ``bytes``; empty for values that read as what they are (numbers, texts, JSON). A
    batch whose schemas write a column in two encodings decodes each message's value by its own schema."""


def _bool(value: Any, default: bool = True) -> bool:
    """Connect schemas in the wild carry ``"optional": "false"`` as a string."""
    if isinstance(value, str):
        return value.strip().lower() == "true"
    if value is None:
        return default
    return bool(value)


_HEX = "0123456789ABCDEF"


def _unscaled(hex_str: Column) -> Column:
    """Big-endian two's-complement hex (``F.hex`` output, up to 16 bytes) -> signed decimal(38,0).

    A negative value n is decoded as -(~n) - 1: its bitwise complement ~n (each hex digit d -> 15 - d) is
    non-negative, so every part is read unsigned and no intermediate is larger in magnitude than n. Up to 8
    bytes ``conv`` reads the value at once; beyond, it is the high bytes * 2^64 + the low 8 bytes. Null for
    more than 16 bytes or a value beyond 38 digits.
    """
    negative = F.substring(hex_str, 1, 1).isin(*_HEX[8:])
    magnitude = F.when(negative, F.translate(hex_str, _HEX, _HEX[::-1])).otherwise(hex_str)
    n = F.length(hex_str)
    low = F.conv(magnitude.substr(F.greatest(n - 15, F.lit(1)), F.lit(16)), 16, 10).cast(DecimalType(38, 0))
    high = F.conv(magnitude.substr(F.lit(1), n - 16), 16, 10).cast(DecimalType(38, 0))
    unsigned = F.when(n <= 16, low).when(n <= 32, high * F.lit(str(2**64)).cast(DecimalType(38, 0)) + low)
    return F.when(negative, -unsigned - 1).otherwise(unsigned)


def _unbase64(text: Column) -> Column:
    """Base64 text -> bytes; null for a text that is not base64 (a failed cast, quarantined with its column). Spark's
    ``unbase64`` throws on some such texts (``"1"``: "Last unit does not have enough valid bits"), which would stop
    the whole batch, and reads others (URL-safe ``-_``) by skipping characters."""
    return F.try_to_binary(text, F.lit("base64"))


def sent_as_number(text: Column) -> Column:
    """Whether a Connect ``Decimal``'s value was sent as a JSON number (the JSON converter's
    ``decimal.format=NUMERIC``: ``{"amount": 10.25}``) rather than as base64 bytes. Base64 has no ``.`` or ``-`` and
    Kafka's is padded to a multiple of 4 characters, so a number is told from base64 unless it is all digits and of
    such a length (``1234``): that text is read as base64, the converter's default."""
    from cdclake.formats.sqltypes import is_number  # it builds on this module

    return is_number(text) & (text.rlike(r"[.-]") | (F.length(F.trim(text)) % 4 != 0))


CONNECT_DECIMAL = "org.apache.kafka.connect.data.Decimal"

_NUMBER_MARK = "E0"
"""Appended to a Decimal's all-digit text that its message wrote as a JSON number (:func:`mark_json_number`)."""


def mark_json_number(text: Column, is_number_token: Column) -> Column:
    """A Decimal's text as the decoders should read it, given whether its message wrote it as a JSON number.

    Spark's JSON reader gives a field's text without its quotes, so a Decimal ``1234`` written as a number
    (``decimal.format=NUMERIC``; scale 0 has no point) reads exactly like the base64 ``"1234"``. Where the message
    says it was a number, such a text gets an exponent (``1234E0``: a number to :func:`sent_as_number`, the same
    value). ``is_number_token`` is evaluated only for the ambiguous texts (all digits, a multiple of 4 long)."""
    ambiguous = text.rlike(r"^[0-9]+$") & (F.length(text) % 4 == 0)
    return F.when(ambiguous & is_number_token, F.concat(text, F.lit(_NUMBER_MARK))).otherwise(text)


def unmark_json_number(text: Column) -> Column:
    """A text as the message wrote it, without :func:`mark_json_number`'s mark (for reasons and other decoders)."""
    return F.regexp_replace(text, rf"^((?:[0-9]{{4}})+){_NUMBER_MARK}$", "$1")


_DOUBLE_DIGITS = 15
"""Significant digits a decimal number keeps through a double."""

_ROUNDED_NUMBER = rf"[1-9](?:\.?[0-9]){{{_DOUBLE_DIGITS - 1}}}[0-9.]*[1-9]"
"""A mantissa with more than :data:`_DOUBLE_DIGITS` significant digits (first to last non-zero digit)."""


def _may_be_rounded(text: Column) -> Column:
    """Whether a Decimal's number text (:func:`sent_as_number`) may have been rounded on its way to us.

    Spark's JSON reader gives a fractional JSON number's text through a double (``86199804577757.01`` ->
    ``8.619980457775702E13``, always with a point): with more than :data:`_DOUBLE_DIGITS` significant digits it may
    differ from what was sent. Java 17's ``Double.toString`` may also print a shorter value with more digits
    (``2.82879384806159008E17``): such a value is refused too, never stored changed. A whole number is kept
    exactly. A number beyond a double arrives as ``"Infinity"``, quotes included, which is not base64 either: a
    failed cast. This sits beside the decoders, never inside them: they reference their input many times, and
    nesting multiplies the expression.
    """
    return text.contains(".") & text.rlike(_ROUNDED_NUMBER)


def decimal_from_base64(text: Column, *, scale: int, precision: int = 38) -> Column:
    """Decode Connect's ``Decimal``: base64 of the big-endian two's-complement unscaled value, then the scale.

    Up to 16 bytes (see :func:`_unscaled`). The value is rebuilt as ``<unscaled>E-<scale>`` text and cast, so no
    precision is lost to floating point. A negative scale (Oracle ``NUMBER(P,S<0)``) gives a whole number. A value
    sent as a number (:func:`sent_as_number`) is converted exactly or not at all.
    """
    from cdclake.formats.sqltypes import decimal_from_text  # it builds on this module

    data_type = DecimalType(min(max(precision, scale, 1), 38), max(scale, 0))
    unscaled = _unscaled(F.hex(_unbase64(text)))
    as_text = F.concat(unscaled.cast("string"), F.lit(f"E{-scale}"))
    return (F.when(text.isNull() | (text == "") | _may_be_rounded(text), F.lit(None).cast(data_type))
            .when(sent_as_number(text), decimal_from_text(text, data_type.precision, data_type.scale))
            .otherwise(as_text.cast(data_type)))


def variable_scale_decimal(text: Column) -> Column:
    """``io.debezium.data.VariableScaleDecimal`` ({scale, value}) -> exact decimal text (the scale varies per row).

    The decimal point is placed by string operations on the unscaled digits: any fixed Spark decimal type would
    null out values with more integer digits than it holds, or round away digits beyond its scale (PostgreSQL
    ``NUMERIC`` without a declared precision can have either), at any number of digits.
    """
    parsed = F.from_json(text, "scale INT, value STRING")
    return _decimal_text(parsed["value"], F.coalesce(parsed["scale"], F.lit(0)))


def variable_scale_decimal_as(text: Column, data_type: DecimalType) -> Column:
    """``io.debezium.data.VariableScaleDecimal`` ({scale, value}) -> ``data_type``, exactly: null (a failed cast)
    for a non-zero digit beyond the type's scale (``2.3000`` goes into ``decimal(9,2)``, ``2.3001`` does not) or
    more digits than it holds."""
    parsed = F.from_json(text, "scale INT, value STRING")
    scale = F.coalesce(parsed["scale"], F.lit(0))
    unscaled = _unscaled(F.hex(_unbase64(parsed["value"]))).cast("string")
    as_text = F.concat(unscaled, F.lit("E"), (-scale).cast("string"))
    # Zeros beyond the type's scale are dropped by the cast; "0" has no digits beyond any scale.
    trailing_zeros = F.when(unscaled == "0", scale).otherwise(F.length(F.regexp_extract(unscaled, "0*$", 0)))
    return F.when(scale - trailing_zeros <= data_type.scale, as_text.cast(data_type))


def is_variable_scale_decimal(text: Column) -> Column:
    """Whether a value is a ``VariableScaleDecimal``'s object (an event without its schema), not a number."""
    return F.ltrim(text).startswith("{")


_LIMB = 1_000_000_000


def _carry(limbs: Column, times: int, carry: Column) -> Column:
    """``limbs * times + carry`` over little-endian base-10**9 limbs (longs), carrying into a new top limb."""
    start = F.struct(F.array().cast("array<bigint>").alias("o"), carry.cast("long").alias("c"))
    step = lambda s, limb: F.struct(  # noqa: E731
        F.concat(s["o"], F.array((limb * times + s["c"]) % _LIMB)).alias("o"),
        F.floor((limb * times + s["c"]) / _LIMB).cast("long").alias("c"))
    return F.aggregate(limbs, start, step, lambda s: F.when(s["c"] > 0, F.concat(s["o"], F.array(s["c"])))
                       .otherwise(s["o"]))


def _wide_unscaled_text(hex_str: Column) -> Column:
    """Big-endian two's-complement hex of any length -> the signed integer's decimal text.

    For values :func:`_unscaled` cannot hold (more than 38 digits: MySQL's ``DECIMAL(65,30)``, PostgreSQL's
    unconstrained ``numeric``): base 16 -> base 10**9 limbs digit by digit, in Spark SQL's ``aggregate`` (no
    Python UDF); a negative value is -(~n + 1)."""
    negative = F.substring(hex_str, 1, 1).isin(*_HEX[8:])
    magnitude = F.when(negative, F.translate(hex_str, _HEX, _HEX[::-1])).otherwise(hex_str)
    digits = F.transform(F.regexp_extract_all(magnitude, F.lit("(.)"), 1), lambda d: F.conv(d, 16, 10).cast("long"))
    limbs = F.aggregate(digits, F.array(F.lit(0).cast("long")), lambda acc, d: _carry(acc, 16, d))
    limbs = F.when(negative, _carry(limbs, 1, F.lit(1))).otherwise(limbs)
    text = F.array_join(F.transform(F.reverse(limbs), lambda x, i: F.when(i == 0, x.cast("string")).otherwise(
        F.lpad(x.cast("string"), 9, "0"))), "")
    return F.when(hex_str.isNull(), F.lit(None).cast(StringType())).otherwise(
        F.concat(F.when(negative, F.lit("-")).otherwise(F.lit("")), text))


def _decimal_text(base64_unscaled: Column, scale: Column) -> Column:
    """Base64 unscaled value and its scale -> the exact decimal text (any scale, also negative or above 38, and
    any number of digits). A positive scale keeps all its digits, as the source shows the value (``1235.00``)."""
    hex_str = F.hex(_unbase64(base64_unscaled))
    unscaled_text = F.when(F.length(hex_str) <= 30, _unscaled(hex_str).cast("string")).otherwise(
        _wide_unscaled_text(hex_str))
    sign = F.when(unscaled_text.startswith("-"), F.lit("-")).otherwise(F.lit(""))
    digits = F.regexp_replace(unscaled_text, "^-", "")
    # At least one digit before the point: 5 with scale 3 -> "0005" -> "0" + "." + "005".
    padded = F.call_function("lpad", digits, F.greatest(F.length(digits), scale + 1), F.lit("0"))
    int_digits = F.length(padded) - scale
    positive_scale = F.concat(sign, padded.substr(F.lit(1), int_digits), F.lit("."),
                              padded.substr(int_digits + 1, scale))
    negative_scale = F.concat(sign, digits, F.call_function("repeat", F.lit("0"), -scale))
    return F.when(unscaled_text.isNull(), F.lit(None).cast(StringType())) \
        .when(scale > 0, positive_scale) \
        .when(digits == "0", F.lit("0")) \
        .otherwise(negative_scale)


def _wide_decimal(text: Column, scale: int) -> Column:
    """A Connect ``Decimal`` no Spark decimal holds -> its exact text: base64 decoded, a number (as
    :func:`sent_as_number`) kept as sent."""
    from cdclake.formats.sqltypes import decimal_text  # it builds on this module

    return (F.when(_may_be_rounded(text), F.lit(None).cast(StringType()))
            .when(sent_as_number(text), decimal_text(unmark_json_number(text)))
            .otherwise(_decimal_text(text, F.lit(scale))))


def _bits_value(base64_text: Column) -> Column:
    """``io.debezium.data.Bits`` of at most 64 bits (MySQL ``bit(n)``, PostgreSQL ``bit(n)``) -> the bits' value as
    a ``long``, as canal and DRS give it: Debezium sends the bytes little-endian. ``bit(64)`` values with the top
    bit set are negative (the long keeps the same 64 bits); no bytes, or more than 8, is not such a value (null)."""
    pairs = F.regexp_extract_all(F.hex(_unbase64(base64_text)), F.lit("(..)"), 1)
    big_endian = F.concat_ws("", F.reverse(pairs))
    return F.when(F.length(big_endian).between(2, 16), F.conv(big_endian, 16, -10)).cast(LongType())


def _days_since_epoch(days: Column) -> Column:
    """Days since 1970-01-01 -> date. A function, not a module-level Column: building a Column needs an active
    SparkContext, and this module is imported before any session exists."""
    return F.date_add(F.lit("1970-01-01").cast(DateType()), days.cast("int"))


def _time_of_day(micros: Column) -> Column:
    """Microseconds -> ``[-]HH:MM:SS.ffffff``. Hours are not wrapped: MySQL's TIME spans -838:59:59 to 838:59:59
    and Debezium sends such values as they are; PostgreSQL's time allows 24:00:00."""
    magnitude = F.abs(micros)
    return F.when(micros.isNotNull(), F.format_string(
        "%s%02d:%02d:%02d.%06d", F.when(micros < 0, F.lit("-")).otherwise(F.lit("")),
        F.floor(magnitude / 3_600_000_000), F.floor(magnitude / 60_000_000) % 60,
        F.floor(magnitude / 1_000_000) % 60, magnitude % 1_000_000))


def _iso_time(text: Column) -> Column:
    """``io.debezium.time.IsoTime`` (``HH:MM[:SS[.f…]]Z``) -> ``HH:MM:SS.ffffff``, as the other time types give
    it; another text is kept as it is."""
    parts = r"^(\d{2}):(\d{2})(?::(\d{2}))?(?:\.(\d+))?Z?$"
    part = lambda n: F.regexp_extract(text, parts, n)  # noqa: E731
    return F.when(text.rlike(parts), F.format_string(
        "%s:%s:%s.%s", part(1), part(2), F.when(part(3) != "", part(3)).otherwise(F.lit("00")),
        F.rpad(F.substring(part(4), 1, 6), 6, "0"))).otherwise(text)


def _zoned_time(text: Column) -> Column:
    """``io.debezium.time.ZonedTime`` (``HH:MM[:SS[.f…]]`` and ``Z`` or an offset) -> ``HH:MM:SS.ffffff`` and the
    zone as sent (``10:30:45.000000Z``, ``10:30:45.123456+02:00``), so that a column's values have one form; another
    text is kept as it is."""
    parts = r"^(\d{2}):(\d{2})(?::(\d{2}))?(?:\.(\d+))?(Z|[+-]\d{2}(?::?\d{2}(?::?\d{2})?)?)$"
    part = lambda n: F.regexp_extract(text, parts, n)  # noqa: E731
    return F.when(text.rlike(parts), F.format_string(
        "%s:%s:%s.%s%s", part(1), part(2), F.when(part(3) != "", part(3)).otherwise(F.lit("00")),
        F.rpad(F.substring(part(4), 1, 6), 6, "0"), part(5))).otherwise(text)


POSITIVE_INFINITY_MICROS = 9223372036825200000
NEGATIVE_INFINITY_MICROS = -9223372036832400000
"""How Debezium's PostgreSQL connector sends ``infinity``/``-infinity`` of a ``timestamp`` as a ``MicroTimestamp``
(PGStatement's DATE_POSITIVE/NEGATIVE_INFINITY milliseconds, passed on as microseconds): the instants a
``timestamptz`` infinity becomes too, so both columns hold the same stand-in."""


def _with_seconds(text: Column) -> Column:
    """An ISO date-time text whose time has no seconds (``2019-05-28T08:58Z``, as Java's ``OffsetDateTime.toString()``
    writes a whole minute), with ``:00`` added, which Spark's cast needs; another text is returned as it is."""
    return F.regexp_replace(text, r"^(\s*[+-]?\d{4,}-\d{2}-\d{2}[T ]\d{2}:\d{2})(?![:\d])", "$1:00")


def _zoned_timestamp(text: Column) -> Column:
    """``io.debezium.time.ZonedTimestamp`` ISO text -> ``timestamp``. PostgreSQL's ``infinity``/``-infinity`` of a
    ``timestamptz`` arrive as those words (newer connectors) or as years 292278994 / -292275055 (older ones), which
    no timestamp type holds: they become the ``MicroTimestamp`` stand-ins (:data:`POSITIVE_INFINITY_MICROS`)."""
    value = F.lower(F.trim(text))
    return (F.when(value.isin("infinity", "+infinity") | value.startswith("+292278994-"),
                   F.timestamp_micros(F.lit(POSITIVE_INFINITY_MICROS)))
            .when((value == "-infinity") | value.startswith("-292275055-"),
                  F.timestamp_micros(F.lit(NEGATIVE_INFINITY_MICROS)))
            .otherwise(F.coalesce(text.cast("timestamp"), _with_seconds(text).cast("timestamp"))))


_PRIMITIVES: dict[str, tuple[DataType, Converter]] = {
    "int8": (IntegerType(), lambda c: c.cast("int")),
    "int16": (IntegerType(), lambda c: c.cast("int")),
    "int32": (IntegerType(), lambda c: c.cast("int")),
    "int64": (LongType(), lambda c: c.cast("long")),
    "float32": (FloatType(), lambda c: c.cast("float")),
    "float": (FloatType(), lambda c: c.cast("float")),
    "float64": (DoubleType(), lambda c: c.cast("double")),
    "double": (DoubleType(), lambda c: c.cast("double")),
    "boolean": (BooleanType(), lambda c: c.cast("boolean")),
    "string": (StringType(), lambda c: c),
    "bytes": (BinaryType(), _unbase64),
}

_LOGICAL: dict[str, tuple[DataType, Converter]] = {
    "io.debezium.time.Date": (DateType(), _days_since_epoch),
    "org.apache.kafka.connect.data.Date": (DateType(), _days_since_epoch),
    "io.debezium.time.Timestamp": (TimestampNTZType(), lambda c: F.timestamp_millis(c.cast("long")).cast("timestamp_ntz")),
    "org.apache.kafka.connect.data.Timestamp": (
        TimestampNTZType(), lambda c: F.timestamp_millis(c.cast("long")).cast("timestamp_ntz")),
    "io.debezium.time.MicroTimestamp": (
        TimestampNTZType(), lambda c: F.timestamp_micros(c.cast("long")).cast("timestamp_ntz")),
    "io.debezium.time.NanoTimestamp": (
        TimestampNTZType(), lambda c: F.timestamp_micros(F.floor(c.cast("decimal(38,0)") / 1000).cast("long"))
        .cast("timestamp_ntz")),
    "io.debezium.time.ZonedTimestamp": (TimestampType(), _zoned_timestamp),
    "io.debezium.time.Time": (StringType(), lambda c: _time_of_day(c.cast("long") * 1000)),
    "org.apache.kafka.connect.data.Time": (StringType(), lambda c: _time_of_day(c.cast("long") * 1000)),
    "io.debezium.time.MicroTime": (StringType(), lambda c: _time_of_day(c.cast("long"))),
    "io.debezium.time.NanoTime": (StringType(), lambda c: _time_of_day(F.floor(c.cast("long") / 1000))),
    "io.debezium.time.ZonedTime": (StringType(), _zoned_time),
    # time.precision.mode=isostring: the same values as ISO texts in UTC (`2005-05-12Z`, `10:30:45.123456789Z`).
    "io.debezium.time.IsoDate": (DateType(), lambda c: F.regexp_replace(c, "Z$", "").cast("date")),
    "io.debezium.time.IsoTime": (StringType(), _iso_time),
    "io.debezium.time.IsoTimestamp": (
        TimestampNTZType(), lambda c: F.regexp_replace(c, "Z$", "").cast("timestamp_ntz")),
    "io.debezium.time.Year": (IntegerType(), lambda c: c.cast("int")),
    "io.debezium.data.Json": (StringType(), lambda c: c),
    "io.debezium.data.Uuid": (StringType(), lambda c: c),
    "io.debezium.data.Xml": (StringType(), lambda c: c),
    "io.debezium.data.Enum": (StringType(), lambda c: c),
    "io.debezium.data.EnumSet": (StringType(), lambda c: c),
    "io.debezium.data.Bits": (BinaryType(), _unbase64),  # more than 64 bits (PostgreSQL); else see _bits_value
    "io.debezium.data.VariableScaleDecimal": (StringType(), variable_scale_decimal),
}


def field_name(spec: dict[str, Any]) -> str:
    """A Connect field's name: ``field`` in Debezium's JSON schemas, ``name`` in the key-schema variant."""
    name = spec.get("field") if "field" in spec else spec.get("name")
    if not isinstance(name, str) or not name:
        raise SchemaError(f"Kafka Connect field without a name: {spec}")
    return name


def column_type(spec: dict[str, Any]) -> ColumnType:
    """Map one Connect field to a Spark type and decoder.

    Accepts both Debezium's flat field form (``{"field", "type", "optional", "name", "parameters"}``) and the
    nested form seen in key schemas (``{"name", "index", "schema": {"type", "optional"}}``), with types in any case.

    Raises:
        SchemaError: A type that is neither a known Connect primitive nor a known logical type.
    """
    name = field_name(spec)
    if "field" in spec:
        inner, logical = spec, spec.get("name")
    elif isinstance(spec.get("schema"), dict):
        inner = spec["schema"]
        logical = inner.get("name")
    else:
        inner, logical = spec, None  # here "name" is the column's name
    ctype = str(inner.get("type", "")).lower()
    optional = _bool(inner.get("optional"), default=True)
    params = inner.get("parameters") or {}
    logical = unshaded(logical)
    if logical == CONNECT_DECIMAL:
        scale = int(params.get("scale", 0))
        declared = params.get("connect.decimal.precision")
        precision = int(declared) if declared is not None else 38
        encoding = f"{logical}({scale})"
        if scale < 0 and precision - scale <= 38:  # Oracle NUMBER(P,S<0): whole numbers, unscaled * 10^-S
            return ColumnType(name, DecimalType(max(precision - scale, 1), 0),
                              lambda c, s=scale, p=precision - scale: decimal_from_base64(c, scale=s, precision=p),
                              optional, encoding)
        # Without a declared precision (Connect's own Decimal has only the scale), decimal(38, scale) while that
        # leaves 20 integer digits, so every integer fits; past that, the exact text.
        if not 0 <= scale <= 38 or precision > 38 or (declared is None and scale > 18):
            # No Spark decimal holds these values exactly: Oracle allows scales -84..127, MySQL precisions to 65.
            return ColumnType(name, StringType(), lambda c, s=scale: _wide_decimal(c, s), optional, encoding)
        precision = min(max(precision, scale, 1), 38)
        return ColumnType(name, DecimalType(precision, scale),
                          lambda c, s=scale, p=precision: decimal_from_base64(c, scale=s, precision=p), optional,
                          encoding)
    if logical == "io.debezium.data.Bits" and int(params.get("length", 65)) <= 64:
        return ColumnType(name, LongType(), _bits_value, optional, f"{logical}(long)")
    if isinstance(logical, str) and logical in _LOGICAL:
        data_type, convert = _LOGICAL[logical]
        return ColumnType(name, data_type, convert, optional, logical)
    if ctype in _PRIMITIVES:
        data_type, convert = _PRIMITIVES[ctype]
        return ColumnType(name, data_type, convert, optional, "bytes" if ctype == "bytes" else "")
    decoded = _decoded_items(inner["items"]) if ctype == "array" and isinstance(inner.get("items"), dict) else None
    if decoded is not None:
        return ColumnType(name, StringType(), decoded, optional, "array")
    if ctype in ("struct", "array", "map"):
        # Nested values are kept as their JSON text.
        return ColumnType(name, StringType(), lambda c: c, optional)
    raise SchemaError(f"column {name!r}: unsupported Kafka Connect type {inner.get('type')!r}"
                      + (f" ({logical})" if logical else ""))


_CONNECT_NAMESPACES = ("org.apache.kafka.connect.data.", "io.debezium.")


def unshaded(logical: Any) -> Any:
    """A Connect logical type's name without a relocation prefix: Flink CDC shades Kafka Connect into its own
    package (``com.ververica.cdc.connectors.shaded.org.apache.kafka.connect.data.Decimal``, in 3.x
    ``org.apache.flink.cdc.connectors.shaded.``), and its events carry the shaded names."""
    if not isinstance(logical, str):
        return logical
    for namespace in _CONNECT_NAMESPACES:
        at = logical.find("." + namespace)
        if at >= 0:
            return logical[at + 1:]
    return logical


_JSON_TIME_OPTIONS = {"timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX",
                      "timestampNTZFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSS"}
"""Timestamps written into JSON text to the microsecond (Spark's default stops at the millisecond)."""


def _decoded_items(items: dict[str, Any]) -> Converter | None:
    """For an array of a logical type (PostgreSQL ``numeric[]``, ``date[]``, ``timestamp[]``): its JSON text with
    each element decoded (``[123.45, -0.01]``, ``["2025-01-30"]``), else None (the array's text is kept as sent).
    A plain ``numeric[]``'s elements are ``VariableScaleDecimal`` objects; they become numbers too."""
    logical = unshaded(items.get("name"))
    variable_scale = logical == "io.debezium.data.VariableScaleDecimal"
    if logical is None or (str(items.get("type", "")).lower() in ("struct", "array", "map") and not variable_scale):
        return None
    element = column_type({**items, "field": "element"})
    if element.encoding in ("", "bytes"):
        return None

    def convert(text: Column, decode: Converter = element.convert) -> Column:
        sent = F.from_json(text, ArrayType(StringType()))  # an object element is read as its JSON text
        # (One parameter: transform passes the index too to a function that takes more.)
        decoded = F.transform(sent, lambda e: decode(e))
        # An element that does not decode makes the whole value a failed cast (quarantined), not a null inside it.
        whole = F.size(F.filter(sent, lambda e: e.isNotNull())) == F.size(F.filter(decoded, lambda e: e.isNotNull()))
        if variable_scale:  # exact decimal texts, written as JSON numbers
            numbers = F.concat(F.lit("["), F.array_join(decoded, ",", "null"), F.lit("]"))
            return F.when(whole, numbers)
        return F.when(whole, F.to_json(decoded, _JSON_TIME_OPTIONS))

    return convert


def encoded_fields(row_schema: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Column -> Connect field schema (``type``, ``name``, ``parameters``, ``items``), for the fields of a Connect
    struct schema whose values are written encoded (a logical type, base64 bytes): what payload-only messages of
    the table are read by, where only the Spark type would be known (:func:`cast_converter`)."""
    found: dict[str, dict[str, Any]] = {}
    for spec in row_schema.get("fields") or []:
        try:
            if isinstance(spec, dict) and "field" in spec and column_type(spec).encoding:
                found[field_name(spec)] = {k: spec[k] for k in ("type", "name", "parameters", "items") if k in spec}
        except (SchemaError, TypeError, ValueError, AttributeError, KeyError):
            continue  # a field the messages' own typing reports
    return found


_MYSQL_BINARY = frozenset(("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"))
_MYSQL_SPATIAL = frozenset(("geometry", "point", "linestring", "polygon", "multipoint", "multilinestring",
                            "multipolygon", "geometrycollection", "geomcollection"))


def debezium_mysql_field(type_text: str) -> dict[str, Any] | None:
    """The Connect field schema Debezium's MySQL connector writes a column of this MySQL type with, in its default
    modes (``time.precision.mode=adaptive_time_microseconds``, ``decimal.handling.mode=precise``,
    ``binary.handling.mode=bytes``), for the types whose values it encodes; None for the others."""
    match = re.match(r"^\s*(\w+)\s*(?:\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\))?", type_text.lower())
    if not match:
        return None
    base, first, second = match.group(1), match.group(2), match.group(3)
    if base == "date":
        return {"type": "int32", "name": "io.debezium.time.Date"}
    if base == "datetime":
        return {"type": "int64",
                "name": "io.debezium.time.Timestamp" if int(first or 0) <= 3 else "io.debezium.time.MicroTimestamp"}
    if base == "time":
        return {"type": "int64", "name": "io.debezium.time.MicroTime"}
    if base == "timestamp":
        return {"type": "string", "name": "io.debezium.time.ZonedTimestamp"}
    if base in ("decimal", "numeric", "dec", "fixed"):
        return {"type": "bytes", "name": CONNECT_DECIMAL,
                "parameters": {"scale": second or "0", "connect.decimal.precision": first or "10"}}
    if base == "bit" and int(first or 1) > 1:
        return {"type": "bytes", "name": "io.debezium.data.Bits", "parameters": {"length": first}}
    if base in _MYSQL_BINARY:
        return {"type": "bytes"}
    if base in _MYSQL_SPATIAL:  # {wkb, srid} (a point also {x, y}), kept as its JSON text
        return {"type": "struct", "name": "io.debezium.data.geometry.Point" if base == "point"
                else "io.debezium.data.geometry.Geometry"}
    return None


def struct_columns(schema: dict[str, Any]) -> list[ColumnType]:
    """Columns of a Connect struct schema, in order."""
    return [column_type(f) for f in schema.get("fields") or []]


def envelope_row_schema(value_schema: dict[str, Any]) -> dict[str, Any] | None:
    """The row struct (``after``, else ``before``) of a Debezium envelope schema, or None."""
    fields = {f.get("field"): f for f in value_schema.get("fields") or [] if isinstance(f, dict)}
    for side in ("after", "before"):
        spec = fields.get(side)
        if isinstance(spec, dict) and spec.get("fields"):
            return spec
    return None


def cast_converter(data_type: DataType) -> Converter:
    """Decoder for a column known only by its Spark type (payload-only events into an existing table).

    Integers and decimals convert exactly or not at all (null: a failed cast); other numbers and ISO strings are
    cast; numeric dates are days since the epoch and numeric timestamps micros since the epoch (Debezium's
    defaults); decimals are number text or Connect's base64 with the column's scale.
    """
    if isinstance(data_type, DateType):
        return lambda c: F.when(c.rlike(r"^-?\d+$"), _days_since_epoch(c)).otherwise(c.cast("date"))
    if isinstance(data_type, (TimestampType, TimestampNTZType)):
        target = "timestamp_ntz" if isinstance(data_type, TimestampNTZType) else "timestamp"
        return lambda c: F.when(c.rlike(r"^-?\d+$"), F.timestamp_micros(c.cast("long")).cast(target)) \
            .otherwise(c.cast(target))
    # Spark's cast would truncate "5.17" into a long column and round it into decimal(10,1); the text decoders
    # refuse both (null: the row is quarantined as a failed cast, never stored changed).
    from cdclake.formats.sqltypes import decimal_from_text, integer_from_text, is_number  # they build on this module

    if isinstance(data_type, DecimalType):
        # A VariableScaleDecimal ({"scale": 2, "value": "BNI="}: Oracle NUMBER, PostgreSQL numeric) by its digits.
        return lambda c, t=data_type: F.when(is_variable_scale_decimal(c), variable_scale_decimal_as(c, t)).when(
            is_number(c), decimal_from_text(c, t.precision, t.scale)).otherwise(
            decimal_from_base64(c, scale=t.scale, precision=t.precision))
    if isinstance(data_type, (ByteType, ShortType, IntegerType, LongType)):
        return lambda c, t=data_type: integer_from_text(c, t)
    if isinstance(data_type, BinaryType):
        return _unbase64
    return lambda c, t=data_type: c.cast(t)
