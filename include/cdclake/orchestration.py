"""Task bodies of the ``cdclake_ingest`` DAG: plain functions from DAG params and upstream results to JSON.

The DAG file only wires these together, so it stays cheap to parse; everything heavy (Spark, Great Expectations,
pyiceberg) is imported inside the functions, when a task runs. Every function takes the run's params (a mapping
as Airflow passes it) and the upstream task's result dict, and returns a dict fit for XCom.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

# The cdclake_ingest DAG catches it as orchestration.ValidationFailedError.
from cdclake.dq_gate import ValidationFailedError  # noqa: F401
from cdclake.exceptions import ConfigError
from cdclake.settings import LakeSettings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

SPARK_APP_NAME = "cdclake-airflow"


def default_lake() -> str:
    """Default of the ``lake`` param: ``CDCLAKE_LAKE``, else ``lake`` (relative to the worker's directory)."""
    return os.environ.get("CDCLAKE_LAKE") or "lake"


@dataclass(frozen=True)
class RunParams:
    """The DAG params of one run, resolved.

    Attributes:
        source: Source name (raw zone prefix, batch ids are per source).
        fmt: Change-stream format of the source (``debezium``, ``canal``, ...).
        lake: Lake root directory.
        inbox: Inbox location (directory or ``s3://`` prefix); empty means ``<lake>/inbox``.
        keys: Declared primary keys, ``[TABLE=]COL[,COL]`` each.
    """

    source: str
    fmt: str
    lake: str
    inbox: str
    keys: tuple[str, ...] = ()

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> RunParams:
        """Read the DAG params (``source``, ``format``, ``lake``, ``inbox``, ``keys``).

        Raises:
            ConfigError: ``keys`` is not a list of strings, or ``source``/``format`` is empty.
        """
        keys = params.get("keys") or []
        if isinstance(keys, str) or not all(isinstance(k, str) for k in keys):
            raise ConfigError(f"param keys={keys!r}: expected a list of [TABLE=]COL[,COL] strings")
        source = str(params.get("source") or "").strip()
        fmt = str(params.get("format") or "").strip()
        if not source or not fmt:
            raise ConfigError(f"params source={source!r}, format={fmt!r}: both must be non-empty")
        return cls(
            source=source,
            fmt=fmt,
            lake=str(params.get("lake") or default_lake()),
            inbox=str(params.get("inbox") or ""),
            keys=tuple(keys),
        )

    def settings(self) -> LakeSettings:
        """The lake's settings (``CDCLAKE_*`` variables still override individual locations)."""
        return LakeSettings.from_env(self.lake)

    def inbox_location(self, settings: LakeSettings) -> str:
        """The inbox to land from: the ``inbox`` param, or ``<lake>/inbox``."""
        return self.inbox or str(settings.root / "inbox")


def _spark(settings: LakeSettings) -> SparkSession:
    from cdclake.spark import get_spark

    return get_spark(settings, app_name=SPARK_APP_NAME)


def land_batch(params: Mapping[str, Any]) -> dict[str, Any] | None:
    """The batch this run processes: a landed-but-unapplied one first, else the inbox's new files as a new batch.

    Args:
        params: The run's DAG params.

    Returns:
        The ``LandResult`` as a dict, or None when the inbox held nothing new (the DAG then skips the rest).
    """
    from cdclake import pipeline

    run = RunParams.from_params(params)
    settings = run.settings()
    inbox = run.inbox_location(settings)
    result = pipeline.next_batch(settings, source=run.source, inbox=inbox)
    if result.batch_id is None:
        log.info("nothing new in inbox %s for source %s", inbox, run.source)
        return None
    if not result.created:
        log.info("resuming batch %s of source %s: landed earlier but never applied", result.batch_id, run.source)
        return result.to_dict()
    log.info("landed batch %s of source %s: %d messages from %s (manifest %s)", result.batch_id, run.source,
             result.message_count, inbox, result.manifest)
    return result.to_dict()


def normalize_batch(params: Mapping[str, Any], landed: Mapping[str, Any]) -> dict[str, Any]:
    """Normalize a landed batch into canonical change records per table.

    Args:
        params: The run's DAG params.
        landed: Result of :func:`land_batch`.

    Returns:
        The ``NormalizeResult`` as a dict.
    """
    from cdclake import pipeline
    from cdclake.keys import KeySpec

    run = RunParams.from_params(params)
    settings = run.settings()
    keys = KeySpec.parse(run.keys)
    result = pipeline.normalize_batch(_spark(settings), settings, source=run.source, batch_id=landed["batch_id"],
                                      fmt=run.fmt, keys=keys)
    tables = ", ".join(f"{t}: {n}" for t, n in sorted(result.tables.items())) or "none"
    log.info("normalized batch %s (%s): %s; quarantined %d; skipped %s", result.batch_id, run.fmt, tables,
             result.quarantined, result.skipped or "none")
    return result.to_dict()


def apply_changes(params: Mapping[str, Any], normalized: Mapping[str, Any]) -> dict[str, Any]:
    """Apply a normalized batch to the Iceberg tables.

    Args:
        params: The run's DAG params.
        normalized: Result of :func:`normalize_batch`.

    Returns:
        The ``ApplyResult`` as a dict.
    """
    from cdclake import pipeline

    run = RunParams.from_params(params)
    settings = run.settings()
    result = pipeline.apply_batch(_spark(settings), settings, source=run.source, batch_id=normalized["batch_id"])
    for table, c in sorted(result.tables.items()):
        log.info("%s: +%d inserted, ~%d updated, -%d deleted, %d stale skipped; rows %d -> %d", table, c.inserted,
                 c.updated, c.deleted, c.skipped_stale, c.rows_before, c.rows_after)
    return result.to_dict()


def validate_tables(params: Mapping[str, Any], applied: Mapping[str, Any], *, run_id: str,
                    dag_id: str | None = None) -> dict[str, Any]:
    """Validate the tables a batch touched, apply each table's policy and store the results
    (:func:`cdclake.dq_gate.gate_batch`, which the spark-submit job ``jobs/validate_tables.py`` runs too).

    Every expectation's outcome goes to ``cdclake_meta.dq_results`` (:mod:`cdclake.dq_results`) and GE's Data
    Docs. A table whose suites failed is then ``failed`` (policy ``fail``), ``warned`` (``warn``) or
    ``quarantined`` (``quarantine``: its changes of the batch are held back, :mod:`cdclake.dq_hold`).

    Args:
        params: The run's DAG params (``dq_policy`` chooses the policies; see :mod:`cdclake.dq_config`).
        applied: Result of :func:`apply_changes`.
        run_id: The Airflow run id; names the validation run in the report.
        dag_id: The Airflow DAG, stored with the results.

    Returns:
        :func:`~cdclake.dq_gate.gate_batch`'s compact report (``success`` is False only when a ``fail`` table
        failed).

    Raises:
        ValidationFailedError: A table with the ``fail`` policy failed (see :func:`~cdclake.dq_gate.gate_batch`).
    """
    from cdclake.dq_config import DqConfig
    from cdclake.dq_gate import gate_batch
    from cdclake.pipeline import ApplyResult

    run = RunParams.from_params(params)
    settings = run.settings()
    return gate_batch(_spark(settings), settings, source=run.source, applied=ApplyResult.from_dict(dict(applied)),
                      run_id=run_id, config=DqConfig.from_env(policy=params.get("dq_policy")), dag_id=dag_id)
