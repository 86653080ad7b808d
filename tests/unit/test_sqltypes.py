"""cdclake.formats.sqltypes with real Spark: source SQL type text -> Spark types, and text values -> typed values.

Oracles are computed here in Python from the literal inputs, never by the code under test: ``Decimal(text)`` for
decimals (exact), ``datetime`` arithmetic for timestamps (instants are compared as epoch microseconds, so the
Python process's local zone plays no part), ``bytes(b & 255 for b in items)`` for Java byte lists,
``bytes.fromhex`` for hex and ``str.encode("latin-1")`` for canal's ISO-8859-1 text. The DRS samples of seed
document 003 are decoded with the message's own ``mysqlType``/``columnType`` and ``sqlType`` maps and compared
with values read off the document.

Each dialect's converter cases run as one DataFrame: every row (one case's input) goes through the converter of
every type text in the table, and one ``collect`` returns them all.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from decimal import Decimal
from typing import Any

import pytest
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

from cdclake.exceptions import ConfigError
from cdclake.formats.sqltypes import BARE_DECIMAL, BYTE_LIST_PATTERN, column_type, parse_type_text, spark_type
from tests.support.seeds import SEEDS

EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
UTC = dt.timezone.utc


def tz(hours: float) -> dt.timezone:
    return dt.timezone(dt.timedelta(hours=hours))


def micros(moment: dt.datetime) -> int:
    """Epoch microseconds of an aware datetime, by integer arithmetic."""
    delta = moment - EPOCH_UTC
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def java_bytes(items: list[int]) -> bytes:
    """What ``Arrays.toString(byte[])`` printed: signed bytes back to unsigned."""
    return bytes(b & 255 for b in items)


INT, LONG, FLOAT, DOUBLE = IntegerType(), LongType(), FloatType(), DoubleType()
STRING, BINARY, BOOLEAN, DATE = StringType(), BinaryType(), BooleanType(), DateType()
NTZ, TS = TimestampNTZType(), TimestampType()


# --- type text -> Spark type -------------------------------------------------------------------------------------

TYPE_CASES: list[tuple[str, str | None, int | str | None, DataType]] = [
    # mysql (canal mysqlType carries lengths and attributes; DRS strips them)
    ("mysql", "tinyint(1)", None, INT),
    ("mysql", "TINYINT(3) UNSIGNED", None, INT),
    ("mysql", "smallint(6)", None, INT),
    ("mysql", "mediumint(8) unsigned", None, INT),
    ("mysql", "int(11)", None, INT),
    ("mysql", "INTEGER", None, INT),
    ("mysql", "int(10) unsigned zerofill", None, LONG),
    ("mysql", "year(4)", None, INT),
    ("mysql", "bigint(20)", None, LONG),
    ("mysql", "bigint(20) unsigned", None, DecimalType(20, 0)),
    ("mysql", "float", None, FLOAT),
    ("mysql", "float(7,4)", None, FLOAT),
    ("mysql", "float(30)", None, DOUBLE),
    ("mysql", "double", None, DOUBLE),
    ("mysql", "double precision", None, DOUBLE),
    ("mysql", "real", None, DOUBLE),
    ("mysql", "decimal(10,2)", None, DecimalType(10, 2)),
    ("mysql", "DECIMAL(10,2) UNSIGNED", None, DecimalType(10, 2)),
    ("mysql", "numeric(5)", None, DecimalType(5, 0)),
    ("mysql", "decimal", 3, BARE_DECIMAL),
    ("mysql", "decimal(65,30)", None, STRING),
    ("mysql", "bit(1)", None, BOOLEAN),
    ("mysql", "bit", None, LONG),  # TiCDC's canal-json writes every bit(n) so
    ("mysql", "bit(8)", None, LONG),
    ("mysql", "char(10)", None, STRING),
    ("mysql", "varchar(255) character set utf8mb4 collate utf8mb4_bin", None, STRING),
    ("mysql", "varchar(20) binary", None, STRING),
    ("mysql", "longtext", None, STRING),
    ("mysql", "enum('a','b,(c)')", None, STRING),
    ("mysql", "set('x','y')", None, STRING),
    ("mysql", "json", None, STRING),
    ("mysql", "time(3)", None, STRING),
    ("mysql", "binary(16)", None, BINARY),
    ("mysql", "varbinary(255)", None, BINARY),
    ("mysql", "LONGBLOB", None, BINARY),
    ("mysql", "date", None, DATE),
    ("mysql", "datetime(6)", None, NTZ),
    ("mysql", "timestamp(3)", None, TS),
    # JDBC fallback: no text, unknown text, codes given as strings
    ("mysql", None, 4, INT),
    ("mysql", None, "-5", LONG),
    ("mysql", "", 12, STRING),
    ("mysql", "geometry", -2, BINARY),
    ("mysql", "geometry", None, BINARY),  # spatial types: the stored bytes
    ("mysql", "multipolygon", None, BINARY),
    ("mysql", "mystery", None, STRING),
    ("mysql", None, 6, DOUBLE),
    ("mysql", None, 7, FLOAT),
    ("mysql", None, 2, BARE_DECIMAL),
    ("mysql", None, 91, DATE),
    ("mysql", None, 93, NTZ),
    ("mysql", None, 2014, TS),
    ("mysql", None, -7, BOOLEAN),
    ("mysql", None, 16, BOOLEAN),
    ("mysql", None, 2004, BINARY),
    ("mysql", None, 2005, STRING),
    ("mysql", None, 94, STRING),  # DRS's code for MySQL datetime is not a java.sql.Types code
    ("mysql", None, None, STRING),
    ("mysql", "int", 12, INT),  # text wins over the code
    # type text taken from a DDL statement: constraints after the type
    ("mysql", "decimal(10,2) NOT NULL", None, DecimalType(10, 2)),
    ("mysql", "int unsigned not null", None, LONG),
    ("mysql", "bit(4) default b'0'", None, LONG),
    ("mysql", "national varchar(10)", None, STRING),
    # postgres / GaussDB (DRS columnType)
    ("postgres", "smallint", 2, INT),  # 2 is DRS's GaussDB code for smallint, not java.sql.Types NUMERIC
    ("postgres", "int2", None, INT),
    ("postgres", "integer", None, INT),
    ("postgres", "serial", None, INT),
    ("postgres", "bigint", None, LONG),
    ("postgres", "bigserial", None, LONG),
    ("postgres", "real", None, FLOAT),
    ("postgres", "float4", None, FLOAT),
    ("postgres", "double precision", None, DOUBLE),
    ("postgres", "float8", None, DOUBLE),
    ("postgres", "numeric(12,3)", None, DecimalType(12, 3)),
    ("postgres", "numeric(7)", None, DecimalType(7, 0)),
    ("postgres", "numeric", None, BARE_DECIMAL),
    ("postgres", "numeric(100,2)", None, STRING),
    ("postgres", "money", None, DecimalType(19, 2)),
    ("postgres", "boolean", 8, BOOLEAN),
    ("postgres", "bool", None, BOOLEAN),
    ("postgres", "bytea", 15, BINARY),
    ("postgres", "date", None, DATE),
    ("postgres", "timestamp without time zone", 16, NTZ),  # 16 would be BOOLEAN in java.sql.Types
    ("postgres", "timestamp(3) without time zone", None, NTZ),
    ("postgres", "timestamp(3) without time zone not null", None, NTZ),
    ("postgres", "timestamp", None, NTZ),
    ("postgres", "timestamp with time zone", None, TS),
    ("postgres", "TIMESTAMP(6) WITH TIME ZONE", None, TS),
    ("postgres", "timestamptz", None, TS),
    ("postgres", "character", 9, STRING),
    ("postgres", "character varying(255)", None, STRING),
    ("postgres", "text", None, STRING),
    ("postgres", "json", 22, STRING),
    ("postgres", "jsonb", None, STRING),
    ("postgres", "uuid", None, STRING),
    ("postgres", "tstzrange", 46, STRING),
    ("postgres", "int4range", 42, STRING),
    ("postgres", "bit", 20, STRING),
    ("postgres", "time with time zone", None, STRING),
    ("postgres", "interval", None, STRING),
    ("postgres", "integer[]", None, STRING),
    ("postgres", "_int4", None, STRING),
    ("postgres", "numeric(10,2)[]", None, STRING),
    ("postgres", None, 4, INT),  # no text at all: the code is all there is
    # oracle
    ("oracle", "NUMBER(10,2)", None, DecimalType(10, 2)),
    ("oracle", "NUMBER(5)", None, DecimalType(5, 0)),
    ("oracle", "NUMBER", None, BARE_DECIMAL),
    ("oracle", "NUMBER(*,2)", None, DecimalType(38, 2)),
    ("oracle", "NUMBER(5,-2)", None, DecimalType(7, 0)),
    ("oracle", "NUMBER(2,5)", None, DecimalType(5, 5)),
    ("oracle", "INTEGER", None, DecimalType(38, 0)),
    ("oracle", "BINARY_FLOAT", None, FLOAT),
    ("oracle", "BINARY_DOUBLE", None, DOUBLE),
    ("oracle", "FLOAT(126)", None, DOUBLE),
    ("oracle", "DATE", None, NTZ),
    ("oracle", "TIMESTAMP(6)", None, NTZ),
    ("oracle", "TIMESTAMP(9) WITH TIME ZONE", None, TS),
    ("oracle", "TIMESTAMP(6) WITH LOCAL TIME ZONE", None, TS),
    ("oracle", "RAW(16)", None, BINARY),
    ("oracle", "LONG RAW", None, BINARY),
    ("oracle", "BLOB", None, BINARY),
    ("oracle", "VARCHAR2(20 BYTE)", None, STRING),
    ("oracle", "NVARCHAR2(20)", None, STRING),
    ("oracle", "CHAR(1)", None, STRING),
    ("oracle", "CLOB", None, STRING),
    ("oracle", "INTERVAL DAY(2) TO SECOND(6)", None, STRING),
    ("oracle", "SDO_GEOMETRY", None, STRING),
    ("oracle", None, 91, NTZ),  # an Oracle DATE has a time of day
    ("oracle", None, -101, TS),
    # tsql
    ("tsql", "tinyint", None, INT),
    ("tsql", "smallint", None, INT),
    ("tsql", "int identity(1,1)", None, INT),
    ("tsql", "bigint", None, LONG),
    ("tsql", "bit", None, BOOLEAN),
    ("tsql", "decimal(18,4)", None, DecimalType(18, 4)),
    ("tsql", "numeric(38,0)", None, DecimalType(38, 0)),
    ("tsql", "money", None, DecimalType(19, 4)),
    ("tsql", "smallmoney", None, DecimalType(10, 4)),
    ("tsql", "float", None, DOUBLE),
    ("tsql", "float(53)", None, DOUBLE),
    ("tsql", "float(24)", None, FLOAT),
    ("tsql", "real", None, FLOAT),
    ("tsql", "date", None, DATE),
    ("tsql", "datetime", None, NTZ),
    ("tsql", "datetime2(7)", None, NTZ),
    ("tsql", "smalldatetime", None, NTZ),
    ("tsql", "datetimeoffset(7)", None, TS),
    ("tsql", "binary(8)", None, BINARY),
    ("tsql", "varbinary(max)", None, BINARY),
    ("tsql", "image", None, BINARY),
    ("tsql", "timestamp", None, BINARY),
    ("tsql", "rowversion", None, BINARY),
    ("tsql", "timestamp not null", None, BINARY),
    ("tsql", "nvarchar(max)", None, STRING),
    ("tsql", "uniqueidentifier", None, STRING),
    ("tsql", "time(7)", None, STRING),
    ("tsql", "xml", None, STRING),
    ("tsql", None, -155, TS),
]


@pytest.mark.parametrize(("dialect", "type_text", "jdbc_type", "expected"), TYPE_CASES,
                         ids=[f"{d}-{t}-{j}" for d, t, j, _ in TYPE_CASES])
def test_spark_type(dialect: str, type_text: str | None, jdbc_type: Any, expected: DataType) -> None:
    assert spark_type(type_text, dialect=dialect, jdbc_type=jdbc_type) == expected
    column = column_type("c", type_text, dialect=dialect, jdbc_type=jdbc_type)
    assert (column.name, column.data_type, column.optional) == ("c", expected, True)


def test_unknown_dialect_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="'db2'.*mysql, postgres, oracle, tsql"):
        spark_type("int", dialect="db2")


def test_dialect_name_is_case_insensitive() -> None:
    assert spark_type("timestamptz", dialect="Postgres") == TS


def test_parse_type_text() -> None:
    parsed = parse_type_text("  INT(11)  UNSIGNED ZEROFILL ")
    assert parsed is not None
    assert (parsed.base, parsed.args, parsed.unsigned) == ("int", ("11",), True)
    parsed = parse_type_text("timestamp(6) with local time zone")
    assert parsed is not None
    assert (parsed.base, parsed.args, parsed.zone) == ("timestamp", ("6",), "local")
    assert parse_type_text("   ") is None
    assert parse_type_text(None) is None


def test_byte_list_pattern() -> None:
    import re

    for good in ("[]", "[ ]", "[1]", "[106, 103, 111]", "[-128,127, 255]"):
        assert re.match(BYTE_LIST_PATTERN, good), good
    for bad in ("", "[", "[1,]", "[a]", "[1.5]", "[1234]", "1, 2", "[[1]]"):
        assert not re.match(BYTE_LIST_PATTERN, bad), bad


# --- converters --------------------------------------------------------------------------------------------------

Case = tuple[str, str | None, Any]
"""(type text, JSON text value, expected Python value; for ``timestamp`` columns: epoch microseconds)."""


def run_cases(spark, dialect: str, cases: list[Case]) -> list[tuple[Case, Any]]:
    """Decode every case's text with the converter of its type text; one DataFrame and one collect per dialect.

    Also checks that each converter's result type is the column's declared type.
    """
    texts = sorted({t for t, _, _ in cases})
    columns = {t: column_type(f"c{k}", t, dialect=dialect) for k, t in enumerate(texts)}
    df = spark.createDataFrame([(i, value) for i, (_, value, _) in enumerate(cases)], "i int, v string")
    converted = {t: c.convert(F.col("v")) for t, c in columns.items()}
    schema = df.select(*[out.alias(columns[t].name) for t, out in converted.items()]).schema
    for t, column in columns.items():
        assert schema[column.name].dataType == column.data_type, t
    outputs = [
        (F.unix_micros(out) if isinstance(columns[t].data_type, TimestampType) else out).alias(columns[t].name)
        for t, out in converted.items()
    ]
    rows = df.select("i", *outputs).orderBy("i").collect()
    return [(case, rows[i][columns[case[0]].name]) for i, case in enumerate(cases)]


def assert_cases(results: list[tuple[Case, Any]]) -> None:
    failures = []
    for case, actual in results:
        type_text, text, expected = case
        same = actual == expected and type(actual) is type(expected) or (
            isinstance(expected, bytes) and isinstance(actual, (bytes, bytearray)) and bytes(actual) == expected)
        if isinstance(expected, float) and isinstance(actual, float) and math.isnan(expected):
            same = math.isnan(actual)
        if not same:
            failures.append(f"{type_text!r} <- {text!r}: expected {expected!r}, got {actual!r}")
    assert not failures, "\n".join(failures)


DRS_BYTES = [106, 103, 111, 106, 103, 111, 105, 100, 115, 106, 103, 111, 106, 111, 115, 111, 103, 57, 51]

MYSQL_PLAIN_FORM_EDGES: list[Case] = [
    # Texts next to the plain forms the decoders cast after one match (leading zeros, a negative zero, a shorter
    # scale, exponent notation, five-digit and negative years, trailing zeros in a fraction).
    ("int(11)", "007", 7),
    ("int(11)", "-0", 0),
    ("int(11)", "2147483648", None),
    ("bigint(20)", "-9223372036854775808", -9223372036854775808),
    ("decimal(12,2)", "123.45", Decimal("123.45")),
    ("decimal(12,2)", "123.4", Decimal("123.40")),
    ("decimal(12,2)", "-0.00", Decimal("0.00")),
    ("decimal(12,2)", "123.456", None),
    ("decimal(12,2)", "1E+3", Decimal("1000.00")),
    ("decimal(12,2)", "12345678901.00", None),
    ("decimal(2,2)", "0.12", Decimal("0.12")),
    ("decimal(38,20)", "0.00000000000000000001", Decimal("0.00000000000000000001")),
    ("date", "0001-01-01", dt.date(1, 1, 1)),
    ("date", "9999-12-31", dt.date(9999, 12, 31)),
    ("date", "+10000-01-01", None),
    ("date", "-0001-01-01", None),
    ("date", "2021-02-29", None),
    ("date", "2021-6-5", None),
    ("datetime", "2021-06-25 17:51:53", dt.datetime(2021, 6, 25, 17, 51, 53)),
    ("datetime", "2021-06-25 17:51:53.5", dt.datetime(2021, 6, 25, 17, 51, 53, 500000)),
    ("datetime", "2021-06-25 17:51:53.000000", dt.datetime(2021, 6, 25, 17, 51, 53)),
    ("datetime", "2021-06-25T17:51:53", dt.datetime(2021, 6, 25, 17, 51, 53)),
    ("datetime", "+10000-01-01 00:00:00", None),
    ("datetime", "2021-06-25 24:00:00", None),
    ("datetime", "0000-00-00 00:00:00", None),
]

MYSQL_CASES: list[Case] = [
    # integers: a fraction, a non-number or an out-of-range value is a failed cast (null), never truncated
    ("int(11)", "103", 103),
    ("int(11)", " 42 ", 42),
    ("int(11)", "-7", -7),
    ("int(11)", "+7", 7),
    ("int(11)", "12.0", 12),
    ("int(11)", "abc", None),
    ("int(11)", "12.5", None),
    ("int(11)", "1e3", None),
    ("int(11)", "99999999999", None),
    ("int(11)", "", None),
    ("int(11)", None, None),
    ("tinyint(1)", "1", 1),
    ("tinyint(1)", "-128", -128),
    ("year(4)", "2021", 2021),
    ("int(10) unsigned", "4294967295", 4294967295),
    ("bigint(20)", "9223372036854775807", 9223372036854775807),
    ("bigint(20)", "9223372036854775808", None),
    ("bigint(20) unsigned", "18446744073709551615", Decimal("18446744073709551615")),
    ("bigint(20) unsigned", "123456789012345678901", None),
    # floating point
    ("float", "10357.0", 10357.0),
    ("float", "-1.5e3", -1500.0),
    ("float", "abc", None),
    ("double", "1.2510357E7", 12510357.0),
    ("double", "0.1", 0.1),
    ("double", "NaN", math.nan),
    # decimals: exact, never rounded
    ("decimal(10,2)", "12.34", Decimal("12.34")),
    ("decimal(10,2)", "-0.5", Decimal("-0.5")),
    ("decimal(10,2)", "12.340000", Decimal("12.34")),
    ("decimal(10,2)", ".5", Decimal("0.5")),
    ("decimal(10,2)", "7.", Decimal("7")),
    ("decimal(10,2)", "1.2345E3", Decimal("1234.5")),
    ("decimal(10,2)", "12345E-2", Decimal("123.45")),
    ("decimal(10,2)", "99999999.99", Decimal("99999999.99")),
    ("decimal(10,2)", "0E-20", Decimal("0")),
    ("decimal(10,2)", "12.345", None),
    ("decimal(10,2)", "12.3400000000000000000000000000000000000001", None),
    ("decimal(10,2)", "1E-3", None),
    ("decimal(10,2)", "100000000", None),
    ("decimal(10,2)", "99999999.995", None),
    ("decimal(10,2)", "abc", None),
    ("decimal(10,2)", "1.2.3", None),
    ("decimal(10,2)", ".", None),
    ("decimal(10,2)", "1e", None),
    ("decimal(10,2)", "", None),
    ("decimal(10,0)", "9874510357", Decimal("9874510357")),
    ("decimal(10,0)", "99999999999", None),
    ("decimal(10,0)", "1E3", Decimal("1000")),
    ("decimal(10,0)", "100E-2", Decimal("1")),
    ("decimal(10,0)", "150E-2", None),
    ("decimal", "9874510357", Decimal("9874510357")),
    ("decimal", "1.2510357E7", Decimal("12510357")),
    ("decimal", "0.1234567891", Decimal("0.1234567891")),
    ("decimal", "0.12345678901", None),
    ("decimal(65,30)", " 123456789012345678901234567890123456.000000000000000000000000000001 ",
     "123456789012345678901234567890123456.000000000000000000000000000001"),
    ("decimal(65,30)", "12abc", None),
    # bit
    ("bit(1)", "1", True),
    ("bit(1)", "0", False),
    ("bit(1)", "true", True),
    ("bit(1)", "FALSE", False),
    ("bit(1)", "[1]", True),
    ("bit(1)", "[0]", False),
    ("bit(1)", "2", None),
    ("bit(1)", "[2]", None),
    ("bit(8)", "5", 5),
    ("bit", "65", 65),  # TiCDC's canal-json: a bit(n) column's value as a number, its width left out
    ("bit", "1", 1),
    ("bit(8)", "[5]", 5),
    ("bit(8)", "[1, 0]", 256),
    ("bit(8)", "[-1]", 255),
    ("bit(8)", "[]", None),
    ("bit(8)", "abc", None),
    ("bit(64)", "18446744073709551615", -1),
    ("bit(64)", "[-1, -1, -1, -1, -1, -1, -1, -1]", -1),
    ("bit(64)", "[127, -1, -1, -1, -1, -1, -1, -1]", 2**63 - 1),
    ("bit(64)", "18446744073709551616", None),
    ("bit(64)", "[1, 0, 0, 0, 0, 0, 0, 0, 0]", None),
    # strings: as is
    ("varchar(255) character set utf8mb4", "华为云huaweicloud", "华为云huaweicloud"),
    ("varchar(255) character set utf8mb4", " padded ", " padded "),
    ("varchar(255) character set utf8mb4", "", ""),
    ("varchar(255) character set utf8mb4", "[1, 2]", "[1, 2]"),
    ("enum('a','b')", "b", "b"),
    ("json", '{"k": [1, 2]}', '{"k": [1, 2]}'),
    ("time", "17:51:53", "17:51:53"),
    # binary: DRS byte lists, canal ISO-8859-1 text
    ("varbinary(255)", "[]", b""),
    ("varbinary(255)", "[106, 103, 111]", b"jgo"),
    ("varbinary(255)", "[-106, 127, -128, 0, 255]", java_bytes([-106, 127, -128, 0, 255])),
    ("varbinary(255)", str(DRS_BYTES), java_bytes(DRS_BYTES)),
    ("varbinary(255)", "[300]", None),
    ("varbinary(255)", "[-129]", None),
    ("varbinary(255)", "abc\u00e9\u00ff\u0000", "abc\u00e9\u00ff\u0000".encode("latin-1")),
    ("varbinary(255)", "", b""),
    ("varbinary(255)", "华", None),
    ("blob", "[1,2,3]", b"\x01\x02\x03"),
    ("binary(3)", " x", b" x"),
    # date
    ("date", "2021-06-25", dt.date(2021, 6, 25)),
    ("date", " 2021-06-25 ", dt.date(2021, 6, 25)),
    ("date", "2021-06-25 00:00:00", dt.date(2021, 6, 25)),
    ("date", "0000-00-00", None),
    ("date", "2021-13-45", None),
    ("date", "2021-02-30", None),
    ("date", "2021-00-00", None),
    ("date", "2021-06-25 12:00:00", None),
    ("date", "2021", None),
    ("date", "20210625", None),
    # datetime -> timestamp_ntz
    ("datetime(6)", "2021-06-25 17:51:53", dt.datetime(2021, 6, 25, 17, 51, 53)),
    ("datetime(6)", "2021-06-25 17:51:53.123456", dt.datetime(2021, 6, 25, 17, 51, 53, 123456)),
    ("datetime(6)", "2021-06-25T17:51:53.5", dt.datetime(2021, 6, 25, 17, 51, 53, 500000)),
    ("datetime(6)", "2021-06-25 17:51", dt.datetime(2021, 6, 25, 17, 51)),
    ("datetime(6)", "2021-06-25", dt.datetime(2021, 6, 25)),
    ("datetime(6)", "2021-06-25:17:51:53", dt.datetime(2021, 6, 25, 17, 51, 53)),
    ("datetime(6)", "2021-06-25 17:51:53.1234567", dt.datetime(2021, 6, 25, 17, 51, 53, 123456)),
    ("datetime(6)", "0000-00-00 00:00:00", None),
    ("datetime(6)", "0000-00-00 00:00:00.000000", None),
    ("datetime(6)", "2021-06-25 25:00:00", None),
    ("datetime(6)", "2021-06-25 17:51:53+08", None),
    ("datetime(6)", "1624614713", None),
    ("datetime(6)", "yesterday", None),
    # timestamp -> instant (expected as epoch micros)
    ("timestamp(3)", "1624614713.201", micros(dt.datetime(2021, 6, 25, 9, 51, 53, 201000, tzinfo=UTC))),
    ("timestamp(3)", "1624614713", micros(dt.datetime(2021, 6, 25, 9, 51, 53, tzinfo=UTC))),
    ("timestamp(3)", "1624614713.1234567", micros(dt.datetime(2021, 6, 25, 9, 51, 53, 123456, tzinfo=UTC))),
    ("timestamp(3)", "-1.5", -1_500_000),
    ("timestamp(3)", "2021-06-25 17:51:53", micros(dt.datetime(2021, 6, 25, 17, 51, 53, tzinfo=UTC))),
    ("timestamp(3)", "2021-06-25 17:51:53.25", micros(dt.datetime(2021, 6, 25, 17, 51, 53, 250000, tzinfo=UTC))),
    ("timestamp(3)", "2021-06-25", micros(dt.datetime(2021, 6, 25, tzinfo=UTC))),
    ("timestamp(3)", "2010-01-01 14:30:00+08", micros(dt.datetime(2010, 1, 1, 14, 30, tzinfo=tz(8)))),
    ("timestamp(3)", "2010-01-01T14:30:00Z", micros(dt.datetime(2010, 1, 1, 14, 30, tzinfo=UTC))),
    ("timestamp(3)", "0000-00-00 00:00:00", None),
    ("timestamp(3)", "2021-06-25 17:51:53 Mars/Olympus", None),
    ("timestamp(3)", "noon", None),
]

POSTGRES_CASES: list[Case] = [
    ("smallint", "12", 12),
    ("smallint", "12.7", None),
    ("integer", "-2147483648", -2147483648),
    ("integer", "2147483648", None),
    ("bigint", "-9223372036854775808", -9223372036854775808),
    ("real", "1.5", 1.5),
    ("double precision", "-2.5E-3", -0.0025),
    ("double precision", "Infinity", math.inf),
    ("numeric(10,2)", "1234.5", Decimal("1234.5")),
    ("numeric(10,2)", "1234.567", None),
    ("numeric(10,2)", "NaN", None),
    ("numeric", "3.1415926535", Decimal("3.1415926535")),
    ("numeric", "3.14159265358979", None),
    ("numeric(100,2)", "1" * 60 + ".25", "1" * 60 + ".25"),
    ("money", "$1,234.56", Decimal("1234.56")),
    ("money", "-$0.50", Decimal("-0.5")),
    ("money", "1234567.5", Decimal("1234567.5")),
    ("money", "$1,234.567", None),
    ("money", "1,50", None),
    ("money", "1.234,56 €", None),
    ("boolean", "t", True),
    ("boolean", "f", False),
    ("boolean", "true", True),
    ("boolean", "false", False),
    ("boolean", "yes", True),
    ("boolean", "0", False),
    ("boolean", "maybe", None),
    ("bytea", "62797465615f64617461", bytes.fromhex("62797465615f64617461")),
    ("bytea", "\\x6279", b"by"),
    ("bytea", "\\xDEADbeef", bytes.fromhex("deadbeef")),
    ("bytea", "", b""),
    ("bytea", "627", None),
    ("bytea", "zz", None),
    ("date", "2021-12-16", dt.date(2021, 12, 16)),
    ("date", "2021-12-16 00:00:00", dt.date(2021, 12, 16)),
    ("date", "2021-12-16 BC", None),
    ("date", "infinity", None),
    ("timestamp without time zone", "2021-12-16 12:31:49.344365", dt.datetime(2021, 12, 16, 12, 31, 49, 344365)),
    ("timestamp without time zone", "2014-07-02 06:14:00.742", dt.datetime(2014, 7, 2, 6, 14, 0, 742000)),
    ("timestamp without time zone", "2014-07-02 06:14:00.742+02", None),
    ("timestamp with time zone", "2010-01-01 14:30:00+08", micros(dt.datetime(2010, 1, 1, 14, 30, tzinfo=tz(8)))),
    ("timestamp with time zone", "2010-01-01 14:30:00.5-05:30",
     micros(dt.datetime(2010, 1, 1, 14, 30, 0, 500000, tzinfo=tz(-5.5)))),
    ("timestamp with time zone", "2021-12-16 12:31:49.344365+00",
     micros(dt.datetime(2021, 12, 16, 12, 31, 49, 344365, tzinfo=UTC))),
    ("timestamp with time zone", "2010-01-01 14:30:00", micros(dt.datetime(2010, 1, 1, 14, 30, tzinfo=UTC))),
    ("timestamp with time zone", "2010-01-01 14:30:00+0800", micros(dt.datetime(2010, 1, 1, 14, 30, tzinfo=tz(8)))),
    ("timestamp with time zone", "infinity", None),
    ("character", "g", "g"),
    ("json", '{"key1": "value1"}', '{"key1": "value1"}'),
    ("tstzrange", '("2010-01-01 14:30:00+08","2010-01-01 15:30:00+08")',
     '("2010-01-01 14:30:00+08","2010-01-01 15:30:00+08")'),
    ("int4range", "[11,20)", "[11,20)"),
    ("bit", "1", "1"),
    ("uuid", "cf3f70a7-7565-44b0-ae3c-83bec549ea8e", "cf3f70a7-7565-44b0-ae3c-83bec549ea8e"),
    ("integer[]", "{1,2,3}", "{1,2,3}"),
    ("interval", "1 day 02:00:00", "1 day 02:00:00"),
]

ORACLE_CASES: list[Case] = [
    ("NUMBER(10,2)", "12.34", Decimal("12.34")),
    ("NUMBER(10,2)", "12.345", None),
    ("NUMBER(5)", "12345", Decimal("12345")),
    ("NUMBER(5)", "123456", None),
    ("NUMBER(5)", "1.5", None),
    ("NUMBER", "1.5E+10", Decimal("15000000000")),
    ("NUMBER", "-.5", Decimal("-0.5")),
    ("NUMBER", "1234567890123456789012345678.1", Decimal("1234567890123456789012345678.1")),
    ("NUMBER", "12345678901234567890123456789", None),
    ("NUMBER(5,-2)", "1234500", Decimal("1234500")),
    ("NUMBER(5,-2)", "12345.5", None),
    ("NUMBER(2,5)", "0.00012", Decimal("0.00012")),
    ("BINARY_FLOAT", "1.5", 1.5),
    ("BINARY_DOUBLE", "-Inf", -math.inf),
    ("FLOAT(126)", "3.25", 3.25),
    ("DATE", "2021-06-25 17:51:53", dt.datetime(2021, 6, 25, 17, 51, 53)),
    ("DATE", "2021-06-25", dt.datetime(2021, 6, 25)),
    ("TIMESTAMP(9)", "2021-06-25 17:51:53.123456789", dt.datetime(2021, 6, 25, 17, 51, 53, 123456)),
    ("TIMESTAMP(6) WITH TIME ZONE", "2021-06-25 17:51:53.123 +08:00",
     micros(dt.datetime(2021, 6, 25, 17, 51, 53, 123000, tzinfo=tz(8)))),
    ("TIMESTAMP(6) WITH TIME ZONE", "2021-06-25 17:51:53 Asia/Shanghai",
     micros(dt.datetime(2021, 6, 25, 17, 51, 53, tzinfo=tz(8)))),
    ("TIMESTAMP(6) WITH TIME ZONE", "2021-06-25 17:51:53 UTC",
     micros(dt.datetime(2021, 6, 25, 17, 51, 53, tzinfo=UTC))),
    ("TIMESTAMP(6) WITH LOCAL TIME ZONE", "2021-06-25 17:51:53",
     micros(dt.datetime(2021, 6, 25, 17, 51, 53, tzinfo=UTC))),
    ("RAW(16)", "0A0B", b"\n\x0b"),
    ("BLOB", "DEADBEEF", bytes.fromhex("DEADBEEF")),
    ("BLOB", "DEADBEE", None),
    ("VARCHAR2(20 BYTE)", "héllo", "héllo"),
    ("CLOB", "", ""),
    ("INTERVAL DAY(2) TO SECOND(6)", "+02 10:00:00.000000", "+02 10:00:00.000000"),
]

TSQL_CASES: list[Case] = [
    ("int", "5", 5),
    ("int", "5.5", None),
    ("tinyint", "255", 255),
    ("bigint", "-1", -1),
    ("bit", "1", True),
    ("bit", "0", False),
    ("bit", "true", True),
    ("bit", "x", None),
    ("decimal(18,4)", "1.2345", Decimal("1.2345")),
    ("decimal(18,4)", "1.23456", None),
    ("money", "12.3400", Decimal("12.34")),
    ("money", "-922337203685477.5808", Decimal("-922337203685477.5808")),
    ("smallmoney", "214748.3647", Decimal("214748.3647")),
    ("smallmoney", "2147480.3647", None),
    ("float", "1.5", 1.5),
    ("real", "0.25", 0.25),
    ("date", "2021-06-25", dt.date(2021, 6, 25)),
    ("datetime", "2021-06-25 17:51:53.123", dt.datetime(2021, 6, 25, 17, 51, 53, 123000)),
    ("datetime2(7)", "2021-06-25 17:51:53.1234567", dt.datetime(2021, 6, 25, 17, 51, 53, 123456)),
    ("smalldatetime", "2021-06-25 17:52:00", dt.datetime(2021, 6, 25, 17, 52)),
    ("datetimeoffset(7)", "2021-06-25 17:51:53.1234567 +08:00",
     micros(dt.datetime(2021, 6, 25, 17, 51, 53, 123456, tzinfo=tz(8)))),
    ("datetimeoffset(7)", "2021-06-25T17:51:53-07:00", micros(dt.datetime(2021, 6, 25, 17, 51, 53, tzinfo=tz(-7)))),
    ("varbinary(max)", "0x6279", b"by"),
    ("varbinary(max)", "6279", b"by"),
    ("varbinary(max)", "0x", b""),
    ("varbinary(max)", "0x123", None),
    ("varbinary(max)", "[1, 2]", None),
    ("timestamp", "0x00000000000007D1", bytes.fromhex("00000000000007D1")),
    ("uniqueidentifier", "6F9619FF-8B86-D011-B42D-00C04FC964FF", "6F9619FF-8B86-D011-B42D-00C04FC964FF"),
    ("nvarchar(max)", "華", "華"),
    ("time(7)", "17:51:53.1234567", "17:51:53.1234567"),
]


@pytest.mark.parametrize(("dialect", "cases"), [
    ("mysql", MYSQL_CASES + MYSQL_PLAIN_FORM_EDGES), ("postgres", POSTGRES_CASES), ("oracle", ORACLE_CASES),
    ("tsql", TSQL_CASES),
])
def test_converters(spark, dialect: str, cases: list[Case]) -> None:
    nulls = [(t, None, None) for t in sorted({t for t, _, _ in cases})]  # null in, null out, for every type
    assert_cases(run_cases(spark, dialect, cases + nulls))


def test_converters_ignore_session_time_zone(spark) -> None:
    """A zone-less value for a ``timestamp`` column is UTC whatever the session's zone, and a ``timestamp_ntz``
    keeps its wall-clock time."""
    before = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        cases: list[Case] = [
            ("timestamp", "2021-03-14 02:30:00", micros(dt.datetime(2021, 3, 14, 2, 30, tzinfo=UTC))),
            ("timestamp", "1624614713.201", micros(dt.datetime(2021, 6, 25, 9, 51, 53, 201000, tzinfo=UTC))),
            ("datetime", "2021-03-14 02:30:00", dt.datetime(2021, 3, 14, 2, 30)),
        ]
        assert_cases(run_cases(spark, "mysql", cases))
    finally:
        spark.conf.set("spark.sql.session.timeZone", before)


# --- the DRS samples of seed document 003 ------------------------------------------------------------------------

def seed_message(document: str, opening: str) -> dict[str, Any]:
    """The JSON example starting with ``opening`` in a seed document, as printed."""
    text = (SEEDS / document).read_text(encoding="utf-8")
    start = text.index(opening)
    message, _ = json.JSONDecoder().raw_decode(text, start)
    return message


def decode_row(spark, message: dict[str, Any], types_key: str, dialect: str, row: dict[str, Any]) -> dict[str, Any]:
    columns = [column_type(name, message[types_key].get(name), dialect=dialect,
                           jdbc_type=message["sqlType"].get(name)) for name in sorted(row)]
    df = spark.createDataFrame([tuple(row[c.name] for c in columns)], ", ".join(f"`{c.name}` string" for c in columns))
    outputs = []
    for c in columns:
        out = c.convert(F.col(f"`{c.name}`"))
        outputs.append((F.unix_micros(out) if isinstance(c.data_type, TimestampType) else out).alias(c.name))
    return df.select(*outputs).collect()[0].asDict()


def test_drs_mysql_sample(spark) -> None:
    message = seed_message("003_8a447dafd9e5a45d.txt", '{ "mysqlType"')
    row = message["data"][0]
    got = decode_row(spark, message, "mysqlType", "mysql", row)
    c12 = [int(b) for b in row["c12"].strip("[]").split(",")]
    assert got == {
        "id": 104,
        "c1": "cf3f70a7-7565-44b0-ae3c-83bec549ea8e:104",
        "c2": bytearray(b""),
        "c3": 103,
        "c4": dt.datetime(2021, 6, 25, 17, 51, 53),
        "c5": micros(dt.datetime(2021, 6, 25, 9, 51, 53, 201000, tzinfo=UTC)),
        "c6": "!@#$%90weurtg103",
        "c7": 10357.0,
        "c8": 12510357.0,
        "c9": Decimal("9874510357"),
        "c10": "华为云huaweicloud",
        "c11": bytearray(b""),
        "c12": bytearray(java_bytes(c12)),
        "c13": row["c13"],
        "c14": bytearray(java_bytes([int(b) for b in row["c14"].strip("[]").split(",")])),
    }
    assert bytes(got["c12"]).startswith(b"jgojgoidsjgojosog934094309tjhrgjew9tu09340teroejg98304")


def test_drs_gaussdb_sample(spark) -> None:
    message = seed_message("003_8a447dafd9e5a45d.txt", '{\n"columnType"')
    assert message["dbType"] == "GaussDB Primary/Standby"
    new = decode_row(spark, message, "columnType", "postgres", message["data"][0])
    old = decode_row(spark, message, "columnType", "postgres", message["old"][0])
    assert new == {
        "timestamp_column": dt.datetime(2021, 12, 16, 12, 31, 49, 344365),
        "tstzrange_column": '("2010-01-01 14:30:00+08","2010-01-01 15:30:00+08")',
        "int4range_column": "[11,20)",
        "char_column": "g",
        "jsonb_column": '{"key1": "value1", "key2": "value2"}',
        "boolean_column": False,
        "bit_column": "1",
        "smallint_column": 12,
        "bytea_column": bytearray(b"bytea_data"),
    }
    assert (old["timestamp_column"], old["boolean_column"]) == (dt.datetime(2014, 7, 2, 6, 14, 0, 742000), True)


def test_canal_enum_and_set_numbers_decode_to_their_labels(spark) -> None:
    """canal writes an ``enum`` value as its 1-based member index (``sqlType`` 4) and a ``set`` value as its member
    bitmask (``sqlType`` -7), as alibaba/canal's binlog reader hands them over; the type text lists the members,
    so the labels MySQL stores come back. Without a member list (TiCDC's bare ``enum``) or with a text ``sqlType``
    the value stays as it is."""
    enum = column_type("e", "enum('a','b','it''s')", jdbc_type=4)
    numbers = column_type("n", "enum('0','1')", jdbc_type=4)  # alibaba/canal#5562: the index, not the label
    bare = column_type("x", "enum", jdbc_type=4)
    labelled = column_type("l", "enum('a','b')", jdbc_type=12)
    members = column_type("s", "set('x','y','z')", jdbc_type=-7)
    cases = [
        # (enum text, enum('0','1') text, set text) -> expected labels
        ("1", "1", "5", ("a", "0", "x,z")),
        ("3", "2", "0", ("it's", "1", "")),
        ("0", "0", "7", ("", "", "x,y,z")),
        ("b", "1", "y,z", ("b", "0", "y,z")),
        ("4", "3", "8", (None, None, None)),
        ("c", "x", "-1", (None, None, None)),
        (None, None, None, (None, None, None)),
    ]
    df = spark.createDataFrame([(i, e, n, s) for i, (e, n, s, _) in enumerate(cases)],
                               "i int, e string, n string, s string")
    rows = df.select("i", enum.convert(F.col("e")).alias("e"), numbers.convert(F.col("n")).alias("n"),
                     members.convert(F.col("s")).alias("s"), bare.convert(F.col("e")).alias("bare"),
                     labelled.convert(F.col("e")).alias("labelled")).orderBy("i").collect()
    for (e, _, _, expected), row in zip(cases, rows):
        assert (row["e"], row["n"], row["s"]) == expected, (e, row)
        assert row["bare"] == e and row["labelled"] == e
    wide = column_type("w", "set(" + ",".join(f"'m{i}'" for i in range(64)) + ")", jdbc_type=-7)
    got = spark.range(1).select(wide.convert(F.lit(str(2**64 - 1))).alias("w"),
                                wide.convert(F.lit(str(2**63 + 1))).alias("top")).first()
    assert got["w"] == ",".join(f"m{i}" for i in range(64))
    assert got["top"] == "m0,m63"
