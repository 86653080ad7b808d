"""Column-expression plans that a process builds once and reuses for every batch.

Building a wide expression from Python is one call into the JVM per node: the parse of a format, or the typing of
a table's images, is hundreds to thousands of calls (0.4 s per table and up to 1.5 s per parse on two CPUs), as
much as the rest of a small batch's driver work. The expressions are unresolved column references and carry no
batch data, so a plan built for one batch serves the next one of the same shape. :func:`cached_plan` keeps the
plans of a process, per py4j gateway (a new session's JVM gets its own), newest used last, at most
:data:`MAX_PLANS` of them.

A plan's key must name everything its expressions depend on. :func:`fingerprint` turns the values a plan is built
from (dataclasses, Spark types, the decoder functions of a table's columns with the values they captured) into
such a key; a value it cannot vouch for raises :class:`Unkeyable`, and the caller builds that plan afresh.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import types
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql.types import DataType

log = logging.getLogger(__name__)

MAX_PLANS = 256
"""Plans a process keeps; the least recently used goes first (each holds its expressions in the JVM)."""

_MAX_DEPTH = 16


class Unkeyable(Exception):
    """A value whose fingerprint could not say everything it stands for (the plan is not cached)."""


@dataclass(frozen=True)
class ColumnPlan:
    """Steps over a frame, in order: ``("add", columns)`` is ``select("*", *columns)``, ``("select", columns)``
    is ``select(*columns)``."""

    steps: tuple[tuple[str, tuple[Column, ...]], ...]

    @classmethod
    def of(cls, *items: tuple[str, Sequence[Column]]) -> "ColumnPlan":
        return cls(tuple((kind, tuple(columns)) for kind, columns in items))

    def apply(self, frame: DataFrame) -> DataFrame:
        for kind, columns in self.steps:
            frame = frame.select("*", *columns) if kind == "add" else frame.select(*columns)
        return frame


_PLANS: OrderedDict[Hashable, ColumnPlan] = OrderedDict()


def cached_plan(key: tuple[Any, ...] | None, build: Callable[[], ColumnPlan]) -> ColumnPlan:
    """The plan for ``key`` in this process and JVM, built by ``build`` on first use (every time for None)."""
    from pyspark import SparkContext

    if key is None:
        return build()
    full = (*key, id(SparkContext._gateway))  # type: ignore[attr-defined]
    plan = _PLANS.get(full)
    if plan is None:
        plan = _PLANS[full] = build()
        if len(_PLANS) > MAX_PLANS:
            _PLANS.popitem(last=False)
    else:
        _PLANS.move_to_end(full)
    return plan


def fingerprint(value: Any, depth: int = 0) -> Hashable:
    """A hashable value equal for two values only when a plan built from either is the same plan.

    Functions are their code, defaults and captured values (two lambdas from one line that captured equal values
    decode alike); functions they call by name are module-level and the same in every batch.

    Raises:
        Unkeyable: A value of another kind (an object compared by identity, a JVM object), or nesting too deep.
    """
    if depth > _MAX_DEPTH:
        raise Unkeyable("nested too deep")
    inner = functools.partial(fingerprint, depth=depth + 1)
    if value is None or isinstance(value, (str, int, float, bytes)):
        return type(value).__name__, value  # True and 1 are equal and hash alike; their plans may not be
    if isinstance(value, DataType):
        return "type", value.json()
    if isinstance(value, (tuple, list)):
        return type(value).__name__, tuple(inner(v) for v in value)
    if isinstance(value, (set, frozenset)):
        return "set", frozenset(inner(v) for v in value)
    if isinstance(value, dict):
        return "dict", frozenset((inner(k), inner(v)) for k, v in value.items())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return type(value), tuple(inner(getattr(value, f.name)) for f in dataclasses.fields(value))
    if isinstance(value, functools.partial):
        return "partial", inner(value.func), inner(value.args), inner(value.keywords)
    if isinstance(value, types.FunctionType):
        try:
            cells = tuple(inner(c.cell_contents) for c in value.__closure__ or ())
        except ValueError as exc:  # an empty cell: the function is not finished being defined
            raise Unkeyable(f"{value.__qualname__}: {exc}") from exc
        # The module too: two modules' functions can have equal code and read different globals.
        return ("function", value.__module__, value.__code__, inner(value.__defaults__), inner(value.__kwdefaults__),
                cells)
    if isinstance(value, types.MethodType):
        return "method", inner(value.__func__), inner(value.__self__)
    if isinstance(value, (types.BuiltinFunctionType, type)):
        return "named", value
    raise Unkeyable(f"a {type(value).__name__}")


def plan_key(*parts: Any) -> tuple[Any, ...] | None:
    """``fingerprint`` of each part, or None (with a debug log line) when one of them cannot be fingerprinted."""
    try:
        return tuple(fingerprint(p) for p in parts)
    except Unkeyable as exc:
        log.debug("expressions built afresh (not cached): %s", exc)
        return None
