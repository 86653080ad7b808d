"""The quarantine: every message cdclake could not apply, with the reason, where it came from and its raw text.

One Iceberg table, ``cdclake_meta.quarantine``. Rows of a (source, batch) are replaced when the batch is
normalized again, so re-running a batch never duplicates them. Nothing is dropped silently: a message is either
staged, skipped with a counted reason (tombstones, logical-decoding messages), or quarantined here.
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import TYPE_CHECKING, Sequence

from cdclake.catalog import create_table, sql_literal
from cdclake.identity import meta_table, spark_table_name

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from cdclake.settings import LakeSettings

log = logging.getLogger(__name__)

TABLE = meta_table("quarantine")
PASSTHROUGH = ("input", "index", "line", "byte_offset", "offset", "key", "value", "table_id")
"""Parsed-record columns a quarantine row keeps (besides the reason)."""
REPLAY_SCHEME = "quarantine-replay://"
"""The input URI scheme of a batch of replayed quarantined messages (landed after the batches they came from)."""
ORIGIN_HEADER = "cdclake.origin"
"""Header of a replayed message: where it was first landed, JSON ``{"input", "line", "byte_offset",
"kafka_offset"}``. A replayed message that fails again is quarantined at that location (:func:`with_origin`)."""
ORIGIN_SCHEMA = "input string, line bigint, byte_offset bigint, kafka_offset bigint"
"""Schema of an :data:`ORIGIN_HEADER` value."""
_LOCATION = {"input": "input", "line": "line", "byte_offset": "byte_offset", "offset": "kafka_offset"}
"""A message's location: :data:`PASSTHROUGH` column -> :data:`ORIGIN_SCHEMA` field."""
VALUE_NOT_JSON = "message value is not valid JSON"
KEY_NOT_JSON = "message key is not valid JSON"
"""Reasons of a message whose value (key) Spark's JSON parser rejected. :func:`record` adds where the text stops
being JSON (e.g. ``: unterminated string starting at character 31 of 40``)."""
_DETAILED = 100
_DETAILED_CHARS = 1_000_000
"""At most this many distinct texts of a batch, each of at most this many characters, are parsed again on the
driver for the detail (a bound on what the driver holds: a Kafka message may be megabytes long)."""
REPLAYED = "replayed from the quarantine by a later batch"
"""Skip reason of a message that a batch run again would quarantine, which a replay batch has already run again
(:func:`without_replayed`): quarantining it again would list it twice."""


def is_replay_batch(settings: "LakeSettings", source: str, batch_id: str) -> bool:
    """Whether a landed batch holds replayed quarantined messages (:data:`REPLAY_SCHEME` inputs)."""
    from cdclake.landing import read_manifest

    return any(entry["input"].startswith(REPLAY_SCHEME) for entry in read_manifest(settings, source, batch_id)["files"])

_DDL = """
CREATE TABLE IF NOT EXISTS {name} (
  quarantined_at timestamp,
  source string,
  format string,
  batch_id string,
  input string,
  line bigint,
  byte_offset bigint,
  kafka_offset bigint,
  table_id string,
  reason string,
  raw_key string,
  raw_value string
) USING iceberg
TBLPROPERTIES ('format-version'='2')
"""


def without_replayed(rejected: Sequence["DataFrame"], replayed: "DataFrame") -> tuple[list["DataFrame"], int]:
    """Rejected records (:data:`PASSTHROUGH` columns and ``reason``) less those of messages at a location that
    ``replayed`` (the :data:`ORIGIN_SCHEMA` fields of later replay batches' messages) holds, and how many those are.
    """
    from functools import reduce

    from pyspark.sql import functions as F

    rows = reduce(lambda a, b: a.unionByName(b), [f.select(*PASSTHROUGH, "reason") for f in rejected]).alias("r")
    same = reduce(lambda a, b: a & b, [F.col(f"r.{c}").eqNullSafe(F.col(f"o.{o}")) for c, o in _LOCATION.items()])
    origins = replayed.distinct().alias("o")
    again = rows.join(origins, same, "left_semi").count()
    return ([rows.join(origins, same, "left_anti")] if again else list(rejected)), again


def with_origin(raw: "DataFrame", rejected: "DataFrame") -> "DataFrame":
    """Rejected records (:data:`PASSTHROUGH` columns and ``reason``) of a batch of replayed messages, located where
    their messages were first landed (:data:`ORIGIN_HEADER`) instead of in the replay's own input."""
    from pyspark.sql import functions as F

    origin = F.from_json(F.col("headers")[ORIGIN_HEADER], ORIGIN_SCHEMA)
    origins = raw.select("input", "index", origin.alias("_origin")).where(F.col("_origin").isNotNull())
    return (rejected.join(origins, ["input", "index"], "left")
            .withColumns({c: F.when(F.col("_origin").isNotNull(), F.col("_origin")[field]).otherwise(F.col(c))
                          for c, field in _LOCATION.items()})
            .drop("_origin"))


def ensure_table(spark: "SparkSession") -> str:
    """Create the quarantine table if missing; return its Spark name."""
    name = spark_table_name(TABLE)
    create_table(spark, TABLE, _DDL.format(name=name))
    return name


def record(spark: "SparkSession", frames: Sequence["DataFrame"], *, source: str, batch_id: str, fmt: str) -> int:
    """Replace a batch's quarantine rows with these rejected records.

    Args:
        spark: The session.
        frames: DataFrames with :data:`PASSTHROUGH` columns and ``reason``.
        source: Source name.
        batch_id: Batch id.
        fmt: Format name.

    Returns:
        The number of quarantined messages.
    """
    from pyspark.sql import functions as F

    name = ensure_table(spark)
    rows = None
    for frame in frames:
        shaped = frame.select(
            F.current_timestamp().alias("quarantined_at"),
            F.lit(source).alias("source"),
            F.lit(fmt).alias("format"),
            F.lit(batch_id).alias("batch_id"),
            F.col("input"),
            F.col("line").cast("bigint"),
            F.col("byte_offset").cast("bigint"),
            F.col("offset").cast("bigint").alias("kafka_offset"),
            F.col("table_id"),
            F.col("reason"),
            F.col("key").alias("raw_key"),
            F.col("value").alias("raw_value"),
        )
        rows = shaped if rows is None else rows.unionByName(shaped)
    spark.sql(f"DELETE FROM {name} WHERE source = '{sql_literal(source)}' AND batch_id = '{sql_literal(batch_id)}'")
    if rows is None:
        return 0
    rows = rows.persist()
    try:
        count = rows.count()
        if count:
            _with_json_errors(rows).writeTo(name).append()
            for r in rows.groupBy("reason").count().orderBy(F.desc("count")).limit(5).collect():
                log.warning("quarantined %d message(s) of batch %s: %s", r["count"], batch_id, r["reason"])
        return count
    finally:
        rows.unpersist()


def json_error(text: str) -> str | None:
    """Where ``text`` stops being JSON, as Python's parser says it (None: Python reads it; Spark's parser is
    stricter about some texts, e.g. ``NaN``)."""
    try:
        json.loads(text)
    except ValueError as exc:
        if not isinstance(exc, json.JSONDecodeError):
            return str(exc)
        what = exc.msg[:1].lower() + exc.msg[1:]
        cut = exc.pos >= len(text.rstrip()) or what.startswith("unterminated string")
        return (f"{what}{'' if what.endswith(' at') else ' at'} character {exc.pos + 1} of {len(text)}"
                + (" (the text ends there: cut short?)" if cut else ""))
    return None


def _with_json_errors(rows: "DataFrame") -> "DataFrame":
    """``rows`` whose reason says a value or key is not JSON, with where it stops being JSON (:func:`json_error`)
    for up to :data:`_DETAILED` distinct texts (others keep the reason without it). The rejected texts are few;
    Python parses them on the driver."""
    from pyspark.sql import functions as F

    reason = F.col("reason")
    texts = F.when(reason == VALUE_NOT_JSON, F.col("raw_value")).when(reason == KEY_NOT_JSON, F.col("raw_key"))
    texts = F.when(F.length(texts) <= _DETAILED_CHARS, texts)
    found = [r[0] for r in rows.select(texts.alias("text")).where("text IS NOT NULL").distinct().limit(_DETAILED)
             .collect()]
    details = {hashlib.sha256(t.encode("utf-8")).hexdigest(): e for t in found if (e := json_error(t)) is not None}
    if not details:
        return rows
    lookup = F.create_map(*[F.lit(x) for pair in details.items() for x in pair])
    detail = F.element_at(lookup, F.sha2(texts, 256))
    return rows.withColumn("reason", F.when(detail.isNotNull(), F.concat(reason, F.lit(": "), detail))
                           .otherwise(reason))
