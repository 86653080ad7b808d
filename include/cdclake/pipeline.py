"""The stages of a micro-batch, as one API for the CLI, the Airflow DAGs and the spark-submit jobs.

    land -> normalize -> apply -> validate

Each stage is idempotent for a given (source, batch id): landing the same input again returns the existing
batch, normalizing rewrites the same staging data, applying skips changes whose position is not newer than the
row's, validating writes the same report again. Results are plain dataclasses with ``to_dict``/``from_dict`` so
they travel through Airflow XCom as JSON.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Collection, Sequence

if TYPE_CHECKING:
    from typing import Mapping

    from pyspark.sql import SparkSession

    from cdclake.apply_options import ApplyOptions
    from cdclake.dq_config import DqConfig
    from cdclake.kafka import KafkaSource
    from cdclake.keys import KeySpec
    from cdclake.schema_changes import DdlPolicies
    from cdclake.quality import ValidationSummary
    from cdclake.settings import LakeSettings

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class LandResult:
    """What landing produced.

    Attributes:
        source: Source name.
        batch_id: The batch holding the input, or None when there was nothing to land.
        created: False when every input had been landed before (the existing batch is returned).
        message_count: Messages in the batch.
        manifest: Location of the batch manifest.
        lag: Kafka sources only: per topic and partition, offsets not landed yet (high watermark minus landed).
    """

    source: str
    batch_id: str | None
    created: bool
    message_count: int = 0
    manifest: str | None = None
    lag: dict[str, dict[str, int]] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "LandResult":
        return cls(**data)


@dataclass(frozen=True)
class NormalizeResult:
    """What normalizing a batch produced: canonical records per table, quarantined and skipped messages."""

    source: str
    batch_id: str
    tables: dict[str, int] = field(default_factory=dict)
    quarantined: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    ddl_stopped: dict[str, str] = field(default_factory=dict)
    """Tables whose changes a DDL statement held back under ``ddl_policy: fail`` -> the reason."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "NormalizeResult":
        return cls(**data)


@dataclass(frozen=True)
class TableCounts:
    """Effect of one batch on one table. ``rows_before + inserted - deleted == rows_after``.

    ``rows_before`` counts live rows after the batch's cut (a truncate, or a completed snapshot's reconciliation),
    which removed ``truncated`` rows. A completed snapshot's rows that replace stored rows count as ``updated``
    (and those rows in ``rows_before``), not as truncated and inserted again.
    """

    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    skipped_stale: int = 0
    rows_before: int = 0
    rows_after: int = 0
    truncated: int = 0
    unknown_values: int = 0
    """Rows inserted with a column whose value the change did not carry (Debezium's unchanged-TOAST placeholder)
    and the lake did not have either (no earlier row of the key): that column is null. Left out of
    :meth:`to_dict` when 0."""

    def to_dict(self) -> dict[str, int]:
        data = asdict(self)
        if not self.unknown_values:
            del data["unknown_values"]
        return data

    def summary(self) -> dict[str, int]:
        """The counts the CLI prints for a table (``cdclake apply``, ``cdclake quarantine replay``): the changes,
        and ``rows``, the table's live rows after the batch."""
        return {"inserted": self.inserted, "updated": self.updated, "deleted": self.deleted,
                "truncated": self.truncated, "skipped_stale": self.skipped_stale, "rows": self.rows_after,
                **({"unknown_values": self.unknown_values} if self.unknown_values else {})}


@dataclass(frozen=True)
class ApplyResult:
    """Effect of one batch on every table it touched."""

    source: str
    batch_id: str
    tables: dict[str, TableCounts] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "batch_id": self.batch_id,
                "tables": {t: c.to_dict() for t, c in self.tables.items()}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ApplyResult":
        return cls(data["source"], data["batch_id"], {t: TableCounts(**c) for t, c in data["tables"].items()})


def land_inputs(settings: "LakeSettings", *, source: str, inputs: Sequence[str], framing: str = "auto") -> LandResult:
    """Land input files/directories/``s3://`` prefixes as the next batch of a source (see :mod:`cdclake.landing`).

    Raises:
        InputError: An input that does not exist or cannot be read.
    """
    from cdclake.landing import land_files, resolve_inputs

    files = resolve_inputs(inputs, s3_endpoint=settings.s3_endpoint)
    batch_id, created, count, manifest = land_files(settings, source=source, files=files, framing=framing)
    return LandResult(source, batch_id, created, count, manifest)


def land_kafka(settings: "LakeSettings", *, source: str, kafka: "KafkaSource",
               spark: "SparkSession | Callable[[], SparkSession] | None" = None) -> LandResult:
    """Land everything new on a Kafka source's topics as its next batch (see :mod:`cdclake.kafka`).

    The landed offsets live in the batch manifests; a batch a crashed run left incomplete is finished first.

    Args:
        settings: The lake.
        source: Source name.
        kafka: Bootstrap servers, topics, consumer group, batch size cap and security settings.
        spark: The session (or a function returning it) whose tasks read the offset ranges; started only when
            there is something to read.

    Returns:
        The batch, or ``batch_id=None`` when no partition had new offsets; ``lag`` per topic and partition.

    Raises:
        InputError: Topics missing or the broker not answering.
        KafkaLandingError: A planned offset range could not be read (the next run re-reads it).
    """
    from cdclake.kafka import land_kafka as run

    landed = run(settings, source=source, kafka=kafka, spark=spark)
    return LandResult(source, landed.batch_id, landed.created, landed.message_count, landed.manifest, landed.lag)


def land_inbox(settings: "LakeSettings", *, source: str, inbox: str, framing: str = "auto") -> LandResult:
    """Land every inbox file (a directory or ``s3://`` prefix) not landed before, as one new batch.

    Returns:
        The new batch, or a result with ``batch_id=None`` when the inbox holds nothing new (or nothing at all).
    """
    from pathlib import Path

    from cdclake.landing import land_files, resolve_inputs
    from cdclake.storage import open_store

    if inbox.startswith(("s3://", "s3a://")):
        if not any(True for _ in open_store(inbox, s3_endpoint=settings.s3_endpoint).list("")):
            return LandResult(source, None, False)
    elif not Path(inbox).exists():
        return LandResult(source, None, False)
    files = resolve_inputs([inbox], s3_endpoint=settings.s3_endpoint)
    batch_id, created, count, manifest_uri = land_files(settings, source=source, files=files, framing=framing)
    if not created:
        return LandResult(source, None, False)
    return LandResult(source, batch_id, created, count, manifest_uri)


def next_batch(settings: "LakeSettings", *, source: str, inbox: str, framing: str = "auto") -> LandResult:
    """The batch a scheduled run should process: the oldest landed-but-unapplied one, else a newly landed one.

    A run that failed after landing and is then cleared or re-run would otherwise find nothing new in the inbox
    and leave its batch unapplied forever; here it resumes that batch (``created=False``) first.
    """
    from cdclake.landing import list_batches, read_manifest

    pending = [b for b in list_batches(settings, source) if not is_applied(settings, source, b)]
    if pending:
        manifest = read_manifest(settings, source, pending[0])
        return LandResult(source, pending[0], False, manifest["message_count"], None)
    return land_inbox(settings, source=source, inbox=inbox, framing=framing)


def next_kafka_batch(settings: "LakeSettings", *, source: str, kafka: "KafkaSource",
                     spark: "SparkSession | Callable[[], SparkSession] | None" = None) -> LandResult:
    """The batch a run of a Kafka source should process: the oldest landed-but-unapplied one, else a new one.

    Like :func:`next_batch`: a run that died after landing (its batch complete, maybe already committed to the
    consumer group) resumes that batch first (``created=False``) instead of leaving it unapplied. A batch whose
    landing did not finish is finished by :func:`land_kafka`.
    """
    from cdclake.exceptions import InputError
    from cdclake.kafka import batch_complete, current_lag, landed_message_count
    from cdclake.landing import list_batches

    pending = [b for b in list_batches(settings, source)
               if not is_applied(settings, source, b) and batch_complete(settings, source, b)]
    if pending:
        log.info("batch %s of %r was landed but not applied: processing it first", pending[0], source)
        try:
            lag = current_lag(settings, source=source, kafka=kafka)
        except InputError as exc:  # the lag is for monitoring; the landed batch does not need the broker
            log.warning("cannot read the lag of %r: %s", source, exc)
            lag = None
        return LandResult(source, pending[0], False, landed_message_count(settings, source, pending[0]), None, lag)
    return land_kafka(settings, source=source, kafka=kafka, spark=spark)


def unapplied_before(settings: "LakeSettings", source: str, batch_id: str) -> list[str]:
    """The source's batches landed before ``batch_id`` and not applied (a run stopped after landing them), oldest
    first; batches of replayed quarantined messages are left to ``cdclake quarantine replay``."""
    from cdclake.landing import list_batches
    from cdclake.quarantine import is_replay_batch

    batches = list_batches(settings, source)
    earlier = batches[:batches.index(batch_id)] if batch_id in batches else []
    return [b for b in earlier if not is_applied(settings, source, b) and not is_replay_batch(settings, source, b)]


def _applied_marker(settings: "LakeSettings", source: str, batch_id: str) -> Any:
    return settings.staging_root / source / batch_id / "_applied.json"


def is_applied(settings: "LakeSettings", source: str, batch_id: str) -> bool:
    """Whether a batch was applied to its tables (by :func:`apply_batch`)."""
    return _applied_marker(settings, source, batch_id).exists()


def normalize_batch(spark: "SparkSession", settings: "LakeSettings", *, source: str, batch_id: str, fmt: str,
                    keys: "KeySpec | None" = None, ddl_policies: "DdlPolicies | None" = None,
                    time_zone: str | None = None) -> NormalizeResult:
    """Normalize a landed batch into staged canonical records (see :mod:`cdclake.normalize`)."""
    from cdclake.normalize import normalize_batch as run

    return run(spark, settings, source=source, batch_id=batch_id, fmt=fmt, keys=keys, ddl_policies=ddl_policies,
               time_zone=time_zone)


def apply_batch(spark: "SparkSession", settings: "LakeSettings", *, source: str, batch_id: str,
                tables: "Collection[str] | None" = None, options: "Mapping[str, ApplyOptions] | None" = None,
                default: "ApplyOptions | None" = None) -> ApplyResult:
    """Apply a normalized batch to its Iceberg tables (see :mod:`cdclake.apply`).

    Args:
        spark: The session.
        settings: The lake.
        source: Source name.
        batch_id: The normalized batch.
        tables: Apply only these staged tables (``namespace.table``); None applies every staged table. Either
            way the batch is then marked applied.
        options: Per-table apply options (delete mode, write mode, partitioning, ...); others get ``default``
            (cdclake's defaults when None).

    Raises:
        ApplyFailedError: Some tables failed (each is logged with its traceback); every other table was applied,
            and the batch is not marked applied.
    """
    from cdclake.apply_options import ApplyOptions
    from cdclake.exceptions import ApplyFailedError
    from cdclake.normalize import staging_dir

    chosen = dict(options or {})
    fallback = default or ApplyOptions()
    wanted = set(tables) if tables is not None else None
    result = ApplyResult(source, batch_id)
    failures: dict[str, BaseException] = {}
    for tid in staged_table_ids(settings, source, batch_id):
        if (wanted is None or tid in wanted) and (staging_dir(settings, source, batch_id) / tid).exists():
            try:
                result.tables[tid] = apply_staged_table(spark, settings, source=source, batch_id=batch_id,
                                                        table_id=tid, options=chosen.get(tid, fallback))
            except Exception as exc:  # noqa: BLE001 - one table's failure does not stop the others
                log.exception("batch %s of %r: applying table %s failed", batch_id, source, tid)
                failures[tid] = exc
    if failures:
        raise ApplyFailedError(
            f"batch {batch_id} of source {source!r}: {len(failures)} table(s) failed to apply, the other "
            f"{len(result.tables)} were applied; the batch is not marked applied (a re-run applies it again): "
            + "; ".join(f"{tid}: {_first_line(exc)}" for tid, exc in sorted(failures.items())), failures)
    mark_applied(settings, result)
    return result


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"[:300]


# --- per-table stages (used by the per-source DAGs, where each table is its own mapped task) -------------------

def staged_table_ids(settings: "LakeSettings", source: str, batch_id: str) -> list[str]:
    """Tables normalize staged for a batch, sorted (empty when the batch was not normalized)."""
    from cdclake.normalize import staged_tables

    return sorted(staged_tables(settings, source, batch_id))


def apply_staged_table(spark: "SparkSession", settings: "LakeSettings", *, source: str, batch_id: str,
                       table_id: str, options: "ApplyOptions | None" = None) -> TableCounts:
    """Apply one table's staged changes of a normalized batch; the batch is not marked applied (see
    :func:`mark_applied`). A table the batch did not stage is a no-op with the table's current row count.

    Raises:
        StorageError: The batch was not normalized.
    """
    from cdclake.apply import apply_table
    from cdclake.exceptions import StorageError
    from cdclake.normalize import read_staged, staged_tables, staging_dir

    tables = staged_tables(settings, source, batch_id)
    if not tables:
        raise StorageError(f"batch {batch_id} of source {source!r} is not normalized "
                           f"(no staging marker under {staging_dir(settings, source, batch_id)})")
    path = staging_dir(settings, source, batch_id) / table_id
    if table_id not in tables or not path.exists():
        from cdclake.catalog import table_exists
        from cdclake.identity import spark_table_name

        rows = spark.table(spark_table_name(table_id)).count() if table_exists(spark, table_id) else 0
        return TableCounts(rows_before=rows, rows_after=rows)
    from cdclake.apply_options import ApplyOptions

    return apply_table(spark, read_staged(spark, path), tid=table_id, key=tables[table_id]["key"],
                       options=options or ApplyOptions(), source=source, batch_id=batch_id,
                       defaults=tables[table_id].get("defaults", ()),
                       source_table=tables[table_id].get("source_table"),
                       connect_types=tables[table_id].get("connect_types", {}),
                       snapshot_ends=tables[table_id].get("snapshot_ends", ()))


def mark_applied(settings: "LakeSettings", result: ApplyResult) -> None:
    """Record that a batch was applied (what :func:`is_applied` and :func:`next_batch` read)."""
    marker = _applied_marker(settings, result.source, result.batch_id)
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps(result.to_dict(), indent=2))


def validate_batch(spark: "SparkSession", settings: "LakeSettings", *, source: str, batch_id: str,
                   applied: ApplyResult, run_id: str, config: "DqConfig | None" = None) -> list["ValidationSummary"]:
    """Validate every table a batch touched with Great Expectations (see :mod:`cdclake.quality`).

    Per table, two suites run (:mod:`cdclake.dq_suites`): the table suite on the table after apply (key not null
    and unique, row count = rows before + inserted - deleted, bookkeeping columns, column types, freshness, plus
    the user suite ``<suites_dir>/<table>.yaml``), and the batch suite on the batch's staged canonical changes.

    Args:
        spark: The session.
        settings: The lake.
        source: Source name.
        batch_id: The applied batch.
        applied: What applying it did (row counts per table).
        run_id: Names the validation run.
        config: Data-quality configuration; default :meth:`cdclake.dq_config.DqConfig.from_env`.

    Returns:
        Table suite then batch suite summary, per table in name order.

    Raises:
        ConfigError: A user suite file is malformed.
    """
    from cdclake import dq_suites
    from cdclake.apply_options import SOFT_DELETE_COLUMN
    from cdclake.catalog import key_columns_of, table_schema
    from cdclake.dq_config import DqConfig
    from cdclake.identity import spark_table_name
    from cdclake.quality import validate_table

    config = config or DqConfig.from_env()
    summaries = []
    for tid, counts in sorted(applied.tables.items()):
        sla = config.freshness_sla(tid)
        specs = dq_suites.merge(dq_suites.table_expectations(table_schema(spark, tid), freshness_sla=sla),
                                dq_suites.load_user_suite(config.suites_dir, tid))
        table = spark.table(spark_table_name(tid))
        if SOFT_DELETE_COLUMN in table.columns:  # soft deletes: the suites see the live rows
            table = table.where(f"NOT coalesce({SOFT_DELETE_COLUMN}, false)")
        summaries.append(validate_table(
            table, table_id=tid, key_columns=key_columns_of(spark, tid),
            expected_row_count=counts.rows_after, dq_root=settings.dq_root, run_id=run_id, batch_id=batch_id,
            extra_expectations=specs, expectation_parameters=dq_suites.table_parameters(freshness_sla=sla),
        ))
        batch = validate_batch_changes(spark, settings, source=source, batch_id=batch_id, table_id=tid,
                                       run_id=run_id, config=config)
        if batch is not None:
            summaries.append(batch)
    return summaries


def validate_batch_changes(spark: "SparkSession", settings: "LakeSettings", *, source: str, batch_id: str,
                           table_id: str, run_id: str, config: "DqConfig") -> "ValidationSummary | None":
    """The batch suite of one table: its staged canonical changes of the batch (ops in the allowed set, positions
    present and increasing per key within a file, source times not in the future, the table's quarantined share
    of the batch under the threshold: :func:`quarantined_share`). None when the batch staged nothing for it."""
    from cdclake import dq_suites
    from cdclake.normalize import read_staged, staging_dir
    from cdclake.quality import batch_suite_name, validate_table

    staged = staging_dir(settings, source, batch_id) / table_id
    if not staged.exists():
        return None
    staged_changes = read_staged(spark, staged)
    share = quarantined_share(spark, source=source, batch_id=batch_id, table_id=table_id,
                              staged=staged_changes.count())
    changes = dq_suites.batch_frame(staged_changes, quarantined_share=share)
    return validate_table(
        changes, table_id=table_id, key_columns=[], expected_row_count=None, dq_root=settings.dq_root,
        run_id=run_id, batch_id=batch_id, suite=batch_suite_name(table_id),
        extra_expectations=dq_suites.batch_expectations(max_quarantined_share=config.max_quarantined_share),
        expectation_parameters=dq_suites.batch_parameters(future_tolerance=config.future_tolerance),
    )


def quarantined_share(spark: "SparkSession", *, source: str, batch_id: str, table_id: str, staged: int) -> float:
    """A table's quarantined share of a batch: its quarantined messages and those of no known table (malformed
    JSON, an unknown shape: they may be the table's), over those plus its ``staged`` changes (0 when there are
    none). Another table's bad messages do not count against it."""
    from cdclake import quarantine
    from cdclake.catalog import sql_literal

    name = quarantine.ensure_table(spark)
    held = spark.sql(f"SELECT count(*) FROM {name} WHERE source = '{sql_literal(source)}' "
                     f"AND batch_id = '{sql_literal(batch_id)}' "
                     f"AND (table_id = '{sql_literal(table_id)}' OR table_id IS NULL)").first()[0]
    return held / (held + staged) if held + staged else 0.0


@dataclass(frozen=True)
class ReplayResult:
    """One replay batch: which quarantined messages went in and what became of them."""

    source: str
    fmt: str
    replayed: int
    normalized: NormalizeResult | None
    applied: ApplyResult | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source, "format": self.fmt, "replayed": self.replayed,
            "batch_id": self.normalized.batch_id if self.normalized else None,
            "tables": {t: c.summary() for t, c in self.applied.tables.items()} if self.applied else {},
            "quarantined": self.normalized.quarantined if self.normalized else 0,
            "skipped": self.normalized.skipped if self.normalized else {},
        }


def replay_quarantine(spark: "SparkSession", settings: "LakeSettings", *, source: str | None = None,
                      reason: str | None = None, fmt: str | None = None,
                      keys: "KeySpec | None" = None,
                      ddl_policies: "DdlPolicies | None" = None,
                      options_for: "Callable[[str], ApplyOptions] | None" = None,
                      time_zone: str | None = None) -> list[ReplayResult]:
    """Re-run quarantined messages through the current code (a fixed parser, a declared key, ...).

    The selected messages of each (source, format) are landed as a new batch of that source (``kcat -J`` framing,
    keeping each message's key and Kafka offset), normalized and applied like any batch; their original
    quarantine rows are then removed. Messages that fail again are quarantined again, under the new batch, with
    their current reason and where they were first landed (input, line, offsets:
    :data:`cdclake.quarantine.ORIGIN_HEADER`). Changes keep their source positions, so a replayed change never
    overrides a newer one.

    Args:
        spark: The session.
        settings: The lake.
        source: Only this source's messages.
        reason: Only messages whose reason contains this text (case-insensitive).
        fmt: Read them as this format instead of the one they were quarantined under.
        keys: Declared primary keys.
        ddl_policies: Each table's DDL policy (after a ``fail`` stop, the policy that now applies).
        options_for: Each table's apply options (a source config's); default: cdclake's defaults.
        time_zone: The source's time zone for timestamp texts without an offset (see :func:`normalize_batch`).
    """
    import datetime as dt

    from cdclake import quarantine
    from cdclake.landing import InputFile, land_files
    from cdclake.catalog import sql_literal
    from cdclake.normalize import normalize_batch as run_normalize

    name = quarantine.ensure_table(spark)
    selected_at = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")
    where = [f"quarantined_at <= timestamp'{selected_at}'"]
    if source:
        where.append(f"source = '{sql_literal(source)}'")
    if reason:
        where.append(f"lower(reason) LIKE '%{sql_literal(reason.lower())}%'")
    condition = " AND ".join(where)
    rows = spark.sql(f"SELECT * FROM {name} WHERE {condition} ORDER BY source, batch_id, input, line, "
                     "byte_offset, kafka_offset").collect()
    groups: dict[tuple[str, str], list[Any]] = {}
    for row in rows:
        groups.setdefault((row["source"], fmt or row["format"]), []).append(row)
    results = []
    for (src, group_fmt), members in groups.items():
        lines = [json.dumps({"topic": f"cdclake-replay:{r['input']}", "partition": 0,
                             "offset": r["kafka_offset"] if r["kafka_offset"] is not None else r["line"],
                             "headers": {quarantine.ORIGIN_HEADER: json.dumps(
                                 {"input": r["input"], "line": r["line"], "byte_offset": r["byte_offset"],
                                  "kafka_offset": r["kafka_offset"]})},
                             "key": r["raw_key"], "payload": r["raw_value"]}, ensure_ascii=False)
                 for r in members]
        batches = sorted({r["batch_id"] for r in members})
        uri = f"{quarantine.REPLAY_SCHEME}{src}/{batches[0]}-{batches[-1]}/{selected_at.replace(' ', 'T')}"
        batch_id, _, _, _ = land_files(settings, source=src, framing="kcat",
                                       files=[InputFile(uri, ("\n".join(lines) + "\n").encode("utf-8"))])
        normalized = run_normalize(spark, settings, source=src, batch_id=batch_id, fmt=group_fmt, keys=keys,
                                   ddl_policies=ddl_policies, time_zone=time_zone)
        applied = apply_batch(spark, settings, source=src, batch_id=batch_id, options=None if options_for is None else
                              {t: options_for(t) for t in staged_table_ids(settings, src, batch_id)})
        in_batches = ", ".join(f"'{sql_literal(b)}'" for b in batches)
        same_format = "" if fmt else f" AND format = '{sql_literal(group_fmt)}'"
        spark.sql(f"DELETE FROM {name} WHERE {condition} AND source = '{sql_literal(src)}' "
                  f"AND batch_id IN ({in_batches}) AND batch_id <> '{sql_literal(batch_id)}'{same_format}")
        log.info("replayed %d quarantined message(s) of %r as batch %s: %d quarantined again", len(members), src,
                 batch_id, normalized.quarantined)
        results.append(ReplayResult(src, group_fmt, len(members), normalized, applied))
    return results
