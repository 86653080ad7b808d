"""cdclake.formats.connect with real Spark: Kafka Connect / Debezium JSON encodings -> Spark types and values.

The oracles are computed here, in Python, from the literal inputs: a Decimal's base64 is what Kafka Connect's
converter writes (``BigInteger.toByteArray()``: minimal big-endian two's complement, rebuilt with
``int.to_bytes(..., signed=True)``) and its value is ``unscaled * 10**-scale`` (exact); dates and timestamps
come from ``datetime`` arithmetic on the epoch numbers. The code under test only ever produces the actual side.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import uuid
from decimal import Context, Decimal
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

from cdclake.exceptions import SchemaError
from cdclake.formats.connect import column_type, struct_columns
from cdclake.keys import KeySpec
from cdclake.landing import InputFile, land_files
from cdclake.normalize import TableTyping, canonical_records, normalize_batch, read_staged, staging_dir
from cdclake.pipeline import apply_batch
from cdclake.reader import dump_rows, quarantine_rows

EPOCH = dt.datetime(1970, 1, 1)
EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
DECIMAL = "org.apache.kafka.connect.data.Decimal"


def java_bytes(n: int) -> bytes:
    """``BigInteger.valueOf(n).toByteArray()``: bitLength() / 8 + 1 bytes, big-endian two's complement."""
    bit_length = n.bit_length() if n >= 0 else (-n - 1).bit_length()
    return n.to_bytes(bit_length // 8 + 1, "big", signed=True)


def exact(unscaled: int, scale: int) -> Decimal:
    """unscaled * 10**-scale without rounding (the default context would round to 28 digits)."""
    return Decimal(unscaled).scaleb(-scale, Context(prec=100))


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def decimal_spec(scale: int, precision: int | None = None, *, field: str = "amount") -> dict[str, Any]:
    params = {"scale": str(scale)}
    if precision is not None:
        params["connect.decimal.precision"] = str(precision)
    return {"type": "bytes", "optional": True, "name": DECIMAL, "version": 1, "parameters": params, "field": field}


def convert(spark, spec: dict[str, Any], texts: list[str | None], *, then=None) -> tuple[DataType, list[Any]]:
    """Decode JSON texts with the converter of one Connect field; return the result type and values in order."""
    column = column_type(spec)
    df = spark.createDataFrame(list(enumerate(texts)), "i int, v string")
    out = column.convert(F.col("v"))
    data_type = df.select(out.alias("out")).schema["out"].dataType
    if then is not None:
        out = then(out)
    rows = df.select("i", out.alias("out")).orderBy("i").collect()
    return data_type, [r["out"] for r in rows]


# --- org.apache.kafka.connect.data.Decimal ---------------------------------------------------------------------

DECIMAL_CASES = [
    # (unscaled, scale, precision)
    (0, 0, 1),
    (0, 4, 10),
    (1, 0, 1),
    (-1, 0, 1),
    (12345, 2, 7),
    (-12345, 2, 7),
    (127, 0, 3),
    (128, 0, 3),
    (-128, 0, 3),
    (-129, 0, 3),
    (255, 1, 4),
    (-32768, 3, 5),
    (2**63 - 1, 0, 19),
    (-(2**63), 0, 19),
    (2**63, 4, 20),  # 9 bytes: the first past a long
    (-(2**63) - 1, 4, 20),
    (123456789012345678901234567890, 10, 30),
    (-123456789012345678901234567890, 10, 30),
    (10**31 + 7, 5, 32),
    (-(10**35) + 1, 18, 35),
    (10**38 - 1, 0, 38),
    (-(10**38 - 1), 0, 38),  # high bytes * 2^64 alone would need 39 digits
    (-(10**38 - 1), 38, 38),
    (-(10**38) + 2**64 + 12345, 7, 38),
]


def test_java_bytes_oracle_matches_known_encodings():
    # BigInteger.toByteArray of these values, as Kafka Connect writes them (independent of int.bit_length quirks).
    assert java_bytes(0) == b"\x00"
    assert java_bytes(-1) == b"\xff"
    assert java_bytes(127) == b"\x7f"
    assert java_bytes(128) == b"\x00\x80"
    assert java_bytes(-128) == b"\x80"
    assert java_bytes(-129) == b"\xff\x7f"
    assert b64(java_bytes(12345)) == "MDk="


def test_decimal_base64_decodes_exactly(spark):
    # One column per case (each has its own scale and precision), a few cases per Spark job: one projection of all
    # of them would be too large for Spark's code generator (it falls back, slowly, to interpreted evaluation).
    actual = []
    for start in range(0, len(DECIMAL_CASES), 5):
        cases = DECIMAL_CASES[start:start + 5]
        df = spark.createDataFrame([tuple(b64(java_bytes(u)) for u, _, _ in cases)],
                                   [f"v{i}" for i in range(len(cases))])
        out = df.select(*[column_type(decimal_spec(s, p)).convert(F.col(f"v{i}")).alias(f"d{i}")
                          for i, (_, s, p) in enumerate(cases)])
        row = out.first()
        actual += [(u, s, out.schema[f"d{i}"].dataType, row[f"d{i}"]) for i, (u, s, _) in enumerate(cases)]

    assert actual == [(u, s, DecimalType(p, s), exact(u, s)) for u, s, p in DECIMAL_CASES]


def test_decimal_many_values_in_one_column(spark):
    unscaled = [0, 1, -1, 99, -100, 2**40, -(2**40), 10**20 + 3, -(10**20) - 3, 10**29, -(10**29)]
    data_type, values = convert(spark, decimal_spec(6, 36), [b64(java_bytes(n)) for n in unscaled] + [None, ""])

    assert data_type == DecimalType(36, 6)
    assert values == [exact(n, 6) for n in unscaled] + [None, None]


def test_decimal_sign_extended_encodings(spark):
    # Not what Connect writes, but valid two's complement: leading 0x00 / 0xFF bytes do not change the value.
    values = [-5, 5, -(2**70), 2**70]
    texts = [b64(n.to_bytes(16, "big", signed=True)) for n in values] + [b64((-5).to_bytes(9, "big", signed=True))]
    _, decoded = convert(spark, decimal_spec(2, 38), texts)

    assert decoded == [exact(n, 2) for n in values] + [exact(-5, 2)]


def test_decimal_without_precision_parameter_is_decimal_38(spark):
    data_type, values = convert(spark, decimal_spec(3), [b64(java_bytes(-98765))])

    assert data_type == DecimalType(38, 3)
    assert values == [Decimal("-98.765")]


def test_decimal_without_precision_and_a_large_scale_is_exact_text(spark):
    """Connect's own Decimal declares only its scale (debezium-server-ducklake's ``Decimal.schema(38)``):
    decimal(38,38) would refuse 1.5, so past 18 fraction digits the value is its exact text."""
    data_type, values = convert(spark, decimal_spec(38), [b64(java_bytes(15 * 10**37)), b64(java_bytes(-1))])

    assert data_type == StringType()
    assert [Decimal(v) for v in values] == [Decimal("1.5"), exact(-1, 38)]
    assert convert(spark, decimal_spec(18), [b64(java_bytes(1))])[0] == DecimalType(38, 18)


def test_decimal_sent_as_a_json_number_is_read_as_that_number(spark):
    """Kafka's JSON converter with ``decimal.format=NUMERIC`` (KIP-481: ``{"foo": 10.2345}``) keeps the Decimal's
    schema but writes the value as a number; it was decoded as if it were base64 (12345.123456789 became
    -191588395286535.707116557). A number is exact or a failed cast (null), as other number texts are. A text of
    digits only whose length is a multiple of 4 is base64, the converter's default (here 4660.25's bytes)."""
    texts = ["123.45", "-5.1", "10", "1.2E+3", "0.001", b64(java_bytes(466025)), "12.5", "1234"]
    data_type, values = convert(spark, decimal_spec(2, 10), texts)

    assert data_type == DecimalType(10, 2)
    assert values == [Decimal("123.45"), Decimal("-5.10"), Decimal("10.00"), Decimal("1200.00"), None,
                      exact(466025, 2), Decimal("12.50"), exact(int.from_bytes(base64.b64decode("1234"), "big",
                                                                                       signed=True), 2)]
    # Spark's JSON reader gives such a number's text through a double: 86199804577757.01 arrives as
    # 8.619980457775702E13. Past 15 significant digits it may be rounded, so it is a failed cast, never stored so.
    assert convert(spark, decimal_spec(2, 20), ["8.619980457775702E13", "8.61998045777570E13", "-0.00"])[1] == [
        None, Decimal("86199804577757.00"), Decimal("0.00")]
    # A wide decimal's number is its text; a number beyond a double arrives as "Infinity", quotes included.
    wide_type, wide = convert(spark, decimal_spec(2, 65), [
        "-123456789012.5", '"Infinity"', "-1.2345678901234567E40", "123456789012345678901234567890123456789012"])
    assert (wide_type, wide) == (StringType(), ["-123456789012.5", None, None,
                                                "123456789012345678901234567890123456789012"])
    assert convert(spark, decimal_spec(2, 20), ['"-Infinity"', "100000.0"])[1] == [None, Decimal("100000.00")]


def test_whole_decimals_written_as_json_numbers_are_told_from_base64_by_their_message(spark, session_lake):
    """With ``decimal.format=NUMERIC`` a Decimal of scale 0 has no point: ``{"qty": 1234}`` reads as the text 1234,
    as the base64 ``"1234"`` does. The message tells them apart (a number is not quoted), in the key, the after and
    the before image, and for a decimal too wide for Spark."""
    table = f"numeric_{uuid.uuid4().hex[:8]}"
    source, tid = f"connect_types_{table}", f"typed.{table}"
    fields = [decimal_spec(0, 10, field="id"), decimal_spec(0, 10, field="qty"), decimal_spec(0, 40, field="w")]

    def message(op: str, after: dict[str, Any], before: dict[str, Any] | None, lsn: int) -> str:
        event = json.loads(_envelope(table, fields, after, lsn=lsn))
        event["payload"].update(op=op, before=before)
        return json.dumps(event) + "\n"

    base64_1234 = int.from_bytes(base64.b64decode("1234"), "big", signed=True)
    text = (message("c", {"id": 1000, "qty": 1234, "w": 12345678}, None, 1)
            + message("c", {"id": 2000, "qty": "1234", "w": "5678"}, None, 2)
            + message("u", {"id": 1000, "qty": 56781234, "w": 1}, {"id": 1000, "qty": 1234, "w": 12345678}, 3))
    batch_id, result = _land_and_normalize(spark, session_lake, source, text)
    assert (result.tables, result.quarantined) == ({tid: 3}, 0)
    staged = read_staged(spark, staging_dir(session_lake, source, batch_id) / tid).orderBy("position").collect()
    before = [r["before"] for r in staged]
    assert (before[2]["id"], before[2]["qty"], before[2]["w"]) == (Decimal(1000), Decimal(1234), "12345678")
    apply_batch(spark, session_lake, source=source, batch_id=batch_id)

    assert [(r["id"], r["qty"], r["w"]) for r in dump_rows(session_lake, tid)] == [
        ("1000", "56781234", "1"), ("2000", str(base64_1234), str(int.from_bytes(base64.b64decode("5678"), "big",
                                                                                   signed=True)))]


def test_a_renamed_whole_decimal_is_told_from_base64_by_the_field_it_is_read_from(spark):
    """Images written before a rename carry the old name: whether the value was a number is read there too."""
    typing = TableTyping((column_type({"type": "int32", "field": "id"}), column_type(decimal_spec(0, 10, field="qty"))),
                         ("id",), aliases=(("old_qty", "qty"),))
    images = ['{"id": 1, "old_qty": 1234}', '{"id": 2, "old_qty": "1234"}', '{"id": 3, "qty": 1234}']
    parsed = spark.createDataFrame([(i, "c", text) for i, text in enumerate(images)], "index long, op string, "
                                   "after_text string").select(
        "*", *[F.lit(None).cast("string").alias(c) for c in ("before_text", "old_text", "key_text", "patch")],
        F.lit("p").alias("source_pos"), F.lit(0).alias("file_index"), F.lit(0).alias("row_index"),
        F.lit(None).cast("timestamp").alias("source_ts"), F.lit(False).alias("snapshot"),
        F.lit("t.x").alias("table_id"),
        F.lit("in").alias("input"), F.lit(1).cast("long").alias("line"), F.lit(None).cast("long").alias("offset"),
        F.lit(0).cast("long").alias("byte_offset"))
    rows = canonical_records(parsed, typing, batch_id="b1", source="s", fmt="debezium").orderBy("index").collect()
    assert [r["after"]["qty"] for r in rows] == [Decimal(1234), Decimal(int.from_bytes(base64.b64decode("1234"), "big",
                                                                                       signed=True)), Decimal(1234)]


def test_a_column_written_as_decimal_and_as_int64_in_one_batch_reads_each_by_its_schema(spark, session_lake):
    """A whole number the Decimal schema's messages wrote as a JSON number is marked for the decimal decoder; the
    int64 schema's messages of the same column read it as the plain number they sent, in either order."""
    decimal_fields = [{"type": "int32", "optional": False, "field": "id"}, decimal_spec(0, 20, field="qty")]
    long_fields = [{"type": "int32", "optional": False, "field": "id"}, {"type": "int64", "optional": True,
                                                                        "field": "qty"}]
    for first, second in ((decimal_fields, long_fields), (long_fields, decimal_fields)):
        table = f"mixed_{uuid.uuid4().hex[:8]}"
        source, tid = f"connect_types_{table}", f"typed.{table}"
        text = (_envelope(table, first, {"id": 1, "qty": 5678}, lsn=1) + "\n"
                + _envelope(table, second, {"id": 2, "qty": 1234}, lsn=2) + "\n")
        batch_id, result = _land_and_normalize(spark, session_lake, source, text)
        assert (result.tables, result.quarantined) == ({tid: 2}, 0)
        staged = read_staged(spark, staging_dir(session_lake, source, batch_id) / tid).orderBy("position").collect()
        assert [int(r["after"]["qty"]) for r in staged] == [5678, 1234]


def test_a_whole_decimal_number_that_does_not_fit_is_quarantined_with_the_number_it_was(spark, session_lake):
    table = f"narrow_{uuid.uuid4().hex[:8]}"
    source = f"connect_types_{table}"
    fields = [{"type": "int32", "optional": False, "field": "id"}, decimal_spec(0, 3, field="qty")]
    _, result = _land_and_normalize(spark, session_lake, source,
                                    _envelope(table, fields, {"id": 1, "qty": 1234}, lsn=1) + "\n")
    assert result.quarantined == 1
    (row,) = [r for r in quarantine_rows(session_lake, source=source)]
    assert row["reason"] == 'value does not convert to the column type: after column qty (decimal(3,0)): ["1234"]'


def test_a_value_that_is_not_base64_is_a_failed_cast_not_an_error(spark):
    """Spark's ``unbase64`` throws on some texts ("Last unit does not have enough valid bits"), which stopped the
    whole batch; such a value is now null (a failed cast: its change is quarantined with the column)."""
    spec = {"type": "bytes", "optional": True, "field": "b"}
    assert convert(spark, spec, ["1", "AQID", "a-_b"]) == (BinaryType(), [None, bytes([1, 2, 3]), None])
    bits = {"type": "bytes", "optional": True, "name": "io.debezium.data.Bits", "parameters": {"length": "8"},
            "field": "b"}
    assert convert(spark, bits, ["A", "AQ=="])[1] == [None, 1]


@pytest.mark.parametrize("prefix", ["com.ververica.cdc.connectors.shaded.", "org.apache.flink.cdc.connectors.shaded."])
def test_logical_types_under_flink_cdcs_shaded_names_are_decoded(spark, prefix):
    """Flink CDC relocates Kafka Connect into its own package, and its events name the logical types so
    (LakeSoul's JsonRecordForLakeSoulTest): they decode as the unshaded ones, not as their bytes and numbers."""
    spec = dict(decimal_spec(2, 10), name=prefix + DECIMAL)
    assert convert(spark, spec, [b64(java_bytes(12345))]) == (DecimalType(10, 2), [Decimal("123.45")])
    stamp = {"type": "int64", "name": prefix + "org.apache.kafka.connect.data.Timestamp", "field": "at"}
    assert convert(spark, stamp, ["1570386469123"]) == (
        TimestampNTZType(), [EPOCH + dt.timedelta(milliseconds=1570386469123)])


def test_arrays_of_logical_types_keep_json_text_of_decoded_elements(spark):
    """PostgreSQL arrays of numeric, date and timestamp (debezium-server-bigquery's various-array-data-types):
    the column is the array's JSON text, with each element decoded by the items' schema, not Connect's bytes
    and epoch numbers."""
    def array_of(items: dict[str, Any]) -> dict[str, Any]:
        return {"type": "array", "optional": True, "items": items, "field": "arr"}

    decimals = array_of({k: v for k, v in decimal_spec(2).items() if k != "field"})
    texts = [json.dumps([b64(java_bytes(12345)), b64(java_bytes(-1)), None]), "[]", None]
    assert convert(spark, decimals, texts) == (StringType(), ["[123.45,-0.01,null]", "[]", None])
    dates = array_of({"type": "int32", "name": "io.debezium.time.Date"})
    assert convert(spark, dates, ["[20118,-1]"])[1] == ['["2025-01-30","1969-12-31"]']
    # An element that does not decode: the whole value is a failed cast (null here), never a null inside it.
    assert convert(spark, dates, ['[20118,"x"]', '{"a":1}'])[1] == [None, None]
    stamps = array_of({"type": "int64", "name": "io.debezium.time.MicroTimestamp"})
    assert convert(spark, stamps, ["[1738224000123456]"])[1] == ['["2025-01-30T08:00:00.123456"]']
    # Arrays of plain values are kept as sent.
    assert convert(spark, array_of({"type": "int32"}), ["[1, 2]"])[1] == ["[1, 2]"]
    # A plain numeric[]: VariableScaleDecimal objects, decoded exactly into numbers.
    variable = array_of({"type": "struct", "name": "io.debezium.data.VariableScaleDecimal", "fields": [
        {"type": "int32", "optional": False, "field": "scale"},
        {"type": "bytes", "optional": False, "field": "value"}]})
    sent = json.dumps([{"scale": 1, "value": b64(java_bytes(15))}, {"scale": 2, "value": b64(java_bytes(-1))}, None,
                       {"scale": 0, "value": b64(java_bytes(10**30))}])
    assert convert(spark, variable, [sent, "[]", '[{"scale":1}]'])[1] == [
        "[1.5,-0.01,null,1000000000000000000000000000000]", "[]", None]


# --- io.debezium.time.* ------------------------------------------------------------------------------------------

def test_debezium_date_days_since_epoch(spark):
    days = [0, 1, -1, 18044, -719162, 2932896]
    data_type, values = convert(spark, {"type": "int32", "optional": True, "name": "io.debezium.time.Date",
                                        "version": 1, "field": "birthday"}, [str(d) for d in days])

    assert data_type == DateType()
    assert values == [dt.date(1970, 1, 1) + dt.timedelta(days=d) for d in days]
    assert values[-2:] == [dt.date(1, 1, 1), dt.date(9999, 12, 31)]


@pytest.mark.parametrize(("logical", "unit_micros"), [
    ("io.debezium.time.Timestamp", 1000),
    ("io.debezium.time.MicroTimestamp", 1),
])
def test_debezium_timestamps_without_zone(spark, logical, unit_micros):
    numbers = [0, 1559033904863, -1, 1, 253402300799999] if unit_micros == 1000 else \
        [0, 1559033904863123, -1, 1, 253402300799999999]
    data_type, values = convert(spark, {"type": "int64", "name": logical, "field": "at"}, [str(n) for n in numbers])

    assert data_type == TimestampNTZType()
    assert values == [EPOCH + dt.timedelta(microseconds=n * unit_micros) for n in numbers]


def test_debezium_nano_timestamp_truncates_to_micros(spark):
    nanos = [1559033904863123456, 999, -1, -1000, 0]
    data_type, values = convert(spark, {"type": "int64", "name": "io.debezium.time.NanoTimestamp", "field": "at"},
                                [str(n) for n in nanos])

    assert data_type == TimestampNTZType()
    # floor division: a nanosecond before the epoch is the microsecond before it, not the epoch.
    assert values == [EPOCH + dt.timedelta(microseconds=n // 1000) for n in nanos]
    assert values[0] == dt.datetime(2019, 5, 28, 8, 58, 24, 863123)


def test_debezium_zoned_timestamp_is_an_instant(spark):
    # Java's OffsetDateTime.toString() leaves out zero seconds (`2019-05-28T08:58Z`), as hand-written events do.
    texts = ["2019-05-28T08:58:24.863Z", "2019-05-28T10:58:24.863123+02:00", "1969-12-31T23:59:59.999999Z",
             "2019-05-28T08:58Z", "2019-05-28T10:58+02:00"]
    data_type, micros = convert(spark, {"type": "string", "name": "io.debezium.time.ZonedTimestamp",
                                        "field": "at"}, texts, then=F.unix_micros)

    assert data_type == TimestampType()
    expected = [(dt.datetime.fromisoformat(t.replace("Z", "+00:00")) - EPOCH_UTC) // dt.timedelta(microseconds=1)
                for t in texts]
    assert micros == expected
    assert expected[:2] == [1559033904863000, 1559033904863123]


def test_debezium_zoned_timestamp_infinity_is_the_micro_timestamp_stand_in(spark):
    # PostgreSQL timestamptz 'infinity': newer connectors send the word, older ones the instant of PGStatement's
    # DATE_POSITIVE_INFINITY milliseconds (year 292278994), which no timestamp type holds. A `timestamp` column's
    # infinity arrives as MicroTimestamp 9223372036825200000 (see test_debezium_seeds): the same stand-in.
    texts = ["infinity", "-infinity", "+292278994-08-16T23:00:00Z", "-292275055-05-16T16:47:04.192Z",
             "2019-05-28T08:58:24.863Z", "not a time"]
    _, micros = convert(spark, {"type": "string", "name": "io.debezium.time.ZonedTimestamp", "field": "at"}, texts,
                        then=F.unix_micros)

    assert micros == [9223372036825200000, -9223372036832400000, 9223372036825200000, -9223372036832400000,
                      1559033904863000, None]


@pytest.mark.parametrize("unscaled, scale, precision, data_type, value", [
    # Oracle NUMBER(P,S<0) (oracle.adoc: a Decimal whose scale is negative): whole numbers.
    (123, -2, 20, DecimalType(22, 0), Decimal(12300)),
    (-7, -3, 5, DecimalType(8, 0), Decimal(-7000)),
    # Beyond any Spark decimal: NUMBER(5,40), NUMBER(38,-5): the exact text.
    (12, 40, 5, StringType(), "0.0000000000000000000000000000000000000012"),
    (-10**37, -5, 38, StringType(), "-1" + "0" * 42),
    # A precision above 38 (PostgreSQL numeric(39,2), MySQL DECIMAL(65,30)): values with more than 38 digits.
    (585691028598451546227916918584382586822, 2, 39, StringType(), "5856910285984515462279169185843825868.22"),
    (-12345678901123456789012345678901234567890, 30, 65, StringType(),
     "-12345678901.123456789012345678901234567890"),
    (150, 2, 39, StringType(), "1.50"),
])
def test_decimals_no_spark_decimal_holds_at_their_scale_are_exact(spark, unscaled, scale, precision, data_type,
                                                                  value):
    actual_type, values = convert(spark, decimal_spec(scale, precision), [b64(java_bytes(unscaled)), None])

    assert (actual_type, values) == (data_type, [value, None])
    assert Decimal(values[0]) == exact(unscaled, scale)


@pytest.mark.parametrize(("logical", "texts", "data_type", "values"), [
    # time.precision.mode=isostring (JdbcValueConvertersTemporalPrecisionTest's texts): the types of the other modes.
    ("io.debezium.time.IsoDate", ["2005-05-12Z", "2014-09-08Z", None], DateType(),
     [dt.date(2005, 5, 12), dt.date(2014, 9, 8), None]),
    ("io.debezium.time.IsoTime", ["10:30:45.123456789Z", "03:04:05Z", "not a time"], StringType(),
     ["10:30:45.123456", "03:04:05.000000", "not a time"]),
    ("io.debezium.time.IsoTimestamp", ["2011-01-11T16:40:30.123456789Z", "2024-11-20T15:44:43Z", "2024-11-20T15:44Z"],
     TimestampNTZType(),
     [dt.datetime(2011, 1, 11, 16, 40, 30, 123456), dt.datetime(2024, 11, 20, 15, 44, 43),
      dt.datetime(2024, 11, 20, 15, 44)]),
])
def test_debezium_iso_string_times_are_typed_as_the_other_precision_modes(spark, logical, texts, data_type, values):
    assert convert(spark, {"type": "string", "name": logical, "field": "t"}, texts) == (data_type, values)


def test_debezium_micro_time_is_time_of_day_text(spark):
    micros = [0, 3723000004, 86399999999, 45296789000]
    data_type, values = convert(spark, {"type": "int64", "name": "io.debezium.time.MicroTime", "field": "t"},
                                [str(m) for m in micros])

    assert data_type == StringType()
    assert values == [(EPOCH + dt.timedelta(microseconds=m)).strftime("%H:%M:%S.%f") for m in micros]
    assert values[1] == "01:02:03.000004"


def test_debezium_zoned_time_has_one_form_with_its_zone(spark):
    # Debezium writes a PostgreSQL `timetz` with ISO_OFFSET_TIME: the fraction only when there is one.
    texts = ["10:30:45Z", "10:30:45.123456Z", "10:30:45.1+02:00", "23:59:59.999999999-05:30", "10:30Z", "x", None]
    data_type, values = convert(spark, {"type": "string", "name": "io.debezium.time.ZonedTime", "field": "t"}, texts)
    assert data_type == StringType()
    assert values == ["10:30:45.000000Z", "10:30:45.123456Z", "10:30:45.100000+02:00", "23:59:59.999999-05:30",
                      "10:30:00.000000Z", "x", None]


@pytest.mark.parametrize(("logical", "unit_micros"), [
    ("io.debezium.time.Time", 1000), ("io.debezium.time.MicroTime", 1)])
def test_debezium_times_beyond_a_day_keep_their_hours_and_sign(spark, logical, unit_micros):
    # MySQL's TIME spans -838:59:59 to 838:59:59 and Debezium sends such values unwrapped (its adaptive time modes);
    # PostgreSQL's time allows 24:00:00.
    values_s = [-3723, 3020399, 86400, -1, None]
    _, values = convert(spark, {"type": "int64", "name": logical, "field": "t"},
                        [None if v is None else str(v * 1_000_000 // unit_micros) for v in values_s])

    def clock(seconds: int) -> str:
        hours, rest = divmod(abs(seconds), 3600)
        return f"{'-' if seconds < 0 else ''}{hours:02d}:{rest // 60:02d}:{rest % 60:02d}.000000"
    assert values == [None if v is None else clock(v) for v in values_s]
    assert values[:3] == ["-01:02:03.000000", "838:59:59.000000", "24:00:00.000000"]


# --- bytes and VariableScaleDecimal ------------------------------------------------------------------------------

def test_bytes_are_base64(spark):
    blobs = [b"\x00\x01\xfe\xff", "héllo".encode("utf-8"), bytes(range(256)), b""]
    data_type, values = convert(spark, {"type": "bytes", "optional": True, "field": "blob"},
                                [b64(b) for b in blobs] + [None])

    assert data_type == BinaryType()
    assert [None if v is None else bytes(v) for v in values] == [*blobs, None]


@pytest.mark.parametrize("length", [2, 10, 64])
def test_bits_of_at_most_64_are_their_value_as_a_long(spark, length):
    # Debezium sends bit(n) little-endian (io.debezium.data.Bits, sized for n bits); canal and DRS give the value.
    values = [0, 1, 2, 3] if length == 2 else [0, 513, 1023] if length == 10 else [0, 1991, 2**63 - 1, 2**64 - 1]
    texts = [b64(v.to_bytes((length + 7) // 8, "little")) for v in values] + [b64(b""), None]
    spec = {"type": "bytes", "optional": True, "name": "io.debezium.data.Bits", "version": 1,
            "parameters": {"length": str(length)}, "field": "flags"}
    data_type, decoded = convert(spark, spec, texts)
    assert data_type == LongType()
    # bit(64) with the top bit set: the long keeps the same 64 bits.
    assert decoded == [v - 2**64 if v >= 2**63 else v for v in values] + [None, None]


def test_bits_of_more_than_64_stay_bytes(spark):
    spec = {"type": "bytes", "optional": True, "name": "io.debezium.data.Bits", "version": 1,
            "parameters": {"length": "72"}, "field": "flags"}
    data_type, decoded = convert(spark, spec, [b64(bytes(range(9)))])
    assert (data_type, [bytes(v) for v in decoded]) == (BinaryType(), [bytes(range(9))])


VARIABLE_SCALE_CASES = [
    (12345, 3), (-12345, 3), (0, 5), (1200, 2), (5, 3), (-5, 3), (7, 0), (10**25, 0),
    (123456789012345678901234, 20), (-(10**37) - 1, 6), (-(10**38 - 1), 5), (7, -2),
    # PostgreSQL's unconstrained numeric holds more digits than any Spark decimal (more than 16 bytes).
    (12345678901234567890123456789012345678905, 1), (-(10**64) + 1, 30), (2**127, 0), (-(2**127), 0),
]


def test_variable_scale_decimal_is_exact_text(spark):
    texts = [json.dumps({"scale": s, "value": b64(java_bytes(n))}) for n, s in VARIABLE_SCALE_CASES]
    data_type, values = convert(spark, {
        "type": "struct", "name": "io.debezium.data.VariableScaleDecimal", "optional": True, "field": "n",
        "fields": [{"type": "int32", "optional": False, "field": "scale"},
                   {"type": "bytes", "optional": False, "field": "value"}],
    }, texts + [None])

    assert data_type == StringType()
    # The text keeps the value's scale, as PostgreSQL shows it (and Debezium's decimal.handling.mode=string).
    expected = [format(exact(n, s), "f") for n, s in VARIABLE_SCALE_CASES]
    assert values == [*expected, None]
    assert expected[:6] == ["12.345", "-12.345", "0.00000", "12.00", "0.005", "-0.005"]
    assert expected[7:9] == ["10000000000000000000000000", "1234.56789012345678901234"]
    assert expected[12] == "1234567890123456789012345678901234567890.5"


# --- primitives, the nested key-schema form, unsupported types ---------------------------------------------------

@pytest.mark.parametrize(("connect_type", "text", "data_type", "value"), [
    ("int8", "-128", IntegerType(), -128),
    ("int16", "32767", IntegerType(), 32767),
    ("int32", "-2147483648", IntegerType(), -2147483648),
    ("INT32", "1", IntegerType(), 1),
    ("int64", "9223372036854775807", LongType(), 9223372036854775807),
    ("float32", "1.5", FloatType(), 1.5),
    ("float64", "-2.5E10", DoubleType(), -2.5e10),
    ("boolean", "true", BooleanType(), True),
    ("string", "Anne Marie", StringType(), "Anne Marie"),
])
def test_primitive_types(spark, connect_type, text, data_type, value):
    result_type, values = convert(spark, {"type": connect_type, "optional": False, "field": "c"}, [text, None])

    assert result_type == data_type
    assert values == [value, None]


def test_nested_key_schema_form_from_the_postgresql_key_example(spark):
    # The field of the PostgreSQL key example (seed 000): upper-case type, "optional" as a string.
    spec = {"name": "id", "index": "0", "schema": {"type": "INT32", "optional": "false"}}
    column = column_type(spec)

    assert (column.name, column.data_type, column.optional) == ("id", IntegerType(), False)
    _, values = convert(spark, spec, ["1", "1004", None])
    assert values == [1, 1004, None]


def test_optional_flag_forms():
    assert column_type({"type": "int32", "optional": False, "field": "a"}).optional is False
    assert column_type({"type": "int32", "optional": "false", "field": "a"}).optional is False
    assert column_type({"type": "int32", "optional": "true", "field": "a"}).optional is True
    assert column_type({"type": "int32", "field": "a"}).optional is True
    nested = column_type({"name": "k", "index": "0", "schema": {"type": "INT64", "optional": "true"}})
    assert (nested.name, nested.data_type, nested.optional) == ("k", LongType(), True)


def test_struct_columns_keep_order_and_names():
    columns = struct_columns({"type": "struct", "fields": [
        {"type": "int32", "optional": False, "field": "id"},
        {"type": "string", "optional": False, "field": "first_name"},
        decimal_spec(2, 10, field="balance"),
        {"type": "int32", "name": "io.debezium.time.Date", "field": "born"},
    ]})

    assert [(c.name, c.data_type) for c in columns] == [
        ("id", IntegerType()), ("first_name", StringType()), ("balance", DecimalType(10, 2)), ("born", DateType()),
    ]


@pytest.mark.parametrize(("spec", "fragments"), [
    ({"type": "geometry", "optional": True, "field": "shape"}, ["'shape'", "'geometry'"]),
    ({"type": "uuid128", "name": "com.example.Uuid128", "field": "ref"}, ["'ref'", "'uuid128'", "com.example.Uuid128"]),
    ({"name": "id", "index": "0", "schema": {"type": "INT128", "optional": "false"}}, ["'id'", "'INT128'"]),
    ({"optional": True, "field": "untyped"}, ["'untyped'", "unsupported Kafka Connect type"]),
])
def test_unsupported_type_raises_schema_error(spec, fragments):
    with pytest.raises(SchemaError) as caught:
        column_type(spec)
    for fragment in fragments:
        assert fragment in str(caught.value)


def test_field_without_a_name_raises_schema_error():
    with pytest.raises(SchemaError, match="without a name"):
        column_type({"type": "int32", "optional": False})


# --- through normalize_batch: the after image of a real Debezium envelope -----------------------------------------

def _envelope(table: str, fields: list[dict[str, Any]], after: dict[str, Any], *, lsn: int) -> str:
    row = {"type": "struct", "optional": True, "name": f"srv.typed.{table}.Value", "fields": fields}
    schema = {"type": "struct", "optional": False, "name": f"srv.typed.{table}.Envelope", "fields": [
        dict(row, field="before"), dict(row, field="after"),
        {"type": "struct", "optional": False, "name": "io.debezium.connector.postgresql.Source", "field": "source",
         "fields": [{"type": "int64", "optional": True, "field": "lsn"}]},
        {"type": "string", "optional": False, "field": "op"},
    ]}
    payload = {"before": None, "after": after, "op": "c", "ts_ms": 1700000000000,
               "source": {"connector": "postgresql", "name": "srv", "ts_ms": 1700000000000, "snapshot": "false",
                          "db": "shop", "schema": "typed", "table": table, "lsn": lsn}}
    return json.dumps({"schema": schema, "payload": payload})


def _land_and_normalize(spark, settings, source: str, text: str):
    batch_id, created, _, _ = land_files(settings, source=source, files=[InputFile(f"mem://{source}.jsonl",
                                                                                    text.encode("utf-8"))])
    assert created
    return batch_id, normalize_batch(spark, settings, source=source, batch_id=batch_id, fmt="debezium",
                                     keys=KeySpec(default=("id",)))


def test_typed_after_image_through_normalize(spark, session_lake):
    table = f"typed_{uuid.uuid4().hex[:8]}"
    source = f"connect_types_{table}"
    amount, big, tiny = 1234567890123456789012345678901, -98765432109876543210, -1
    fields = [
        {"type": "int32", "optional": False, "field": "id"},
        decimal_spec(4, 31, field="amount"),
        decimal_spec(0, 20, field="big"),
        decimal_spec(2, 3, field="tiny"),
        {"type": "int32", "optional": True, "name": "io.debezium.time.Date", "field": "born"},
        {"type": "int64", "optional": True, "name": "io.debezium.time.MicroTimestamp", "field": "seen_at"},
        {"type": "int64", "optional": True, "name": "io.debezium.time.NanoTimestamp", "field": "seen_at_ns"},
        {"type": "int64", "optional": True, "name": "io.debezium.time.Timestamp", "field": "seen_at_ms"},
        {"type": "string", "optional": True, "name": "io.debezium.time.ZonedTimestamp", "field": "zoned"},
        {"type": "int64", "optional": True, "name": "io.debezium.time.MicroTime", "field": "at_time"},
        {"type": "bytes", "optional": True, "field": "blob"},
        {"type": "struct", "optional": True, "name": "io.debezium.data.VariableScaleDecimal", "field": "n",
         "fields": [{"type": "int32", "field": "scale"}, {"type": "bytes", "field": "value"}]},
        {"type": "boolean", "optional": True, "field": "flag"},
    ]
    after = {
        "id": 7, "amount": b64(java_bytes(amount)), "big": b64(java_bytes(big)), "tiny": b64(java_bytes(tiny)),
        "born": 18044, "seen_at": 1559033904863123, "seen_at_ns": 1559033904863123456,
        "seen_at_ms": 1559033904863, "zoned": "2019-05-28T10:58:24.863123+02:00", "at_time": 3723000004,
        "blob": b64(b"\x00\xffcdc"), "n": {"scale": 20, "value": b64(java_bytes(123456789012345678901234))},
        "flag": True,
    }
    batch_id, result = _land_and_normalize(spark, session_lake, source,
                                           _envelope(table, fields, after, lsn=4096) + "\n")

    tid = f"typed.{table}"
    assert result.tables == {tid: 1} and result.quarantined == 0
    staged = read_staged(spark, staging_dir(session_lake, source, batch_id) / tid)
    after_type = staged.schema["after"].dataType
    assert [(f.name, f.dataType) for f in after_type.fields] == [
        ("id", IntegerType()), ("amount", DecimalType(31, 4)), ("big", DecimalType(20, 0)),
        ("tiny", DecimalType(3, 2)), ("born", DateType()), ("seen_at", TimestampNTZType()),
        ("seen_at_ns", TimestampNTZType()), ("seen_at_ms", TimestampNTZType()), ("zoned", TimestampType()),
        ("at_time", StringType()), ("blob", BinaryType()), ("n", StringType()), ("flag", BooleanType()),
    ]
    row = staged.select("after.*", F.unix_micros("after.zoned").alias("zoned_micros")).first()
    assert row["id"] == 7
    assert row["amount"] == exact(amount, 4)
    assert row["big"] == Decimal(big)
    assert row["tiny"] == Decimal("-0.01")
    assert row["born"] == dt.date(1970, 1, 1) + dt.timedelta(days=18044)
    assert row["seen_at"] == EPOCH + dt.timedelta(microseconds=1559033904863123)
    assert row["seen_at_ns"] == EPOCH + dt.timedelta(microseconds=1559033904863123)
    assert row["seen_at_ms"] == EPOCH + dt.timedelta(milliseconds=1559033904863)
    assert row["zoned_micros"] == 1559033904863123
    assert row["at_time"] == "01:02:03.000004"
    assert bytes(row["blob"]) == b"\x00\xffcdc"
    assert row["n"] == "1234.56789012345678901234"
    assert row["flag"] is True


def test_unsupported_type_in_an_envelope_quarantines_the_messages_with_that_schema(spark, session_lake):
    # The table's messages with another schema (before the column was added) are staged.
    table = f"untyped_{uuid.uuid4().hex[:8]}"
    source = f"connect_types_{table}"
    fields = [{"type": "int32", "optional": False, "field": "id"}]
    with_shape = [*fields, {"type": "geometry", "optional": True, "field": "shape"}]
    batch_id, result = _land_and_normalize(spark, session_lake, source, "\n".join([
        _envelope(table, fields, {"id": 1}, lsn=1),
        _envelope(table, with_shape, {"id": 2, "shape": "x"}, lsn=2),
        _envelope(table, with_shape, {"id": 3, "shape": "y"}, lsn=3),
    ]) + "\n")

    assert result.tables == {f"typed.{table}": 1} and result.quarantined == 2
    rows = spark.sql(
        "SELECT table_id, reason, line FROM lake.cdclake_meta.quarantine "
        f"WHERE source = '{source}' AND batch_id = '{batch_id}' ORDER BY line"
    ).collect()
    assert [(r["table_id"], r["line"]) for r in rows] == [(f"typed.{table}", 2), (f"typed.{table}", 3)]
    assert {r["reason"] for r in rows} == {
        f"table typed.{table}: column 'shape': unsupported Kafka Connect type 'geometry'"}


def _payload_only(table: str, after: dict[str, Any], *, lsn: int) -> str:
    return json.dumps({"before": None, "after": after, "op": "c", "ts_ms": 1700000000000, "source": {
        "connector": "postgresql", "name": "srv", "ts_ms": 1700000000000, "snapshot": "false", "db": "shop",
        "schema": "typed", "table": table, "lsn": lsn}})


def test_payload_only_values_into_existing_columns_are_never_truncated_or_rounded(spark, session_lake):
    """Without a schema, a value is typed by the table's column: a fraction in a bigint column or a digit beyond a
    decimal's scale is a failed cast (quarantined with the column), not a value stored changed (Spark's cast
    alone makes "5.17" 5 and "5.175" 5.18)."""
    table = f"schemaless_{uuid.uuid4().hex[:8]}"
    source, tid = f"connect_types_{table}", f"typed.{table}"
    fields = [{"type": "int32", "optional": False, "field": "id"},
              {"type": "int64", "optional": True, "field": "weight"}, decimal_spec(2, 10, field="price")]
    first, _ = _land_and_normalize(spark, session_lake, source, _envelope(
        table, fields, {"id": 1, "weight": 3, "price": b64(java_bytes(250))}, lsn=100) + "\n")
    apply_batch(spark, session_lake, source=source, batch_id=first)
    images = [
        {"id": 2, "weight": 5, "price": "5.10"},
        {"id": 3, "weight": 5.17, "price": "1"},
        {"id": 4, "weight": 1, "price": "5.175"},
        {"id": 5, "weight": 7.0, "price": 6},
        {"id": 6, "weight": None, "price": b64(java_bytes(1234))},  # Connect's Decimal bytes, the column's scale
        {"id": 7, "weight": 9223372036854775808, "price": "0"},
    ]
    text = "".join(_payload_only(table, image, lsn=200 + i) + "\n" for i, image in enumerate(images))
    second, result = _land_and_normalize(spark, session_lake, source, text)
    apply_batch(spark, session_lake, source=source, batch_id=second)

    assert result.quarantined == 3
    rows = spark.sql(f"SELECT line, reason FROM lake.cdclake_meta.quarantine WHERE source = '{source}' "
                     f"AND batch_id = '{second}' ORDER BY line").collect()
    assert [(r["line"], r["reason"]) for r in rows] == [
        (2, 'value does not convert to the column type: after column weight (bigint): ["5.17"]'),
        (3, 'value does not convert to the column type: after column price (decimal(10,2)): ["5.175"]'),
        (6, 'value does not convert to the column type: after column weight (bigint): ["9223372036854775808"]'),
    ]
    assert [(r["id"], r["weight"], r["price"]) for r in dump_rows(session_lake, tid)] == [
        (1, 3, "2.50"), (2, 5, "5.10"), (5, 7, "6.00"), (6, None, "12.34")]  # dump: decimals as exact text


def test_payload_only_images_of_a_new_table_keep_big_whole_numbers_and_variable_scale_decimals(spark, session_lake):
    """Without a schema, JSON inference types a new table's columns: whole numbers beyond a long are
    decimal(38,0) (not text), a VariableScaleDecimal ({scale, value}: Debezium's Oracle NUMBER and PostgreSQL
    NUMERIC) is its exact decimal text, and another JSON object stays its JSON text."""
    table = f"inferred_{uuid.uuid4().hex[:8]}"
    source, tid = f"connect_types_{table}", f"typed.{table}"
    images = [
        {"id": 1, "big": 5, "amount": {"scale": 2, "value": b64(java_bytes(1234))}, "doc": {"a": 1}},
        {"id": 18446744073709551615, "big": 12345678901234567890123,
         "amount": {"scale": 0, "value": b64(java_bytes(-7))}, "doc": {"a": [2]}},
    ]
    text = "".join(_payload_only(table, image, lsn=100 + i) + "\n" for i, image in enumerate(images))
    batch_id, result = _land_and_normalize(spark, session_lake, source, text)
    assert (result.tables, result.quarantined) == ({tid: 2}, 0)
    apply_batch(spark, session_lake, source=source, batch_id=batch_id)
    assert [(r["id"], r["big"], r["amount"], json.loads(r["doc"])) for r in dump_rows(session_lake, tid)] == [
        ("1", "5", "12.34", {"a": 1}),
        ("18446744073709551615", "12345678901234567890123", "-7", {"a": [2]})]  # dump: decimals as exact text


def test_payload_only_variable_scale_decimals_of_a_table_inference_made_are_read_in_later_batches(spark, session_lake):
    """An Oracle table keyed by a ``NUMBER`` column (a VariableScaleDecimal), streamed without its schema: the first
    batch's inference made the key column the exact decimal text (``4007``), and a later batch's update and delete
    of that key read the VariableScaleDecimal as its JSON text, which no row has: the delete removed nothing and the
    update inserted a second row (Flink CDC's Oracle example stream, cut into two batches)."""
    table = f"vsd_{uuid.uuid4().hex[:8]}"
    source, tid = f"connect_types_{table}", f"typed.{table}"

    def vsd(unscaled: int, scale: int = 0) -> dict[str, Any]:
        return {"scale": scale, "value": b64(java_bytes(unscaled))}

    first = [{"id": vsd(4007), "name": "ZHANGSAN", "amount": vsd(12345, 2)}, {"id": vsd(1), "name": "ONE"}]
    text = "".join(_payload_only(table, image, lsn=100 + i) + "\n" for i, image in enumerate(first))
    batch_id, _ = _land_and_normalize(spark, session_lake, source, text)
    apply_batch(spark, session_lake, source=source, batch_id=batch_id)
    update = json.loads(_payload_only(table, {"id": vsd(4007), "name": "update-name", "amount": vsd(-5, 3)}, lsn=200))
    update.update(op="u", before=first[0])
    delete = json.loads(_payload_only(table, first[1], lsn=201))
    delete.update(op="d", before=first[1], after=None)
    batch_id, result = _land_and_normalize(spark, session_lake, source, f"{json.dumps(update)}\n{json.dumps(delete)}\n")
    assert (result.tables, result.quarantined) == ({tid: 2}, 0)
    apply_batch(spark, session_lake, source=source, batch_id=batch_id)
    assert [(r["id"], r["name"], r["amount"]) for r in dump_rows(session_lake, tid)] == [
        ("4007", "update-name", "-0.005")]


def test_payload_only_images_that_spell_a_column_in_two_cases_are_one_column(spark, session_lake):
    """Debezium's Informix documentation: the update's ``before`` has ``id``, its ``after`` has ``ID``. Inferred as two
    columns, the staged records had both and every read of them failed (COLUMN_ALREADY_EXISTS); inferred as one, the
    other spelling's values were lost."""
    table = f"cased_{uuid.uuid4().hex[:8]}"
    source, tid = f"connect_types_{table}", f"typed.{table}"
    create = json.loads(_payload_only(table, {"id": 1001, "name": "a"}, lsn=100))
    update = json.loads(_payload_only(table, {"ID": 1001, "NAME": "b"}, lsn=101))
    update.update(op="u", before={"id": 1001, "name": "a"})
    batch_id, result = _land_and_normalize(spark, session_lake, source, f"{json.dumps(create)}\n{json.dumps(update)}\n")
    assert (result.tables, result.quarantined) == ({tid: 2}, 0)
    apply_batch(spark, session_lake, source=source, batch_id=batch_id)
    assert [(r["id"], r["name"]) for r in dump_rows(session_lake, tid)] == [(1001, "b")]


def test_a_later_batch_that_spells_the_tables_columns_in_another_case_fills_them(spark, session_lake):
    """The lake table has ``ID`` and ``V`` (its first batch's spelling); a later batch's images without a schema have
    ``id`` and ``v``. They are the table's columns: ``v`` was staged as null (the update lost its value without a
    word) and ``id`` as a missing key (the update quarantined)."""
    table = f"recased_{uuid.uuid4().hex[:8]}"
    source, tid = f"connect_types_{table}", f"typed.{table}"
    create = _payload_only(table, {"ID": 1, "V": "a", "w": 1}, lsn=100)
    first, _ = _land_and_normalize(spark, session_lake, source, create + "\n")
    apply_batch(spark, session_lake, source=source, batch_id=first)
    update = json.loads(_payload_only(table, {"id": 1, "v": "b", "W": 2}, lsn=200))
    update.update(op="u", before={"id": 1, "v": "a", "W": 1})
    second, result = _land_and_normalize(spark, session_lake, source, json.dumps(update) + "\n")
    assert (result.tables, result.quarantined) == ({tid: 1}, 0)
    apply_batch(spark, session_lake, source=source, batch_id=second)
    assert [(r["ID"], r["V"], r["w"]) for r in dump_rows(session_lake, tid)] == [(1, "b", 2)]


def test_a_key_change_whose_before_image_spells_the_key_in_another_case_moves_the_row(spark, session_lake):
    """Debezium's Informix shape (``before.id``, ``after.ID``) on a key change 1 -> 2, in one batch and against a
    table of an earlier batch: the old key's row stayed (its before key was read as missing)."""
    table = f"rekeyed_{uuid.uuid4().hex[:8]}"
    source, tid = f"connect_types_{table}", f"typed.{table}"
    create = _payload_only(table, {"ID": 1, "V": "a"}, lsn=100)
    moved = json.loads(_payload_only(table, {"ID": 2, "V": "a"}, lsn=110))
    moved.update(op="u", before={"id": 1, "v": "a"})
    first, _ = _land_and_normalize(spark, session_lake, source, f"{create}\n{json.dumps(moved)}\n")
    apply_batch(spark, session_lake, source=source, batch_id=first)
    assert [(r["ID"], r["V"]) for r in dump_rows(session_lake, tid)] == [(2, "a")]
    moved_again = json.loads(_payload_only(table, {"ID": 3, "V": "b"}, lsn=200))
    moved_again.update(op="u", before={"id": 2, "v": "a"})
    second, result = _land_and_normalize(spark, session_lake, source, json.dumps(moved_again) + "\n")
    assert result.quarantined == 0
    apply_batch(spark, session_lake, source=source, batch_id=second)
    assert [(r["ID"], r["V"]) for r in dump_rows(session_lake, tid)] == [(3, "b")]


def test_a_batch_whose_schemas_encode_a_column_two_ways_decodes_each_message_by_its_own_schema(spark, session_lake):
    """A column's Decimal scale (2, then 4 after an ALTER) and its timestamp precision (Timestamp millis, then
    MicroTimestamp micros) change within one batch: each message's value is decoded with its own schema, never
    with the other's (1.20 read with scale 4 is 0.0120; micros read as millis are in the year 55840)."""
    table = f"reencoded_{uuid.uuid4().hex[:8]}"
    source, tid = f"connect_types_{table}", f"typed.{table}"
    moment = dt.datetime(2023, 11, 14, 22, 13, 20, 250000)
    millis = int((moment - dt.datetime(1970, 1, 1)).total_seconds() * 1000)

    def fields(scale: int, time_type: str) -> list[dict[str, Any]]:
        return [{"type": "int32", "optional": False, "field": "id"}, decimal_spec(scale, 6 + scale),
                {"type": "int64", "optional": True, "name": time_type, "field": "at"}]

    old, new = fields(2, "io.debezium.time.Timestamp"), fields(4, "io.debezium.time.MicroTimestamp")
    text = "".join(line + "\n" for line in [
        _envelope(table, old, {"id": 1, "amount": b64(java_bytes(120)), "at": millis}, lsn=100),
        _envelope(table, new, {"id": 2, "amount": b64(java_bytes(23000)), "at": millis * 1000}, lsn=200),
        _envelope(table, old, {"id": 3, "amount": b64(java_bytes(345)), "at": millis}, lsn=300),
    ])
    batch_id, result = _land_and_normalize(spark, session_lake, source, text)
    assert (result.tables, result.quarantined) == ({tid: 3}, 0)
    rows = read_staged(spark, staging_dir(session_lake, source, batch_id) / tid).orderBy("position").collect()
    assert [(r.after.id, r.after.amount, r.after.at) for r in rows] == [
        (1, Decimal("1.2000"), moment), (2, Decimal("2.3000"), moment), (3, Decimal("3.4500"), moment)]


def test_a_value_whose_schema_type_cannot_become_the_columns_type_is_quarantined(spark, session_lake):
    """A column that is a Date in one message and an int32 in the next one of the batch: the later type wins, and
    the date, which no cast makes an int, is a failed cast of that message only (not a failed batch)."""
    table = f"retyped_{uuid.uuid4().hex[:8]}"
    source, tid = f"connect_types_{table}", f"typed.{table}"
    key = {"type": "int32", "optional": False, "field": "id"}
    text = "".join(line + "\n" for line in [
        _envelope(table, [key, {"type": "int32", "optional": True, "name": "io.debezium.time.Date", "field": "d"}],
                  {"id": 1, "d": 19675}, lsn=100),
        _envelope(table, [key, {"type": "int32", "optional": True, "field": "d"}], {"id": 2, "d": 7}, lsn=200),
    ])
    batch_id, result = _land_and_normalize(spark, session_lake, source, text)
    assert (result.tables, result.quarantined) == ({tid: 1}, 1)
    (row,) = read_staged(spark, staging_dir(session_lake, source, batch_id) / tid).collect()
    assert (row.after.id, row.after.d) == (2, 7)
    (rejected,) = spark.sql(f"SELECT line, reason FROM lake.cdclake_meta.quarantine WHERE source = '{source}'"
                            ).collect()
    assert (rejected.line, rejected.reason) == (
        1, 'value does not convert to the column type: after column d (int): ["19675"]')


@pytest.mark.parametrize("string_first", [True, False])
def test_a_column_that_is_text_in_one_schema_of_a_batch_is_text(spark, session_lake, string_first):
    """apache/flink-cdc's PipelineKafkaRecordDeserializationSchemaTest: `age` is an int32 in one message and a string
    in the other; whichever comes first, the column is text and both values are kept."""
    table = f"texted_{uuid.uuid4().hex[:8]}"
    source, tid = f"connect_types_{table}", f"typed.{table}"
    key = {"type": "int32", "optional": False, "field": "id"}
    as_int = [key, {"type": "int32", "optional": True, "field": "age"}]
    as_text = [key, {"type": "string", "optional": True, "field": "age"}]
    messages = [(as_text, "hello"), (as_int, 19)] if string_first else [(as_int, 18), (as_text, "hello")]
    text = "".join(_envelope(table, fields, {"id": n, "age": age}, lsn=100 * n) + "\n"
                   for n, (fields, age) in enumerate(messages, start=1))
    batch_id, result = _land_and_normalize(spark, session_lake, source, text)
    assert (result.tables, result.quarantined) == ({tid: 2}, 0)
    rows = read_staged(spark, staging_dir(session_lake, source, batch_id) / tid).orderBy("position").collect()
    expected = [(1, "hello"), (2, "19")] if string_first else [(1, "18"), (2, "hello")]
    assert [(r.after.id, r.after.age) for r in rows] == expected


_VARIABLE_SCALE_N = [
    {"type": "int32", "optional": False, "field": "id"},
    {"type": "struct", "optional": True, "name": "io.debezium.data.VariableScaleDecimal", "version": 1, "field": "n",
     "fields": [{"type": "int32", "optional": False, "field": "scale"},
                {"type": "bytes", "optional": False, "field": "value"}]}]
"""Row fields ``id`` and ``n``, a VariableScaleDecimal."""


def _table_from_create(spark, settings, column_n: str) -> tuple[str, str, str]:
    """A fresh table made from a schema-change event's CREATE TABLE (``id integer PRIMARY KEY, n <column_n>``),
    applied: (table, source, table id)."""
    table = f"ddl_numeric_{uuid.uuid4().hex[:8]}"
    source, tid = f"connect_types_{table}", f"typed.{table}"
    ddl = json.dumps({"payload": {
        "source": {"connector": "postgresql", "name": "srv", "ts_ms": 1700000000000, "snapshot": "false",
                   "db": "shop", "schema": "typed", "table": table, "lsn": 90},
        "ts_ms": 1700000000000, "databaseName": "shop", "schemaName": "typed",
        "ddl": f"CREATE TABLE typed.{table} (id integer PRIMARY KEY, n {column_n})"}})
    first, created = _land_and_normalize(spark, settings, source, ddl + "\n")
    assert (created.tables, created.quarantined) == ({tid: 0}, 0)
    apply_batch(spark, settings, source=source, batch_id=first)
    return table, source, tid


def test_variable_scale_decimals_go_into_the_decimal_column_a_create_table_made(spark, session_lake):
    """A table made from a schema-change event's CREATE TABLE has a NUMBER/numeric without precision as
    decimal(38,10); Debezium's change events carry that column as a VariableScaleDecimal (exact text). Each value
    goes into the decimal column exactly, or is quarantined: never rounded, and not the whole table held back as
    a type conflict."""
    table, source, tid = _table_from_create(spark, session_lake, "numeric")
    values = [(1, 2, 12345), (2, 11, 12345678901), (3, 0, -7)]  # (id, scale, unscaled): 123.45, 0.12345678901, -7
    text = "".join(_envelope(table, _VARIABLE_SCALE_N, {"id": i, "n": {"scale": s, "value": b64(java_bytes(u))}},
                             lsn=100 + i) + "\n" for i, s, u in values)
    batch_id, result = _land_and_normalize(spark, session_lake, source, text)
    assert (result.tables, result.quarantined) == ({tid: 2}, 1)
    apply_batch(spark, session_lake, source=source, batch_id=batch_id)
    assert [(r["id"], r["n"]) for r in dump_rows(session_lake, tid)] == [(1, "123.4500000000"), (3, "-7.0000000000")]
    (reason,) = [r["reason"] for r in spark.sql(
        f"SELECT reason FROM lake.cdclake_meta.quarantine WHERE source = '{source}'").collect()]
    arrived = json.dumps({"scale": 11, "value": b64(java_bytes(12345678901))}, separators=(",", ":"))
    assert reason == ("value does not convert to the column type: after column n (decimal(38,10)): "
                      f"[{json.dumps(arrived)}]")


def test_payload_only_variable_scale_decimals_go_into_a_declared_decimal_column(spark, session_lake):
    """Events without their schema carry a NUMBER/numeric as the VariableScaleDecimal object itself
    (``{"scale": 2, "value": "BNI="}``). Into a decimal column that a CREATE TABLE in the same batch declared, or
    that the lake table has, it goes in as its digits; it was quarantined as a value that does not convert."""
    table = f"ddl_numeric_{uuid.uuid4().hex[:8]}"
    source, tid = f"connect_types_{table}", f"typed.{table}"

    def event(i: int, scale: int, unscaled: int) -> str:
        return json.dumps({"payload": {"before": None, "op": "c", "ts_ms": 1700000000000, "after": {
            "id": i, "n": {"scale": scale, "value": b64(java_bytes(unscaled))}}, "source": {
            "connector": "postgresql", "name": "srv", "ts_ms": 1700000000000, "snapshot": "false", "db": "shop",
            "schema": "typed", "table": table, "lsn": 100 + i}}}) + "\n"

    create = json.dumps({"payload": {
        "source": {"connector": "postgresql", "name": "srv", "ts_ms": 1700000000000, "snapshot": "false",
                   "db": "shop", "schema": "typed", "table": table, "lsn": 90},
        "ts_ms": 1700000000000, "databaseName": "shop", "schemaName": "typed",
        "ddl": f"CREATE TABLE typed.{table} (id integer PRIMARY KEY, n numeric)"}}) + "\n"
    first, result = _land_and_normalize(spark, session_lake, source, create + event(1, 2, 1234) + event(2, 0, -7))
    assert (result.tables, result.quarantined) == ({tid: 2}, 0)
    apply_batch(spark, session_lake, source=source, batch_id=first)
    second, result = _land_and_normalize(spark, session_lake, source,
                                         event(3, 3, 5) + event(4, 11, 12345678901) + event(5, 12, 15 * 10**11)
                                         + event(6, 14, 0))
    assert (result.tables, result.quarantined) == ({tid: 3}, 1)  # 0.12345678901 has more than 10 decimals
    apply_batch(spark, session_lake, source=source, batch_id=second)

    assert [(r["id"], r["n"]) for r in dump_rows(session_lake, tid)] == [
        (1, "12.3400000000"), (2, "-7.0000000000"), (3, "0.0050000000"), (5, "1.5000000000"), (6, "0.0000000000")]


def test_variable_scale_decimals_go_into_the_floating_point_column_a_create_table_made(spark, session_lake):
    """Debezium's Oracle connector sends a FLOAT (a NUMBER of binary precision) as a VariableScaleDecimal, where
    the table's CREATE TABLE made the column a double: each value goes in as its nearest double, and the table's
    changes are not held back as a type conflict."""
    table, source, tid = _table_from_create(spark, session_lake, "double precision")
    values = [(1, 2, 12345), (2, 11, 12345678901), (3, 0, -7)]  # 123.45, 0.12345678901, -7
    text = "".join(_envelope(table, _VARIABLE_SCALE_N, {"id": i, "n": {"scale": s, "value": b64(java_bytes(u))}},
                             lsn=100 + i) + "\n" for i, s, u in values)
    batch_id, result = _land_and_normalize(spark, session_lake, source, text)
    assert (result.tables, result.quarantined) == ({tid: 3}, 0)
    apply_batch(spark, session_lake, source=source, batch_id=batch_id)
    assert [(r["id"], r["n"]) for r in dump_rows(session_lake, tid)] == [(1, 123.45), (2, 0.12345678901), (3, -7.0)]
