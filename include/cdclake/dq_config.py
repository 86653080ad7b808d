"""Data-quality configuration: the gating policy per table, freshness SLAs, batch thresholds, user suites.

Policies say what a failed validation of a table does to the run:

* ``fail`` — the ``validate_tables`` task fails, naming the failed expectations and the report (the default);
* ``warn`` — the task succeeds; the table is marked ``warned`` in the report and in ``cdclake_meta.dq_results``;
* ``quarantine`` — the batch's changes to that table are held back: the table is rolled back past the batch's
  commits, the staged changes are kept under ``staging/<source>/<batch>/_held/`` and ``cdclake dq release``
  applies and validates them again after a fix (see :mod:`cdclake.dq_hold`, :mod:`cdclake.dq_gate`). The task
  succeeds.

Policies come as a mapping (``{"default": "fail", "public.orders": "warn"}``) or as text, the form of the DAG param
and of ``CDCLAKE_DQ_POLICY``: ``warn`` (every table) or ``public.orders=warn,public.customers=quarantine,default=fail``.
Issue 6 (YAML source config) is expected to build :class:`DqConfig` from its own files; everything here is typed
and frozen so it can.

Environment: ``CDCLAKE_DQ_POLICY`` (default ``fail``), ``CDCLAKE_DQ_FRESHNESS`` (per-table SLAs, e.g.
``public.orders=2h,default=1d``; unset: no freshness expectation), ``CDCLAKE_DQ_MAX_QUARANTINED_SHARE`` (default
``0.1``), ``CDCLAKE_DQ_SUITES`` (directory of user suites, default ``<repo>/include/dq_suites``).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from datetime import timedelta
from enum import Enum
from pathlib import Path
from typing import Any, Mapping

from cdclake.exceptions import ConfigError

DEFAULT_KEY = "default"
DEFAULT_SUITES_DIR = Path(__file__).resolve().parents[1] / "dq_suites"


def suites_dir(env: Mapping[str, str] | None = None) -> Path:
    """The directory of user suites: ``CDCLAKE_DQ_SUITES``, else :data:`DEFAULT_SUITES_DIR`."""
    env = os.environ if env is None else env
    return Path(env["CDCLAKE_DQ_SUITES"]) if env.get("CDCLAKE_DQ_SUITES") else DEFAULT_SUITES_DIR
"""``include/dq_suites``: one YAML file per table, ``<namespace>.<table>.yaml``."""

DEFAULT_MAX_QUARANTINED_SHARE = 0.1
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


class Policy(str, Enum):
    """What a failed validation of a table does to the run (see the module docstring)."""

    FAIL = "fail"
    WARN = "warn"
    QUARANTINE = "quarantine"

    @classmethod
    def parse(cls, value: str, *, where: str) -> "Policy":
        """Parse a policy name.

        Raises:
            ConfigError: An unknown name; the message says where it came from and lists the valid ones.
        """
        try:
            return cls(value.strip().lower())
        except ValueError:
            valid = ", ".join(p.value for p in cls)
            raise ConfigError(f"{where}: unknown data-quality policy {value!r}; expected one of {valid}") from None


def _pairs(text: str, *, where: str) -> dict[str, str]:
    """``a=1,b=2`` (or a bare value, meaning ``default=value``) as a dict."""
    out: dict[str, str] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, sep, value = item.partition("=")
        if not sep:
            name, value = DEFAULT_KEY, name
        name, value = name.strip(), value.strip()
        if not name or not value:
            raise ConfigError(f"{where}: {item!r} is not TABLE=VALUE (or a bare VALUE for every table)")
        out[name] = value
    return out


@dataclass(frozen=True)
class DqPolicy:
    """The policy of every table: a default and per-table overrides.

    Attributes:
        default: Policy of tables not listed.
        tables: ``namespace.table`` -> policy.
    """

    default: Policy = Policy.FAIL
    tables: Mapping[str, Policy] = field(default_factory=dict)

    def for_table(self, table_id: str) -> Policy:
        """The policy of one table."""
        return self.tables.get(table_id, self.default)

    def to_text(self) -> str:
        """The text form (``TABLE=POLICY,...,default=POLICY``), as :meth:`parse` reads it."""
        items = [f"{t}={p.value}" for t, p in sorted(self.tables.items())]
        return ",".join([*items, f"{DEFAULT_KEY}={self.default.value}"])

    @classmethod
    def parse(cls, value: "str | Mapping[str, str] | DqPolicy | None", *, where: str = "dq_policy",
              fallback: "DqPolicy | None" = None) -> "DqPolicy":
        """Read a policy from text or a mapping (see the module docstring).

        Args:
            value: ``fail``, ``t1=warn,default=fail``, ``{"default": "fail", "t1": "warn"}``, a DqPolicy, or
                None/empty for ``fallback``.
            where: Where the value came from, for error messages.
            fallback: Used when ``value`` is empty; default ``fail`` for every table.

        Raises:
            ConfigError: An unknown policy name, or a table id that is not ``namespace.table``.
        """
        if isinstance(value, DqPolicy):
            return value
        if value is None or (isinstance(value, str) and not value.strip()) or (
                isinstance(value, Mapping) and not value):
            return fallback or cls()
        if isinstance(value, str):
            raw = _pairs(value, where=where)
        elif isinstance(value, Mapping):
            raw = {str(k): str(v) for k, v in value.items()}
        else:
            raise ConfigError(f"{where}={value!r}: expected text such as 't1=warn,default=fail' or a mapping")
        default = fallback.default if fallback else Policy.FAIL
        tables: dict[str, Policy] = dict(fallback.tables) if fallback else {}
        for name, policy in raw.items():
            parsed = Policy.parse(policy, where=f"{where} ({name})")
            if name == DEFAULT_KEY:
                default = parsed
            elif "." not in name:
                raise ConfigError(f"{where}: table {name!r} must be namespace.table (or 'default')")
            else:
                tables[name] = parsed
        return cls(default=default, tables=tables)


def parse_duration(text: str, *, where: str) -> timedelta:
    """``90``, ``90s``, ``15m``, ``2h`` or ``1d`` as a timedelta.

    Raises:
        ConfigError: Not a duration.
    """
    match = _DURATION.match(text)
    if not match:
        raise ConfigError(f"{where}: {text!r} is not a duration such as 90s, 15m, 2h or 1d")
    return timedelta(seconds=float(match.group(1)) * _UNITS[match.group(2)])


@dataclass(frozen=True)
class DqConfig:
    """Everything validation needs besides the data.

    Attributes:
        policy: The gating policy per table.
        freshness: ``namespace.table`` (or ``default``) -> SLA: the newest ``_cdc_source_ts`` must be at most this
            old when the table is validated. A table with no SLA gets no freshness expectation.
        max_quarantined_share: Upper bound of a table's quarantined share of a batch (batch suite).
        suites_dir: Directory of user suites (``<namespace>.<table>.yaml``).
        future_tolerance: How far in the future a change's ``source_ts`` may be (clock skew) in the batch suite.
    """

    policy: DqPolicy = field(default_factory=DqPolicy)
    freshness: Mapping[str, timedelta] = field(default_factory=dict)
    max_quarantined_share: float = DEFAULT_MAX_QUARANTINED_SHARE
    suites_dir: Path = DEFAULT_SUITES_DIR
    future_tolerance: timedelta = timedelta(minutes=5)

    def freshness_sla(self, table_id: str) -> timedelta | None:
        """The freshness SLA of a table, or None."""
        return self.freshness.get(table_id, self.freshness.get(DEFAULT_KEY))

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, *, policy: Any = None) -> "DqConfig":
        """Read ``CDCLAKE_DQ_*`` (see the module docstring); ``policy`` (e.g. the DAG param) overrides the env's.

        Raises:
            ConfigError: A malformed variable or policy; the message names it.
        """
        env = os.environ if env is None else env
        base = DqPolicy.parse(env.get("CDCLAKE_DQ_POLICY"), where="CDCLAKE_DQ_POLICY")
        resolved = DqPolicy.parse(policy, where="dq_policy", fallback=base) if policy else base
        freshness = {name: parse_duration(value, where=f"CDCLAKE_DQ_FRESHNESS ({name})")
                     for name, value in _pairs(env.get("CDCLAKE_DQ_FRESHNESS", ""),
                                               where="CDCLAKE_DQ_FRESHNESS").items()}
        share_text = env.get("CDCLAKE_DQ_MAX_QUARANTINED_SHARE") or str(DEFAULT_MAX_QUARANTINED_SHARE)
        try:
            share = float(share_text)
        except ValueError:
            raise ConfigError(f"CDCLAKE_DQ_MAX_QUARANTINED_SHARE={share_text!r}: expected a number in [0, 1]") from None
        if not 0.0 <= share <= 1.0:
            raise ConfigError(f"CDCLAKE_DQ_MAX_QUARANTINED_SHARE={share_text!r}: expected a number in [0, 1]")
        return cls(policy=resolved, freshness=freshness, max_quarantined_share=share, suites_dir=suites_dir(env))
