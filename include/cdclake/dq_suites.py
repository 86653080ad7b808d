"""Expectation suites beyond the key and row-count core of :mod:`cdclake.quality`: generated and user-written.

Per table (suite ``cdclake.<namespace>.<table>``, run on the table after apply), generated from the catalog:

* every bookkeeping column exists; ``_cdc_position``, ``_cdc_op``, ``_cdc_batch_id`` and ``_cdc_applied_at`` are
  never null;
* every column has the type the Iceberg schema says (Spark type names, e.g. ``IntegerType``);
* freshness, when the table has an SLA: the newest ``_cdc_source_ts`` is at most the SLA old;
* plus the user suite ``<suites_dir>/<namespace>.<table>.yaml``, if any.

Per micro-batch (suite ``cdclake_batch.<namespace>.<table>``, run on the batch's staged canonical changes):

* ``op`` is one of ``c u d r t``; ``position`` is never null;
* positions increase per key within an input file (``_position_in_file_order``, false where a change of a key has
  a lower position than the key's previous change in the same file);
* ``source_ts`` is not in the future (beyond a clock-skew tolerance);
* the table's share of the batch's quarantined messages (``_batch_quarantined_share``) is at most the
  threshold.

A user suite is YAML, one file per table::

    # include/dq_suites/public.orders.yaml
    expectations:
      - type: expect_column_values_to_be_between      # or the class name, ExpectColumnValuesToBeBetween
        kwargs: {column: amount, min_value: 0}
        notes: Amounts are never negative.
      - type: expect_column_values_to_match_regex
        kwargs: {column: status, regex: "^[a-z_]+$"}

Any Great Expectations 1.x expectation works; its kwargs are checked when the file is loaded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from cdclake.exceptions import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

BOOKKEEPING_COLUMNS = ("_cdc_position", "_cdc_op", "_cdc_source_ts", "_cdc_batch_id", "_cdc_applied_at")
NON_NULL_BOOKKEEPING = ("_cdc_position", "_cdc_op", "_cdc_batch_id", "_cdc_applied_at")
ALLOWED_OPS = ("c", "u", "d", "r", "t")
FRESHNESS_PARAMETER = "freshness_cutoff"
FUTURE_PARAMETER = "latest_allowed_source_ts"
QUARANTINED_SHARE_COLUMN = "_batch_quarantined_share"
IN_ORDER_COLUMN = "_position_in_file_order"
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
"""Word starts in a class name: a capital after a lower-case letter or digit, and the last capital of an acronym
before a word (``KLDivergence`` -> ``KL``, ``Divergence``)."""


@dataclass(frozen=True)
class ExpectationSpec:
    """One expectation as data: GE type (snake_case) and kwargs, plus where it came from.

    Attributes:
        type: GE expectation type, e.g. ``expect_column_values_to_be_between``.
        kwargs: The expectation's arguments (``column``, ``min_value``, ...); ``{"$PARAMETER": name}`` values are
            filled per run.
        origin: ``generated``, or the user suite file and item it came from.
        notes: Shown in Data Docs.
    """

    type: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    origin: str = "generated"
    notes: str | None = None

    def build(self) -> Any:
        """The Great Expectations expectation object.

        Raises:
            ConfigError: Unknown type or invalid kwargs; the message names :attr:`origin`.
        """
        from great_expectations.expectations.registry import get_expectation_impl

        try:
            impl = get_expectation_impl(self.type)
        except Exception as exc:  # noqa: BLE001 - GE raises its own error types for unknown names
            raise ConfigError(f"{self.origin}: unknown Great Expectations expectation {self.type!r}") from exc
        kwargs = dict(self.kwargs)
        if self.notes:
            kwargs["notes"] = self.notes
        try:
            return impl(**kwargs)
        except Exception as exc:  # noqa: BLE001 - pydantic validation errors of the expectation's fields
            raise ConfigError(f"{self.origin}: invalid kwargs for {self.type}: {exc}") from exc


def snake_case(name: str) -> str:
    """``ExpectColumnValuesToBeBetween`` -> ``expect_column_values_to_be_between`` (snake_case stays as is)."""
    return name if "_" in name or name.islower() else _CAMEL.sub("_", name).lower()


def user_suite_path(suites_dir: Path, table_id: str) -> Path:
    """Where a table's user suite lives: ``<suites_dir>/<namespace>.<table>.yaml``."""
    return Path(suites_dir) / f"{table_id}.yaml"


def load_user_suite(suites_dir: Path, table_id: str) -> list[ExpectationSpec]:
    """A table's user expectations (empty when it has no suite file).

    Raises:
        ConfigError: The file is not valid YAML, not of the documented shape, or names an unknown expectation or
            invalid kwargs; the message names the file and item.
    """
    import yaml

    path = user_suite_path(suites_dir, table_id)
    if not path.is_file():
        return []
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    items = data.get("expectations") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise ConfigError(f"{path}: expected a mapping with a list 'expectations' of {{type, kwargs}} items")
    specs = []
    for number, item in enumerate(items, start=1):
        where = f"{path} expectation {number}"
        if not isinstance(item, dict) or not isinstance(item.get("type"), str):
            raise ConfigError(f"{where}: expected a mapping with 'type' (a GE expectation) and 'kwargs'")
        kwargs = item.get("kwargs") or {}
        if not isinstance(kwargs, dict):
            raise ConfigError(f"{where}: 'kwargs' must be a mapping, got {type(kwargs).__name__}")
        spec = ExpectationSpec(type=snake_case(item["type"]), kwargs=kwargs, origin=where, notes=item.get("notes"))
        spec.build()  # fail at load time, naming the file, rather than halfway through a validation run
        specs.append(spec)
    return specs


def table_expectations(schema: "StructType", *, freshness_sla: timedelta | None) -> list[ExpectationSpec]:
    """The generated table expectations beyond key and row count (see the module docstring).

    Args:
        schema: The table's schema as the Iceberg catalog gives it (user and bookkeeping columns).
        freshness_sla: Maximum age of the newest ``_cdc_source_ts``, or None for no freshness expectation.
    """
    specs = [ExpectationSpec("expect_column_to_exist", {"column": c}) for c in BOOKKEEPING_COLUMNS]
    specs += [ExpectationSpec("expect_column_values_to_not_be_null", {"column": c}) for c in NON_NULL_BOOKKEEPING]
    specs += [ExpectationSpec("expect_column_values_to_be_of_type",
                              {"column": f.name, "type_": type(f.dataType).__name__}) for f in schema.fields]
    if freshness_sla is not None:
        specs.append(ExpectationSpec(
            "expect_column_max_to_be_between",
            {"column": "_cdc_source_ts", "min_value": {"$PARAMETER": FRESHNESS_PARAMETER}},
            notes=f"Freshness: the newest source timestamp is at most {freshness_sla} old.",
        ))
    return specs


def table_parameters(*, freshness_sla: timedelta | None, now: datetime | None = None) -> dict[str, Any]:
    """Run-time suite parameters of the table suite (the freshness cutoff, naive UTC like Spark's timestamps)."""
    if freshness_sla is None:
        return {}
    now = now or datetime.now(timezone.utc)
    return {FRESHNESS_PARAMETER: (now - freshness_sla).astimezone(timezone.utc).replace(tzinfo=None)}


def batch_expectations(*, max_quarantined_share: float) -> list[ExpectationSpec]:
    """The generated micro-batch expectations (see the module docstring)."""
    return [
        ExpectationSpec("expect_column_values_to_be_in_set", {"column": "op", "value_set": list(ALLOWED_OPS)}),
        ExpectationSpec("expect_column_values_to_not_be_null", {"column": "position"}),
        ExpectationSpec("expect_column_values_to_be_in_set", {"column": IN_ORDER_COLUMN, "value_set": [True]},
                        notes="Positions increase per key within an input file."),
        ExpectationSpec("expect_column_values_to_be_between",
                        {"column": "source_ts", "max_value": {"$PARAMETER": FUTURE_PARAMETER}},
                        notes="Source timestamps are not in the future."),
        ExpectationSpec("expect_column_max_to_be_between",
                        {"column": QUARANTINED_SHARE_COLUMN, "max_value": max_quarantined_share},
                        notes="Share of the batch's messages that were quarantined."),
    ]


def batch_parameters(*, future_tolerance: timedelta, now: datetime | None = None) -> dict[str, Any]:
    """Run-time suite parameters of the batch suite."""
    now = now or datetime.now(timezone.utc)
    return {FUTURE_PARAMETER: (now + future_tolerance).astimezone(timezone.utc).replace(tzinfo=None)}


def batch_frame(changes: "DataFrame", *, quarantined_share: float) -> "DataFrame":
    """The columns the batch suite checks, from a table's staged canonical changes (pure).

    Args:
        changes: Canonical change records of one table of one batch.
        quarantined_share: The table's quarantined share of the batch (:func:`cdclake.pipeline.quarantined_share`).
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    order = [F.col(c) for c in ("raw_line", "raw_offset") if c in changes.columns] + [F.col("position")]
    window = Window.partitionBy(F.col("input_file"), F.to_json(F.col("key"))).orderBy(*order)
    previous = F.lag("position").over(window)
    return changes.select(
        "op", "position", "source_ts", "input_file", "raw_line", F.to_json(F.col("key")).alias("key"),
        F.when(previous.isNull(), F.lit(None)).otherwise(F.col("position") >= previous).alias(IN_ORDER_COLUMN),
        F.lit(float(quarantined_share)).alias(QUARANTINED_SHARE_COLUMN),
    )


def merge(generated: Sequence[ExpectationSpec], user: Sequence[ExpectationSpec]) -> list[ExpectationSpec]:
    """Generated then user expectations; a user expectation with the same type and kwargs replaces the generated."""
    def identity(spec: ExpectationSpec) -> tuple[str, str]:
        return spec.type, repr(sorted(spec.kwargs.items(), key=lambda kv: kv[0]))

    user_ids = {identity(s) for s in user}
    return [s for s in generated if identity(s) not in user_ids] + list(user)
